"""The container commands of the deployment guide (docs/deployment.md), as CI runs them.

`.ci/container.sh` runs the air-gapped build's block word for word (`python
tests/deployment_doc.py build` prints its commands, one a line), and tests/test_container.py
runs the `docker run` line; so a command that does not work there fails CI instead of a
hospital's IT engineer.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEPLOYMENT = ROOT / "docs" / "deployment.md"


def bash_blocks(text: str | None = None) -> list[str]:
    """Every ```bash block of the guide."""
    text = DEPLOYMENT.read_text(encoding="utf-8") if text is None else text
    return re.findall(r"```bash\n(.*?)```", text, re.DOTALL)


def commands(block: str) -> list[str]:
    """A block's commands, each on one line (continuation lines joined)."""
    return [line for line in re.sub(r"\\\n\s*", " ", block).splitlines() if line.strip()]


def build_commands() -> list[str]:
    """The air-gapped build: the block whose `docker build` runs with --network none."""
    for block in bash_blocks():
        found = commands(block)
        if any(line.startswith("docker build --network none") for line in found):
            return found
    raise AssertionError("docs/deployment.md has no air-gapped `docker build --network none`")


def run_line() -> list[str]:
    """The `docker run -d` line of the guide, as words."""
    for block in bash_blocks():
        for line in commands(block):
            words = shlex.split(line)
            if words[:3] == ["docker", "run", "-d"]:
                return words
    raise AssertionError("docs/deployment.md has no `docker run -d` line")


if __name__ == "__main__":
    if sys.argv[1:] != ["build"]:
        sys.exit("usage: python tests/deployment_doc.py build")
    print("\n".join(build_commands()))

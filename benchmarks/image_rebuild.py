"""A code-only rebuild of the image against a cold build, side by side on this machine.

In a copy of the checkout (HEAD, with the wheels of .ci/container.sh's cache in wheelhouse/),
alternating: a cold build (`--no-cache`: every step of every stage, from the Debian base) and a
rebuild after a one-line change to the code (app/text.py), which the layer order keeps to the
project's wheel and its install. Both are the deployment guide's air-gapped `docker build`, with
podman (`--format docker --layers`). Writes docs/benchmarks/image_build.md; what the builds left
in podman's storage is removed.

    CONTAINERS_CONF=$PWD/.ci/containers.conf python benchmarks/image_rebuild.py --rounds 2

Needs the base image `cpdecomp-base` and the wheels that `bash .ci/container.sh` leaves.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import tarfile
import tempfile
import time
from datetime import date
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "benchmarks" / "image_build.md"
WHEELS = Path(os.environ.get("CPDECOMP_CI_CACHE", "/var/cache/cpdecomp-ci")) / "wheelhouse"
TAG = "localhost/cpdecomp-rebuild-bench"


def images() -> set[str]:
    listed = subprocess.run(["podman", "images", "--all", "--quiet", "--no-trunc"],
                            capture_output=True, text=True, check=True).stdout
    return set(listed.split())


def build(folder: Path, cold: bool) -> float:
    command = ["podman", "build", "--quiet", "--format", "docker", "--layers", "--pull=never",
               "--network", "none", "--build-arg", "BASE_IMAGE=cpdecomp-base", "--tag", TAG]
    started = time.perf_counter()
    subprocess.run([*command, *(["--no-cache"] if cold else []), str(folder)], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    before = images()
    rows = []
    with tempfile.TemporaryDirectory(prefix="cpdecomp-rebuild-") as folder:
        checkout = Path(folder)
        archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True,
                                 check=True).stdout
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(checkout, filter="tar")
        for wheel in WHEELS.glob("*.whl"):
            shutil.copy(wheel, checkout / "wheelhouse" / wheel.name)
        try:
            for round_ in range(args.rounds):
                load = os.getloadavg()[0]
                cold = build(checkout, cold=True)
                with (checkout / "app" / "text.py").open("a") as text:
                    text.write(f"# one-line change {round_}\n")
                code = build(checkout, cold=False)
                rows.append((round_ + 1, cold, code, code / cold, load))
                print(rows[-1], flush=True)
        finally:
            subprocess.run(["podman", "rmi", "--force", TAG], capture_output=True)
            for image in images() - before:  # only what these builds made
                subprocess.run(["podman", "rmi", image], capture_output=True)
    lines = [
        "# A code-only rebuild of the image",
        "",
        "`python benchmarks/image_rebuild.py` (see its docstring): the deployment guide's",
        "air-gapped build with podman, cold (`--no-cache`) against a rebuild after a one-line",
        "change to app/text.py, alternating in one copy of the checkout.",
        "",
        f"{date.today().isoformat()}, {platform.machine()}, {os.cpu_count()} cores shared with "
        "other jobs.",
        "",
        "| round | cold build | code-only rebuild | rebuild / cold | load average at start |",
        "|---|---|---|---|---|",
    ]
    for round_, cold, code, ratio, load in rows:
        lines.append(f"| {round_} | {cold:.0f} s | {code:.0f} s | {ratio:.2f}x | {load:.1f} |")
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()

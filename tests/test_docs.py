"""Every code block of the README and of the documentation site runs, so the docs cannot drift
from the code; and the site builds in strict mode.

The fenced blocks of README.md and docs/**/*.md (with the files their `--8<--` lines include)
are read as a reader sees them:

* `python` blocks: a page's blocks in order, as one script (later blocks use what earlier ones
  made, as in a reader's session), in a fresh interpreter, from a folder that stands for the
  repository's root (its `sample_data/`, `docs/` and packages linked in, so nothing a block
  writes lands in the checkout);
* `bash` and `console` blocks: each block by bash, for real, from the same folder;
* `text` blocks are output, not code; one that starts with `usage: cpdecomp` is compared with
  that command's `--help`.

A command that cannot run inside the test suite (an install, the test command itself, a server
that runs until stopped, the container build) is listed in NOT_RUN below with the reason and
the test or CI step that follows it instead. A block in any other language, a block mixing
listed and unlisted commands, or a listed command no page has any more, fails.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
HELP_COLUMNS = "100"
"""The width the documented `--help` texts were printed at (argparse wraps to $COLUMNS)."""


@dataclass(frozen=True)
class NotRun:
    """A command the docs give that this test does not run, and what checks it instead."""

    command: str
    """A regular expression the whole command (continuations joined, comment dropped) matches."""
    reason: str
    covered_by: str


NOT_RUN = [
    NotRun(r'python3 -m venv \.venv && \. \.venv/bin/activate && pip install -e "\.\[dev\]"',
           "installs the project into a new environment (minutes, and the network)",
           ".ci/run installs it so on a fresh machine; tests/test_packaging.py::"
           "test_dev_installs_everything checks what the dev extra holds"),
    NotRun(r"ruff check \. && mypy && pytest -n 2",
           "the test command itself", ".ci/run runs it (test_the_readme_test_command_is_cis)"),
    NotRun(r"cpdecomp dashboard",
           "starts a server that runs until it is stopped",
           "tests/test_dashboard_command.py::"
           "test_the_dashboard_command_serves_the_app_from_any_folder"),
    NotRun(r"streamlit run app/main\.py",
           "starts a server that runs until it is stopped",
           "every browser test in tests/e2e starts it so (dashboard_driver.dashboard_command)"),
    NotRun(r"cpdecomp warmup",
           "compiles every kernel in a fresh cache folder (about half a minute; the docs' "
           "folder shares the checkout's cache, where it would only load them)",
           "tests/test_warmup.py::test_after_warmup_a_new_process_compiles_no_kernel runs it "
           "in a fresh cache folder"),
    NotRun(r"cpdecomp reproduce --quick --out results/",
           "about 7 minutes of experiments",
           "tests/test_reproduce_cli.py::"
           "test_reproduce_quick_writes_tables_summary_report_and_verdicts"),
    NotRun(r"python -m experiments\.reproduce --quick --out results/",
           "the same run through the module's own entry point",
           "tests/test_experiments.py checks the entry point's arguments; "
           "tests/test_reproduce_cli.py runs the run"),
    NotRun(r"cpdecomp reproduce --out results/",
           "the full run: about 37 minutes on CI's machine",
           "nothing in CI; its output is committed in docs/results/ with its command and seed"),
    NotRun(r"docker build -t cpdecomp \.",
           "the online build: needs Docker and a registry, and CI reaches no registry",
           "tests/test_container.py lints the Dockerfile (hadolint) and holds its policy"),
    NotRun(r"python3\.11 -m pip download --only-binary=:all: --require-hashes -d wheelhouse +"
           r"-r requirements/image\.lock -r requirements/tools\.lock",
           "the air-gapped build's wheels (the network, minutes)",
           ".ci/container.sh runs this very line (tests/deployment_doc.py reads it)"),
    NotRun(r"mmdebstrap --variant=minbase --include=python3,python3-venv,libgomp1 bookworm "
           r"base\.tar .*",
           "the air-gapped build's Debian base (root, minutes)",
           ".ci/container.sh runs this very line (while its cached base is under a week old, "
           "it reuses that)"),
    NotRun(r"docker import base\.tar cpdecomp-base",
           "the air-gapped build, with Docker",
           ".ci/container.sh runs this very line with podman for docker"),
    NotRun(r"docker build --network none --build-arg BASE_IMAGE=cpdecomp-base .* -t cpdecomp \.",
           "the air-gapped build, with Docker",
           ".ci/container.sh runs this very line with podman for docker"),
    NotRun(r"docker run --rm --network none --entrypoint cat cpdecomp "
           r"/opt/cpdecomp/sbom\.cdx\.json > cpdecomp\.cdx\.json",
           "the image's SBOM, with Docker",
           ".ci/container.sh runs this very line; tests/test_container.py::"
           "test_image_carries_its_labels_its_sbom_and_no_pip checks what it wrote"),
    NotRun(r"bash requirements/refresh\.sh",
           "rewrites the lock files from PyPI (the network, minutes)",
           "tests/test_container.py::"
           "test_the_lock_pins_everything_pyproject_asks_for_within_its_ranges"),
    NotRun(r"docker run -d --name cpdecomp .* cpdecomp",
           "runs the hospital container",
           "tests/test_container.py runs this very line with podman (deployment_doc.run_line)"),
]


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    body: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)\n"
                   r"(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL)
INCLUDE = re.compile(r'^--8<-- "(?P<path>[^"]+)"$', re.MULTILINE)
TEXT = {"text"}
PYTHON = {"python", "py"}
SHELL = {"bash", "console", "sh", "shell"}


def page_text(page: Path) -> str:
    """The page as the site shows it: its `--8<--` includes (paths from the root) inlined."""
    return INCLUDE.sub(lambda m: (ROOT / m["path"]).read_text(encoding="utf-8"),
                       page.read_text(encoding="utf-8"))


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page_text(page)
        for match in FENCE.finditer(text):
            indent = len(match["indent"])
            body = "".join(line[indent:] for line in match["body"].splitlines(keepends=True))
            language = match["info"].strip().split(" ")[0].lower()
            found.append(Block(page, text.count("\n", 0, match.start()) + 1, language, body))
    return found


def commands(block: Block) -> list[str]:
    """The block's shell commands: continuations joined; comments, prompts and output
    (`console` lines without `$ `) left out."""
    lines = block.body.splitlines()
    if block.language == "console":
        lines = [line[2:] for line in lines if line.startswith("$ ")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    return [without_comment(line.strip()) for line in joined.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def without_comment(line: str) -> str:
    """The command without a trailing `# comment` (a `#` inside quotes is kept)."""
    words = shlex.split(line, comments=True)
    for hash_sign in re.finditer(r"\s#", line):
        try:
            if shlex.split(line[:hash_sign.start()]) == words:
                return line[:hash_sign.start()].rstrip()
        except ValueError:  # the `#` is inside quotes
            continue
    return line


def not_run(command: str) -> NotRun | None:
    for entry in NOT_RUN:
        if re.fullmatch(entry.command, command):
            return entry
    return None


ALL = blocks()
PYTHON_PAGES = sorted({block.page for block in ALL if block.language in PYTHON})
SHELL_BLOCKS = [block for block in ALL if block.language in SHELL
                and not all(not_run(command) for command in commands(block))]
HELP_BLOCKS = [block for block in ALL if block.language in TEXT
               and block.body.startswith("usage: cpdecomp")]
SLOW_PAGES = {"docs/analyst/own-model.md", "docs/attribution.md"}
"""Pages whose blocks fit several models or a 20-feature study (several seconds each)."""


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.fixture(scope="module")
def root_folder(tmp_path_factory) -> Path:
    """A folder that stands for the checkout's root: what the docs' commands read is linked in,
    and what they write stays here."""
    folder = tmp_path_factory.mktemp("docs-root")
    for name in ("sample_data", "docs", "cpdecomp", "core", "app", "mkdocs.yml",
                 "pyproject.toml", "README.md"):
        (folder / name).symlink_to(ROOT / name)
    return folder


@pytest.fixture(scope="module")
def environment(tmp_path_factory) -> dict[str, str]:
    """The docs' commands with this interpreter's tools first on PATH, and a cache of their
    own (shared between them, as a reader's would be)."""
    cache = tmp_path_factory.mktemp("docs-cache")
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "CPDECOMP_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg",
            "NO_MKDOCS_2_WARNING": "1", "COLUMNS": HELP_COLUMNS}


def check_ran(done: subprocess.CompletedProcess, what: str) -> None:
    assert done.returncode == 0, (
        f"{what} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


# ------------------------------------------------------------------------------- inventory


def test_every_block_is_run_listed_or_text() -> None:
    problems = []
    for block in ALL:
        if block.language in TEXT | PYTHON:
            continue
        if block.language not in SHELL:
            problems.append(f"{block.where}: a ```{block.language or '(no language)'} block: "
                            "mark output as ```text, or give it a language this test runs")
            continue
        listed = [bool(not_run(command)) for command in commands(block)]
        if not listed:
            problems.append(f"{block.where}: a shell block with no command")
        elif any(listed) and not all(listed):
            problems.append(f"{block.where}: mixes commands run here with commands listed in "
                            "NOT_RUN; split the block")
    assert problems == []


def test_every_listed_command_is_still_in_the_docs() -> None:
    given = [command for block in ALL if block.language in SHELL for command in commands(block)]
    for entry in NOT_RUN:
        assert any(re.fullmatch(entry.command, command) for command in given), (
            f"NOT_RUN lists {entry.command!r}, which no page gives any more")


def test_the_readme_test_command_is_cis() -> None:
    """.ci/run runs the README's test command, verbatim."""
    readme = [command for block in ALL if block.page.name == "README.md"
              and block.language in SHELL for command in commands(block)]
    assert "ruff check . && mypy && pytest -n 2" in readme
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "ruff check . && mypy && pytest -n 2" in ci


def test_the_readme_is_for_the_first_two_minutes() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_the_readmes_links_reach_files_of_the_checkout() -> None:
    """The README is read outside the site (a repository's front page), so mkdocs does not
    check its links: every relative link names a file that exists."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())
    local = [link for link in links if "://" not in link]
    assert local, "the README links into the docs"
    assert [link for link in local if not (ROOT / link).is_file()] == []


def test_the_api_reference_documents_every_public_name() -> None:
    import cpdecomp

    reference = (ROOT / "docs" / "reference.md").read_text()
    documented = set(re.findall(r"^::: cpdecomp\.(\w+)$", reference, re.MULTILINE))
    assert documented == set(cpdecomp.__all__)


# ------------------------------------------------------------------------------- running


@pytest.mark.parametrize("block", HELP_BLOCKS, ids=lambda block: block.where)
def test_documented_help_is_the_commands_help(block: Block, environment) -> None:
    words = block.body.split()
    subcommand = [words[2]] if len(words) > 2 and not words[2].startswith("[") else []
    done = subprocess.run([sys.executable, "-m", "cpdecomp", *subcommand, "--help"],
                          capture_output=True, text=True, env=environment, timeout=60)
    check_ran(done, f"cpdecomp {' '.join(subcommand)} --help")
    # `python -m cpdecomp` names itself as the console script does.
    assert done.stdout.rstrip("\n") == block.body.rstrip("\n"), (
        f"{block.where}: the help text has changed; paste `COLUMNS={HELP_COLUMNS} cpdecomp "
        f"{' '.join(subcommand)} --help` into the page")


@pytest.mark.parametrize("page", [
    pytest.param(page, marks=[pytest.mark.slow] if page_id(page) in SLOW_PAGES else [],
                 id=page_id(page)) for page in PYTHON_PAGES])
def test_a_pages_python_blocks_run(page: Path, root_folder, environment) -> None:
    script = "\n\n".join(block.body for block in ALL
                         if block.page == page and block.language in PYTHON)
    done = subprocess.run([sys.executable, "-"], input=script, cwd=root_folder,
                          capture_output=True, text=True, env=environment, timeout=900)
    check_ran(done, f"the python blocks of {page_id(page)}")


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=lambda block: block.where)
def test_a_shell_block_runs(block: Block, root_folder, environment) -> None:
    # The block as a reader copies it (a console block: its commands).
    script = "\n".join(commands(block)) if block.language == "console" else block.body
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=root_folder,
                          capture_output=True, text=True, env=environment, timeout=900)
    check_ran(done, f"the block at {block.where}")

"""What the dashboard checks before it serves anything: the folders it writes, and its secrets.

A container whose /tmp is not writable (a read-only root filesystem without its tmpfs or
emptyDir), or whose /data volume its user cannot write (an arbitrary user id, a root-owned bind
mount), used to start and answer Streamlit's health check while every page failed. The
dashboard's entry (app/server.py) calls `check()` first, and the health check
(app/health.py) calls it again, so such a container stops, or turns unhealthy, with one line
that names the mount to add. A secrets file the dashboard's user cannot read (a root-owned 0600
`secrets.toml`) is named the same way instead of ending in Streamlit's traceback.

The numba cache is bounded here too: numba keeps every kernel it ever compiled, for every
version of the code, and never removes one. Each start keeps only the kernels of the code that
runs (a stamp file names it), so the folder holds one version's kernels (core/kernel_cache.py,
which `cpdecomp warmup` calls too).

Standard library only (and core/kernel_cache.py, which is too): this runs before numba and
cpdecomp's computing modules load (numba refuses to import a kernel whose cache folder it cannot
write, which is one of the faults this check reports).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from cpdecomp.core.kernel_cache import (  # noqa: F401  (app.startup.NUMBA_STAMP, code_stamp)
    NUMBA_STAMP,
    bound_numba_cache,
    code_stamp,
)

TMP_HINT = ("mount a writable tmpfs there (docker run --tmpfs /tmp:rw,nosuid,nodev,size=2g; "
            "Kubernetes: an emptyDir volume at /tmp)")
DATA_HINT = ("mount a volume there that user {uid} (group {gid}) may write (docker run -v "
             "cpdecomp-data:/data; a bind mount: add :U, or chown it; Kubernetes: "
             "securityContext.fsGroup)")


class StartupError(Exception):
    """A folder the dashboard writes, or its secrets file, is unusable: one line says which."""


def _hint(path: Path, environ: Mapping[str, str] | None) -> str:
    """The mount that gives the dashboard `path`: a tmpfs for the temporary folder, else the
    data volume."""
    if path == Path(temporary_folder(environ)):
        return TMP_HINT
    return DATA_HINT.format(uid=os.getuid(), gid=os.getgid())


def temporary_folder(environ: Mapping[str, str] | None = None) -> str:
    """Where Python's tempfile puts uploads being read: $TMPDIR, else /tmp. (tempfile itself
    quietly falls back to /var/tmp or the working folder, which a read-only root lacks too.)"""
    environ = os.environ if environ is None else environ
    for variable in ("TMPDIR", "TEMP", "TMP"):
        if environ.get(variable):
            return environ[variable]
    return tempfile.gettempdir() if sys.platform == "win32" else "/tmp"


def written_folders(environ: Mapping[str, str] | None = None) -> list[tuple[Path, str]]:
    """(folder, what the dashboard keeps there) for every folder it writes."""
    environ = os.environ if environ is None else environ
    folders = [(Path(temporary_folder(environ)), "uploads are staged there")]
    if environ.get("NUMBA_CACHE_DIR"):
        folders.append((Path(environ["NUMBA_CACHE_DIR"]), "the compiled kernels"))
    if environ.get("CPDECOMP_CACHE_DIR", "").strip():
        folders.append((Path(environ["CPDECOMP_CACHE_DIR"]), "the calibration cache"))
    reviews = environ.get("CPDECOMP_REVIEW_DB", "").strip()
    if reviews and "://" not in reviews:  # a database URL is the database's business
        folders.append((Path(reviews).expanduser().parent, "the review database"))
    return folders


def writable(folder: Path) -> bool:
    """Whether a file can be made in `folder` (made if missing). Tried, not read from the
    mode bits: a read-only mount keeps its bits, and group and ACL rules have their say."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".cpdecomp-write-check-"):
            pass
    except OSError:
        return False
    return True


def secrets_files() -> list[Path]:
    """Where Streamlit looks for secrets.toml (its default `secrets.files`)."""
    return [Path.home() / ".streamlit" / "secrets.toml", Path.cwd() / ".streamlit" /
            "secrets.toml"]


def check(environ: Mapping[str, str] | None = None) -> None:
    """Raise StartupError for the first folder the dashboard cannot write or secrets file it
    cannot read."""
    for folder, use in written_folders(environ):
        if not writable(folder):
            raise StartupError(f"{folder} is not writable by user {os.getuid()} ({use}): "
                               f"{_hint(folder, environ)}")
    for secrets in secrets_files():
        try:
            with open(secrets, "rb"):
                pass
        except FileNotFoundError:
            continue
        except OSError as error:
            mode = f"{secrets.stat().st_mode & 0o777:04o}" if secrets.exists() else "?"
            owner = secrets.stat().st_uid if secrets.exists() else "?"
            raise StartupError(
                f"{secrets} cannot be read by user {os.getuid()} (owner {owner}, mode {mode}: "
                f"{error.strerror}): make it readable to that user or group {os.getgid()}, "
                "e.g. chgrp 0 and chmod 0440 (Kubernetes: a secret volume with defaultMode "
                "0440 and fsGroup)") from None


def check_or_exit() -> None:
    """check() and bound_numba_cache() for a starting server: a fault ends the process with
    status 2 and one line on stderr, as the command line's errors do."""
    try:
        check()
        bound_numba_cache()
    except StartupError as error:
        print(f"cpdecomp: error: {error}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


WARM_UP_MODULES = ("cpdecomp.app.runs", "cpdecomp.app.planning", "cpdecomp.core.explainer")
"""What a Run needs loaded: the computation (scikit-learn, SciPy, numba and the kernels'
modules) and the pages. 3.5 s of a restarted container's first Run on a loaded 2-core machine
(docs/benchmarks/container.md) was these imports."""


def warm_up() -> threading.Thread:
    """Import what a Run needs on a low-priority thread while the server starts, so a
    restarted dashboard's first clinician does not wait for it, then compile the kernels if
    they are not cached yet (warm_kernels). A failure is left to the page that imports the
    module (it shows its error there, and the health check reports it)."""
    def work() -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        except (AttributeError, OSError):
            pass  # not Linux, or not allowed: the imports only take longer to finish
        for module in WARM_UP_MODULES:
            try:
                importlib.import_module(module)
            except Exception:  # reported by the page that imports it
                return
        warm_kernels()

    thread = threading.Thread(target=work, name="cpdecomp-warm-up", daemon=True)
    thread.start()
    return thread


@dataclasses.dataclass
class KernelWarmUp:
    """The dashboard's own `cpdecomp warmup` at its first start: what the Setup page shows."""

    running: bool = False
    step: int = 0
    steps: int = 0
    failed: bool = False


KERNELS = KernelWarmUp()
"""The server's kernel warm-up (one per process)."""
WARM_UP_COMMAND = [sys.executable, "-c", "import os, sys; os.nice(10); "
                   "from cpdecomp.core.cli import main; sys.exit(main(['warmup']))"]
"""`cpdecomp warmup` at a low priority, in a process of its own: compiling holds the GIL for
seconds at a time, which would stall the server's pages."""
STEP_LINE = re.compile(r"warmup: \[(\d+)/(\d+)\] ")


def warm_kernels(command: list[str] | None = None) -> None:
    """Compile the kernels ahead when numba's cache lacks them (a new install or update), so
    the first Run loads them instead of compiling them for half a minute to a minute; the Setup page
    shows the steps (KERNELS) meanwhile. Nothing when they are cached (every later start). A
    failure is left to the Run, which compiles what it needs itself."""
    from cpdecomp.core.warmup import kernels_cached

    if kernels_cached():
        return
    KERNELS.running, KERNELS.step, KERNELS.steps = True, 0, 0
    try:
        child = subprocess.Popen(command or WARM_UP_COMMAND, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        assert child.stderr is not None
        for line in child.stderr:
            found = STEP_LINE.search(line)
            if found:
                KERNELS.step, KERNELS.steps = int(found[1]), int(found[2])
        KERNELS.failed = child.wait() != 0
    except OSError:
        KERNELS.failed = True
    finally:
        KERNELS.running = False

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
runs (a stamp file names it), so the folder holds one version's kernels.

Standard library only: this runs before cpdecomp's own modules load (numba refuses to import a
kernel whose cache folder it cannot write, which is one of the faults this check reports).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

TMP_HINT = ("mount a writable tmpfs there (docker run --tmpfs /tmp:rw,nosuid,nodev,size=2g; "
            "Kubernetes: an emptyDir volume at /tmp)")
DATA_HINT = ("mount a volume there that user {uid} (group {gid}) may write (docker run -v "
             "cpdecomp-data:/data; a bind mount: add :U, or chown it; Kubernetes: "
             "securityContext.fsGroup)")
NUMBA_STAMP = "cpdecomp-code.txt"
"""The file in $NUMBA_CACHE_DIR naming the code whose kernels the folder holds."""


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


def code_stamp(package: Path) -> str:
    """A digest of the names, sizes and modification times of cpdecomp's Python files: what
    numba's own cache keys its kernels on (each source file's time and size)."""
    digest = hashlib.blake2b(digest_size=16)
    for path in sorted(package.rglob("*.py")):
        status = path.stat()
        digest.update(f"{path.relative_to(package)}:{status.st_size}:{status.st_mtime_ns}\n"
                      .encode())
    return digest.hexdigest()


def bound_numba_cache(environ: Mapping[str, str] | None = None) -> bool:
    """Empty $NUMBA_CACHE_DIR when its kernels are another code version's; True if emptied."""
    environ = os.environ if environ is None else environ
    if not environ.get("NUMBA_CACHE_DIR"):
        return False
    folder = Path(environ["NUMBA_CACHE_DIR"])
    stamp = code_stamp(Path(__file__).resolve().parents[1] / "core")
    stamp_file = folder / NUMBA_STAMP
    try:
        if stamp_file.read_text(encoding="ascii").strip() == stamp:
            return False
    except OSError:
        pass  # no stamp: a new folder, or one from before the stamp
    emptied = False
    for entry in folder.iterdir() if folder.is_dir() else []:
        if entry.name.startswith(".cpdecomp-write-check-"):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        emptied = True
    folder.mkdir(parents=True, exist_ok=True)
    stamp_file.write_text(stamp + "\n", encoding="ascii")
    return emptied


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
    restarted dashboard's first clinician does not wait for it. A failure is left to the page
    that imports the module (it shows its error there, and the health check reports it)."""
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

    thread = threading.Thread(target=work, name="cpdecomp-warm-up", daemon=True)
    thread.start()
    return thread

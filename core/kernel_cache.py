"""Which code version's kernels numba's cache folder holds (standard library only).

numba keeps every kernel it ever compiled, for every version of the code, and never removes one.
When $NUMBA_CACHE_DIR is set (the container's /data/cache/numba), a stamp file in it names the
code whose kernels it holds, and a start with other code empties it first, so the folder holds
one version's kernels. The dashboard's start-up check (app/startup.py) and `cpdecomp warmup`
(core/warmup.py) both call `bound_numba_cache`, so kernels compiled ahead are kept by the next
start of the same code.

Standard library only: the dashboard calls this before numba loads.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

NUMBA_STAMP = "cpdecomp-code.txt"
"""The file in $NUMBA_CACHE_DIR naming the code whose kernels the folder holds."""
CORE = Path(__file__).resolve().parent
"""cpdecomp's core/ folder: the source files numba's kernels are compiled from."""


def code_stamp(package: Path = CORE) -> str:
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
    stamp = code_stamp()
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

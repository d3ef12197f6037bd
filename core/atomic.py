"""Writing a file atomically: the bytes go to a temporary dot file beside it, renamed into place.

Readers never see half a file, processes can share a folder, and a writer killed midway leaves
only its temporary file (`.NAME.*.tmp`), never a partial file under the final name. The one
home of this idea: report files (core.output) and the disk cache's games (core.games.cache).
A target that is a device or a pipe is written into instead: it cannot be replaced.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def staged_file(folder: str | Path | None, name: str) -> Iterator[str]:
    """The name of a new empty file `.{name}.*.tmp` in `folder` (None: the system's temporary
    folder), removed when the block ends unless the block moved it away."""
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    os.close(handle)
    try:
        yield temporary
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


@contextmanager
def atomic_write(path: str | Path) -> Iterator[str]:
    """The name of a temporary file to write `path`'s bytes to; renamed onto `path` when the
    block ends without an error, removed (and `path` left as it was) when it raises."""
    path = Path(path)
    if path.exists() and not path.is_file():
        # A device or a pipe (--out /dev/null, a named pipe): a rename would put a plain file
        # in its place (as root, /dev/null itself); its reader gets the bytes once written.
        with staged_file(None, path.name) as temporary:
            yield temporary
            with open(temporary, "rb") as source, open(path, "wb") as target:
                shutil.copyfileobj(source, target)
        return
    with staged_file(path.parent, path.name) as temporary:
        yield temporary
        os.replace(temporary, path)

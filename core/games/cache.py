"""A content-addressed cache of calibration games, in memory (size-bounded) and on disk.

The calibration game is the expensive part and it does not depend on the patient: its sorted
masked scores are kept under a hash of everything that changes them (data, model, family,
background, design, seed, library versions), so a restarted dashboard or a second batch run
starts warm. Files are written atomically (a temporary file renamed into place), so processes
can share a directory and a killed writer leaves no half file. Only plain arrays are stored and
read back (never pickles), so a planted file cannot run code.

The directory is bounded in bytes ($CPDECOMP_CACHE_MAX_BYTES, default 1 GiB): after each write
the least recently used files go until the rest fit. A read touches its file (its modification
time is the last use), so the games a dashboard keeps asking for stay.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np

from cpdecomp.core.atomic import atomic_write
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.versions import library_versions

CACHE_DIR_ENV = "CPDECOMP_CACHE_DIR"
"""Directory of the disk cache; set it to an empty string to keep the cache in memory only."""
CACHE_MAX_BYTES_ENV = "CPDECOMP_CACHE_MAX_BYTES"
"""The most bytes the disk cache may hold; 0 keeps nothing on disk."""
DISK_BYTES = 2**30
MEMORY_BYTES = 512 * 2**20
SUFFIX = ".npy"
OWN_FILE = re.compile(r"[0-9a-f]{40}\.npy")
"""A stored game's name: its key (content_digest, 40 hex digits) and SUFFIX."""
OWN_TEMPORARY = re.compile(r"\.[0-9a-f]{40}\.[^/]*\.tmp")
"""A file put() was writing when its process was killed (mkstemp's prefix and suffix)."""


def default_cache_dir() -> Path | None:
    """$CPDECOMP_CACHE_DIR, else $XDG_CACHE_HOME/cpdecomp, else ~/.cache/cpdecomp."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured is not None:
        return Path(configured) if configured.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cpdecomp"


def default_disk_bytes() -> int:
    """$CPDECOMP_CACHE_MAX_BYTES (a whole number of bytes, 1e9 style allowed), else 1 GiB."""
    configured = os.environ.get(CACHE_MAX_BYTES_ENV, "").strip().replace("_", "")
    if not configured:
        return DISK_BYTES
    try:
        value = float(configured)
    except ValueError:
        value = -1.0
    if not (value >= 0 and value == int(value)):
        raise CpdecompError(f"${CACHE_MAX_BYTES_ENV} must be a whole number of bytes (0 or "
                            f"more), e.g. {DISK_BYTES}")
    return int(value)


def content_digest(*parts: object) -> str:
    """A hex digest of arrays (values, dtype and shape), strings and numbers."""
    digest = hashlib.blake2b(digest_size=20)
    for part in parts:
        if isinstance(part, np.ndarray):
            array = np.ascontiguousarray(part)
            digest.update(f"array{array.dtype.str}{array.shape}".encode())
            digest.update(array.tobytes())
        else:
            digest.update(f"{type(part).__name__}:{part!r}".encode())
        digest.update(b"\x00")
    return digest.hexdigest()


def versions_digest() -> str:
    """Results depend on these libraries and on cpdecomp's own code: a new version, or any
    change to the code (an editable install updated by git pull keeps its version string),
    is a new cache key."""
    return content_digest(*library_versions(("cpdecomp", "numpy", "scikit-learn")).values(),
                          code_digest())


@functools.cache
def code_digest() -> str:
    """A digest of the library's source files (core/**/*.py), read once per process."""
    return files_digest(Path(__file__).resolve().parents[1])


def files_digest(folder: Path) -> str:
    """A digest of the names and bytes of the Python files under `folder`."""
    digest = hashlib.blake2b(digest_size=20)
    for path in sorted(folder.rglob("*.py")):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\x00")
        digest.update(path.read_bytes() + b"\x00")
    return digest.hexdigest()


class GameCache:
    """Arrays by key: an LRU in memory bounded in bytes, backed by a directory bounded too."""

    def __init__(self, directory: Path | None = None, memory_bytes: int = MEMORY_BYTES,
                 disk_bytes: int = DISK_BYTES) -> None:
        self.directory = directory
        self.memory_bytes = memory_bytes
        self.disk_bytes = disk_bytes
        self._memory: OrderedDict[str, np.ndarray] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path | None:
        return None if self.directory is None else self.directory / f"{key}{SUFFIX}"

    def get(self, key: str) -> np.ndarray | None:
        with self._lock:
            if key in self._memory:
                self._memory.move_to_end(key)
                self.hits += 1
                return self._memory[key]
        path = self._path(key)
        if path is not None and path.is_file():
            try:
                array = np.load(path, allow_pickle=False)
            except (OSError, ValueError):
                path.unlink(missing_ok=True)  # unreadable: drop it and recompute
            else:
                self._touch(path)
                self._remember(key, array)
                self.hits += 1
                return array
        self.misses += 1
        return None

    def holds(self, key: str) -> bool:
        """Whether `get` would find the key (in memory or on disk), without reading it."""
        with self._lock:
            if key in self._memory:
                return True
        path = self._path(key)
        return path is not None and path.is_file()

    def put(self, key: str, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        self._remember(key, array)
        path = self._path(key)
        if path is None or array.nbytes > self.disk_bytes:
            return  # a game larger than the whole bound is kept in memory only
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(path) as temporary, open(temporary, "wb") as out:
                np.save(out, array, allow_pickle=False)
                out.flush()
                os.fsync(out.fileno())
            self._touch(path)
            self.evict(keep=path)
        except OSError:
            pass  # a read-only or full disk only costs the warm start, never the answer

    @staticmethod
    def _touch(path: Path) -> None:
        """Mark a file used now: eviction goes by modification time. Set from the fine clock:
        the file system's own stamps are coarse (milliseconds), too coarse to order the games
        of one run."""
        now = time.time_ns()
        try:
            os.utime(path, ns=(now, now))
        except OSError:
            pass  # a read-only cache directory still serves reads

    def disk_size(self) -> int:
        """Bytes the cache's files take on disk now."""
        return sum(size for _, size in self._entries())

    def _entries(self) -> list[tuple[Path, int]]:
        """(file, bytes), least recently used first; files another process removed are left
        out."""
        found = []
        for path in self.files():
            try:
                status = path.stat()
            except FileNotFoundError:
                continue
            found.append((status.st_mtime_ns, path.name, path, status.st_size))
        found.sort()
        return [(path, size) for _, _, path, size in found]

    def evict(self, keep: Path | None = None) -> int:
        """Remove the least recently used files until the rest fit the bound; returns how
        many went. `keep` (the file just written) goes last: a new game is never the first
        victim of its own write. Several processes may evict at once: a file already gone is
        simply gone."""
        entries = self._entries()
        if keep is not None:
            entries.sort(key=lambda entry: entry[0] == keep)  # stable: LRU order otherwise
        total = sum(size for _, size in entries)
        removed = 0
        for path, size in entries:
            if total <= self.disk_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
            removed += 1
        return removed

    def _remember(self, key: str, array: np.ndarray) -> None:
        if array.nbytes > self.memory_bytes:
            return
        with self._lock:
            if key in self._memory:
                self._memory.move_to_end(key)
                return
            self._memory[key] = array
            self._held += array.nbytes
            while self._held > self.memory_bytes:
                _, evicted = self._memory.popitem(last=False)
                self._held -= evicted.nbytes

    def files(self) -> list[Path]:
        """This cache's own files: named by a content digest, so `cache clear` in a folder
        that also holds other .npy files (a user's arrays) removes none of them."""
        if self.directory is None or not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.glob(f"*{SUFFIX}") if OWN_FILE.fullmatch(p.name))

    def clear(self) -> int:
        """Forget everything; returns the number of files removed."""
        with self._lock:
            self._memory.clear()
            self._held = 0
        removed = 0
        for path in self.files():
            path.unlink(missing_ok=True)
            removed += 1
        if self.directory is not None and self.directory.is_dir():
            for stale in self.directory.glob(".*.tmp"):  # left by a killed writer
                if OWN_TEMPORARY.fullmatch(stale.name):
                    stale.unlink(missing_ok=True)
        return removed


_shared: dict[Path | None, GameCache] = {}


def shared_cache() -> GameCache:
    """The process-wide cache for the configured directory."""
    directory = default_cache_dir()
    if directory not in _shared:
        _shared[directory] = GameCache(directory, disk_bytes=default_disk_bytes())
    return _shared[directory]

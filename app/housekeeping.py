"""Memory after users leave: the uploads a session no longer holds, closed sessions past
Streamlit's reconnect window, and fitted studies no live session shows."""

from __future__ import annotations

import contextlib
import logging
import threading
import time

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from cpdecomp import StudyOptions
from cpdecomp.app import runs

logger = logging.getLogger("cpdecomp.app.housekeeping")

# Memory after users leave. Streamlit keeps a closed session for two minutes in case its tab
# reconnects, but drops it from that store only when another session comes or goes, and even
# then never frees the session's uploaded files; and fitted studies stay cached after the last
# session that used them has gone. A housekeeping thread releases all three.

HOUSEKEEPING_EVERY = 30.0
"""Seconds between two rounds of releasing what departed sessions held."""
_study_sessions: dict[tuple[str, StudyOptions], set[str]] = {}
"""Fitted study (data digest, options) -> the sessions whose last run shows it."""
_housekeeping_lock = threading.Lock()
_housekeeper: threading.Thread | None = None


def use_study(session_id: str, key: tuple[str, StudyOptions]) -> None:
    """The session now shows this study's results (and no longer another's)."""
    with _housekeeping_lock:
        for users in _study_sessions.values():
            users.discard(session_id)
        _study_sessions.setdefault(key, set()).add(session_id)


def drop_superseded_uploads(shown: list[object]) -> int:
    """Free this session's uploaded files except those the page's uploaders hold now
    (`shown`: their values, UploadedFile or None). Streamlit keeps every file a session ever
    uploaded until the session ends; the loaded tables are parsed already, so a replaced or
    abandoned upload is only weight (20 uploads of 23 MiB took the server from 70 to 960 MiB).
    Returns how many files were freed."""
    from streamlit import runtime

    context = get_script_run_ctx()
    if context is None or not runtime.exists():
        return 0
    keep = {getattr(f, "file_id", None) for f in shown if f is not None}
    manager = runtime.get_instance().uploaded_file_mgr
    remove = getattr(manager, "remove_file", None)  # Streamlit's in-memory store has it
    held = getattr(manager, "file_storage", {}).get(context.session_id, {})
    # Only files an uploader has held and holds no longer: a file whose upload has reached the
    # server but not yet the uploader's value (another widget's rerun came first) is not
    # superseded, and removing it lost the upload (seen in the model-upload browser test).
    seen: set = st.session_state.setdefault("uploads_seen", set())
    seen |= keep
    superseded = [file_id for file_id in list(held) if file_id not in keep and file_id in seen]
    if remove is None:
        return 0
    for file_id in superseded:
        remove(context.session_id, file_id)
        seen.discard(file_id)
    if superseded:
        import gc

        gc.collect()
        _return_freed_memory()
    # What the session holds now, said when it changes: the browser itself also deletes a file
    # it replaces, sometimes before this line runs, so the count held is what tells.
    now = getattr(manager, "file_storage", {}).get(context.session_id, {})
    holding = (len(now), sum(len(f.data) for f in now.values()))
    if st.session_state.get("uploads_held") != holding:
        st.session_state["uploads_held"] = holding
        logger.info("uploads.held files=%d bytes=%d", *holding)
    return len(superseded)


def release_departed() -> dict[str, int]:
    """Free what sessions that left still hold: their uploads, their stored state once
    Streamlit's reconnect window has passed, and fitted studies no live session shows; then
    hand the freed memory back to the system. Returns counts of what was released."""
    import gc

    from streamlit import runtime

    released = {"sessions": 0, "uploads": 0, "studies": 0}
    if not runtime.exists():
        return released
    instance = runtime.get_instance()
    manager = getattr(instance, "_session_mgr", None)
    if manager is None:  # AppTest's stand-in runtime: no sessions of its own to release
        return released
    storage = getattr(manager, "_session_storage", None)
    cache = getattr(storage, "_cache", None)
    if cache is not None and hasattr(cache, "expire"):
        with getattr(manager, "_storage_lock", None) or contextlib.nullcontext():
            expired = cache.expire()
        released["sessions"] = len(expired)
    live = {info.session.id for info in manager.list_sessions()}
    uploads = instance.uploaded_file_mgr
    for session_id in list(getattr(uploads, "file_storage", {})):
        if session_id not in live:
            uploads.remove_session_files(session_id)
            released["uploads"] += 1
    computing = runs.running_studies()
    with _housekeeping_lock:
        unused = []
        for key, users in _study_sessions.items():
            users &= live
            if not users and key not in computing:
                unused.append(key)
        for key in unused:
            del _study_sessions[key]
    for digest, options in unused:
        runs.fitted_study.clear(digest, options, None)
        released["studies"] += 1
    if any(released.values()):
        gc.collect()
        _return_freed_memory()
        logger.info("memory.released sessions=%d uploads=%d studies=%d",
                    released["sessions"], released["uploads"], released["studies"])
    return released


def _return_freed_memory() -> None:
    """Give memory that Python, numpy and Arrow freed back to the system: glibc keeps freed
    blocks for reuse, so a server's resident size only grows otherwise."""
    import ctypes
    import ctypes.util

    try:
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except ImportError:
        pass
    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        pass


def start_housekeeping() -> None:
    """Start the housekeeping thread, once per server process."""
    global _housekeeper
    with _housekeeping_lock:
        if _housekeeper is not None:
            return

        def loop() -> None:
            while True:
                time.sleep(HOUSEKEEPING_EVERY)
                try:
                    release_departed()
                except Exception as error:  # never let housekeeping take the server down
                    logger.error("memory.release failed with %s", type(error).__name__)

        _housekeeper = threading.Thread(target=loop, name="cpdecomp-housekeeping",
                                        daemon=True)
        _housekeeper.start()

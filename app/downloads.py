"""Downloads only for the session that made them.

`st.download_button` puts its file in Streamlit's media store and gives the browser a URL,
/media/<id>.<ext>, that Streamlit serves to any request, with no session and no cookie: a URL
copied from a proxy's log or a shared screen hands the review queue or a case summary to
anyone on the network. Streamlit has no option to tie a media file to its session, so this
module wraps the first layer of Streamlit's HTTP stack (its path-security middleware, which
sees every request before the media route) once per process: a downloadable file is served
only to a request that carries the XSRF cookie of a live session that holds the file, the same
cookie that session's WebSocket was opened with. Any other request gets 404, as for a file that
does not exist. Images and other media that pages show are not touched.

Each script run records its session's cookie (`remember_session`). The check reads Streamlit's
media file manager's record of which session holds which file; tests/test_download_auth.py
runs it on a real server, so a Streamlit upgrade that changes these internals fails there.
"""

from __future__ import annotations

import hmac
import re
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

_lock = threading.Lock()
_installed = False
_cookies: dict[str, bytes] = {}
"""Session id -> the decoded XSRF token its WebSocket was opened with."""
_held: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
"""Session id -> the media files its last two script runs drew. A click on a download button
both fetches the file and reruns the script, and Streamlit forgets a session's files when a run
starts, before the button draws them again: the fetch must not lose that race."""
_made: dict[str, set[str]] = {}
"""File id -> the sessions whose click generated it (a download button given a function makes
its file on the click, outside any script run; the id is a digest of the content, so two
sessions can make the same file)."""
XSRF_COOKIE = "_streamlit_xsrf"
_MEDIA_PATH = re.compile(r"/media/([^/]+)$")


def _token(cookie: str | None) -> bytes | None:
    from streamlit.web.server.starlette.starlette_app_utils import decode_xsrf_token_string

    if not cookie:
        return None
    token, _ = decode_xsrf_token_string(cookie)
    return token or None


def remember_session() -> None:
    """Record this session's XSRF token (call on every script run) and make sure the guard is
    in place."""
    context = get_script_run_ctx()
    if context is None:
        return
    token = _token(st.context.cookies.get(XSRF_COOKIE))
    with _lock:
        if token is not None:
            _cookies[context.session_id] = token
        else:
            _cookies.pop(context.session_id, None)
    install()


def _session_files(session_id: str) -> frozenset[str]:
    """The media files Streamlit's manager has for the session now."""
    from streamlit import runtime

    manager = runtime.get_instance().media_file_mgr
    with manager._lock:
        return frozenset(manager._files_by_session_and_coord.get(session_id, {}).values())


def after_run() -> None:
    """Record the files this script run drew (call when the run ends, however it ends), and
    forget sessions that have ended."""
    from streamlit import runtime

    context = get_script_run_ctx()
    if context is None or not runtime.exists():
        return
    instance = runtime.get_instance()
    files = _session_files(context.session_id)
    with _lock:
        last = _held.get(context.session_id, (frozenset(), frozenset()))[0]
        _held[context.session_id] = (files, last)
        for session in [s for s in _held if not instance.is_active_session(s)]:
            _held.pop(session, None)
            _cookies.pop(session, None)
        for file_id, sessions in list(_made.items()):
            sessions -= {s for s in sessions if not instance.is_active_session(s)}
            if not sessions:
                del _made[file_id]


def _holders(file_id: str) -> list[str]:
    """Live sessions whose pages hold the media file (now, or in their last two runs)."""
    from streamlit import runtime

    if not runtime.exists():
        return []
    instance = runtime.get_instance()
    manager = instance.media_file_mgr
    with manager._lock:
        holders = {session for session, files in manager._files_by_session_and_coord.items()
                   if file_id in files.values()}
    with _lock:
        holders |= {session for session, runs in _held.items()
                    if file_id in runs[0] or file_id in runs[1]}
        holders |= _made.get(file_id, set())
    return [session for session in holders if instance.is_active_session(session)]


def allowed(file_id: str, cookie: str | None) -> bool:
    """Whether a request with this XSRF cookie may fetch the downloadable file."""
    token = _token(cookie)
    if token is None:
        return False
    for session in _holders(file_id):
        with _lock:
            expected = _cookies.get(session)
        if expected is not None and hmac.compare_digest(expected, token):
            return True
    return False


def _is_download(file_id: str) -> bool:
    from streamlit import runtime
    from streamlit.runtime.media_file_storage import MediaFileKind, MediaFileStorageError

    if not runtime.exists():
        return False
    storage = runtime.get_instance().media_file_mgr._storage
    try:
        return storage.get_file(file_id).kind == MediaFileKind.DOWNLOADABLE  # type: ignore[attr-defined]
    except MediaFileStorageError:
        return False


def _request_cookie(scope: MutableMapping[str, Any]) -> str | None:
    from http.cookies import CookieError, SimpleCookie

    for name, value in scope.get("headers") or ():
        if name == b"cookie":
            jar = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except CookieError:
                return None
            if XSRF_COOKIE in jar:
                return jar[XSRF_COOKIE].value
    return None


Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


async def _not_found(send: Send) -> None:
    await send({"type": "http.response.start", "status": 404,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": b"Not found"})


def install() -> None:
    """Wrap Streamlit's path-security middleware, once per process."""
    global _installed
    with _lock:
        if _installed:
            return
        from streamlit.web.server.starlette.starlette_path_security_middleware import (
            PathSecurityMiddleware,
        )

        original = PathSecurityMiddleware.__call__

        async def guarded(self: Any, scope: MutableMapping[str, Any], receive: Receive,
                          send: Send) -> None:
            if scope.get("type") == "http":
                match = _MEDIA_PATH.search(str(scope.get("path", "")))
                if match is not None and _is_download(match.group(1)) and not allowed(
                        match.group(1).rsplit(".", 1)[0], _request_cookie(scope)):
                    await _not_found(send)
                    return
            await original(self, scope, receive, send)

        # The instance in the running app looks its __call__ up on the class.
        PathSecurityMiddleware.__call__ = guarded  # type: ignore[method-assign]

        from streamlit.runtime.media_file_manager import MediaFileManager

        execute = MediaFileManager.execute_deferred

        def execute_for_session(self: Any, file_id: str) -> str:
            """Streamlit's, recording which session the generated file is for."""
            with self._lock:
                entry = self._deferred_callables.get(file_id)
            url = execute(self, file_id)
            if entry is not None:
                with _lock:
                    made = url.rsplit("/", 1)[-1].rsplit(".", 1)[0]
                    _made.setdefault(made, set()).add(entry["session_id"])
            return url

        MediaFileManager.execute_deferred = execute_for_session  # type: ignore[method-assign]
        _installed = True

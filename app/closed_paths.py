"""Two of Streamlit's endpoints kept to the machine itself (ASGI middleware for app/server.py).

* `/_stcore/metrics` describes sessions and memory, for a monitoring network, not for users;
  Streamlit has no setting to turn it off, so it answers 404 on every address.
* `/_stcore/script-health-check` runs the app's script in a session of its own (the health
  check, app/health.py, asks it): answered on the loopback address only, so nobody outside
  can make the server run the script over and over.

Plain ASGI, no framework: a request for either is answered here and never reaches Streamlit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

CLOSED = "/_stcore/metrics"
LOOPBACK_ONLY = "/_stcore/script-health-check"
LOOPBACK = frozenset({"127.0.0.1", "::1"})


def refused(scope: Scope) -> bool:
    """Whether the request in `scope` is one this middleware answers with 404."""
    if scope["type"] != "http":
        return False
    path = scope["path"].rstrip("/")
    client = (scope.get("client") or ("", 0))[0]
    return path.endswith(CLOSED) or (path.endswith(LOOPBACK_ONLY) and client not in LOOPBACK)


class KeepInside:
    """404 for the metrics, and for the script check asked from another address."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not refused(scope):
            await self.app(scope, receive, send)
            return
        body = b"Not found"
        await send({"type": "http.response.start", "status": 404,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

"""The dashboard's server: `streamlit run app/server.py` (what `cpdecomp dashboard` starts).

It serves app/main.py as Streamlit does, after app/startup.py's check of the folders the
dashboard writes, and with two of Streamlit's endpoints kept to the machine itself:

* `/_stcore/metrics` describes sessions and memory, for a monitoring network, not for users;
  Streamlit has no setting to turn it off, so it answers 404 here on every address.
* `/_stcore/script-health-check` runs the app's script in a session of its own (the health
  check, app/health.py, asks it): answered on the loopback address only, so nobody outside
  can make the server run the script over and over.

Streamlit finds `app` below (an `st.App`, its ASGI application) and serves it with its own
settings (port, address, the hospital defaults).
"""

from __future__ import annotations

from cpdecomp.app import startup

startup.check_or_exit()  # before any of cpdecomp's own modules (and numba) load

import streamlit as st  # noqa: E402  (after the check, on purpose)
from starlette.middleware import Middleware  # noqa: E402
from starlette.responses import PlainTextResponse  # noqa: E402

CLOSED = "/_stcore/metrics"
LOOPBACK_ONLY = "/_stcore/script-health-check"
LOOPBACK = {"127.0.0.1", "::1"}


class KeepInside:
    """ASGI middleware: 404 for the metrics, and for the script check asked from elsewhere."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            path = scope["path"].rstrip("/")
            client = (scope.get("client") or ("", 0))[0]
            if path.endswith(CLOSED) or (path.endswith(LOOPBACK_ONLY)
                                         and client not in LOOPBACK):
                await PlainTextResponse("Not found", status_code=404)(scope, receive, send)
                return
        await self.app(scope, receive, send)


app = st.App("main.py", middleware=[Middleware(KeepInside)])

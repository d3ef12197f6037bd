"""The dashboard's server: `streamlit run app/server.py` (what `cpdecomp dashboard` starts).

It serves app/main.py as Streamlit does, after app/startup.py's check of the folders the
dashboard writes (a fault stops it with one line), with /_stcore/metrics closed and the app's
script check kept to the loopback address (app/closed_paths.py), and what a Run needs imported
while it starts (startup.warm_up). Streamlit finds `app` below
(an `st.App`, its ASGI application) and serves it with its own settings (port, address, the
hospital defaults).
"""

from __future__ import annotations

from cpdecomp.app import startup

startup.check_or_exit()  # before any of cpdecomp's own modules (and numba) load

import streamlit as st  # noqa: E402  (after the check, on purpose)
from starlette.middleware import Middleware  # noqa: E402

from cpdecomp.app.closed_paths import KeepInside  # noqa: E402

app = st.App("main.py", middleware=[Middleware(KeepInside)])
startup.warm_up()

"""The container's health check: `python -m cpdecomp.app.health [--port 8501]`.

Healthy means a clinician's page would work, not only that the server answers: the folders the
dashboard writes are still writable (app/startup.py), and the app's script runs to its end in a
session of its own (Streamlit's `/_stcore/script-health-check`, which app/server.py answers on
the loopback address only). Streamlit's `/_stcore/health` stayed green while every page failed.
Exits 0 when healthy, else 1 with one line saying why. Standard library only, so it costs a
fraction of a second each time it runs.
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request

from cpdecomp.app import startup

SCRIPT_CHECK = "/_stcore/script-health-check"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cpdecomp.app.health",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="seconds the app's script may take (default %(default)s)")
    args = parser.parse_args(argv)
    try:
        startup.check()
    except startup.StartupError as error:
        print(f"unhealthy: {error}", file=sys.stderr)
        return 1
    url = f"http://127.0.0.1:{args.port}{SCRIPT_CHECK}"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as answer:
            body = answer.read(200).decode(errors="replace").strip()
    except urllib.error.HTTPError as error:
        print(f"unhealthy: the app's script failed ({error.code} "
              f"{error.read(200).decode(errors='replace').strip()}); see the server's log",
              file=sys.stderr)
        return 1
    except OSError as error:
        print(f"unhealthy: no answer from {url} ({error})", file=sys.stderr)
        return 1
    if body != "ok":
        print(f"unhealthy: {url} said {body!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

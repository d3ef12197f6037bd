"""`cpdecomp dashboard`: the dashboard from one command, with the hospital defaults wherever it
is started (Streamlit reads .streamlit/config.toml only from the working directory), host lists
given with commas, the metrics closed, and a folder it cannot write refused in one line."""

from __future__ import annotations

import base64
import http.client
import os
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from cpdecomp.core.cli import DASHBOARD, DASHBOARD_SETTINGS, streamlit_environment

ROOT = Path(__file__).resolve().parents[1]


def test_the_checkouts_streamlit_config_is_the_packaged_settings_file():
    assert (ROOT / ".streamlit" / "config.toml").resolve() == DASHBOARD_SETTINGS.resolve()
    assert DASHBOARD.is_file()


def test_every_setting_names_a_streamlit_option_and_an_explicit_one_wins():
    from streamlit import config

    config.get_option("server.port")  # loads Streamlit's option table
    variables = {option.env_var: option for option in config._config_options.values()}
    settings = tomllib.loads(DASHBOARD_SETTINGS.read_text(encoding="utf-8"))
    env = streamlit_environment(DASHBOARD_SETTINGS, {"STREAMLIT_SERVER_MAX_UPLOAD_SIZE": "5"})
    named = {name for name in env if name.startswith("STREAMLIT_")}
    assert named <= set(variables), named - set(variables)
    assert len(named) == sum(len(keys) for keys in settings.values())
    assert {variables[name].key for name in named} == {
        f"{section}.{key}" for section, keys in settings.items() for key in keys}
    assert env["STREAMLIT_SERVER_MAX_UPLOAD_SIZE"] == "5"
    assert env["STREAMLIT_BROWSER_GATHER_USAGE_STATS"] == "false"
    assert env["STREAMLIT_SERVER_ENABLE_CORS"] == "true"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def websocket_status(port: int, host: str) -> int:
    """The status of a WebSocket handshake on Streamlit's stream with this Host header."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/_stcore/stream", headers={
        "Host": host, "Upgrade": "websocket", "Connection": "Upgrade",
        "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
        "Sec-WebSocket-Version": "13", "Sec-WebSocket-Protocol": "streamlit"})
    status = connection.getresponse().status
    connection.close()
    return status


@pytest.mark.slow
def test_a_folder_it_cannot_write_stops_the_command_with_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    blocked = tmp_path / "file" / "tmp"
    done = subprocess.run(
        [sys.executable, "-m", "cpdecomp", "dashboard", "--port", str(free_port()),
         "--address", "127.0.0.1"], cwd=tmp_path, env={**os.environ, "TMPDIR": str(blocked)},
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(
        f"cpdecomp: error: {blocked} is not writable by user {os.getuid()}")
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.slow
def test_the_dashboard_command_serves_the_app_from_any_folder(tmp_path):
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("STREAMLIT_")}
    # A comma list, as administrators write it (Streamlit itself splits at spaces only).
    env["STREAMLIT_SERVER_ALLOWED_HOSTS"] = "cpdecomp.hospital.internal,127.0.0.1"
    env["CPDECOMP_REVIEW_DB"] = str(tmp_path / "reviews.sqlite3")
    child = subprocess.Popen(
        [sys.executable, "-m", "cpdecomp", "dashboard", "--port", str(port),
         "--address", "127.0.0.1"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health",
                                            timeout=2) as answer:
                    assert answer.read() == b"ok"
                    break
            except OSError:
                assert child.poll() is None, child.stdout.read() if child.stdout else ""
                assert time.monotonic() < deadline, "the dashboard did not start in 120 s"
                time.sleep(0.5)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as page:
            assert b"<title>" in page.read()
        # The listed hosts get the WebSocket, another does not.
        assert websocket_status(port, f"127.0.0.1:{port}") == 101
        assert websocket_status(port, "evil.example") == 403
        # Metrics closed; the app's script check runs (asked from this machine) and passes.
        with pytest.raises(urllib.error.HTTPError) as closed:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/metrics", timeout=5)
        assert closed.value.code == 404
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/script-health-check",
                                    timeout=60) as checked:
            assert checked.read() == b"ok"
    finally:
        child.terminate()
        output, _ = child.communicate(timeout=30)
    # the hospital defaults applied although the working folder has no .streamlit/
    assert "usage statistics" not in output.lower(), output
    assert f"http://localhost:{port}" in output, output  # browser.serverAddress, the port

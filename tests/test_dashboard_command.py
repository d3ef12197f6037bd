"""`cpdecomp dashboard`: the dashboard from one command, with the hospital defaults wherever it
is started (Streamlit reads .streamlit/config.toml only from the working directory)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import tomllib
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


@pytest.mark.slow
def test_the_dashboard_command_serves_the_app_from_any_folder(tmp_path):
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("STREAMLIT_")}
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
    finally:
        child.terminate()
        output, _ = child.communicate(timeout=30)
    # the hospital defaults applied although the working folder has no .streamlit/
    assert "usage statistics" not in output.lower(), output
    assert f"127.0.0.1:{port}" in output, output

"""The dashboard's start-up check, its health check and the endpoints it keeps to itself.

app/startup.py tries every folder the dashboard writes and reads its secrets file, and names
the first fault in one line; it keeps numba's cache to one code version. app/health.py adds
the app's script check; app/closed_paths.py answers the metrics and the script check from
elsewhere with 404. `cpdecomp dashboard` accepts comma lists for Streamlit's host lists. The
container runs them for real (tests/test_container.py); these tests hold each rule alone.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cpdecomp.app import closed_paths, health, startup
from cpdecomp.core.cli import DASHBOARD_SETTINGS, streamlit_environment

ROOT = Path(__file__).resolve().parents[1]


def blocked(tmp_path: Path) -> Path:
    """A folder that cannot be made, whoever runs the test (root included): its parent is a
    file."""
    (tmp_path / "file").write_text("")
    return tmp_path / "file" / "folder"


def test_every_written_folder_is_tried_and_the_first_fault_named(tmp_path):
    environ = {"TMPDIR": str(tmp_path / "tmp"), "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
               "CPDECOMP_CACHE_DIR": str(tmp_path / "cache"),
               "CPDECOMP_REVIEW_DB": str(tmp_path / "data" / "reviews.sqlite3")}
    folders = [folder for folder, _ in startup.written_folders(environ)]
    assert folders == [tmp_path / "tmp", tmp_path / "numba", tmp_path / "cache",
                       tmp_path / "data"]
    startup.check(environ)  # all writable: made, tried, nothing left behind
    assert all(folder.is_dir() and not list(folder.iterdir()) for folder in folders)

    bad = blocked(tmp_path)
    with pytest.raises(startup.StartupError) as raised:
        startup.check({**environ, "TMPDIR": str(bad)})
    assert str(raised.value) == (
        f"{bad} is not writable by user {os.getuid()} (uploads are staged there): "
        f"{startup.TMP_HINT}")
    with pytest.raises(startup.StartupError) as raised:
        startup.check({**environ, "CPDECOMP_CACHE_DIR": str(bad)})
    assert str(raised.value).startswith(f"{bad} is not writable by user {os.getuid()} (the "
                                        "calibration cache): mount a volume there")
    assert "fsGroup" in str(raised.value) and ":U" in str(raised.value)


def test_a_database_url_and_an_empty_cache_setting_write_no_folder(tmp_path):
    environ = {"TMPDIR": str(tmp_path), "CPDECOMP_CACHE_DIR": "",
               "CPDECOMP_REVIEW_DB": "postgresql://cpdecomp@db/cpdecomp"}
    assert startup.written_folders(environ) == [(tmp_path, "uploads are staged there")]


def test_an_unreadable_secrets_file_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    for variable in ("NUMBA_CACHE_DIR", "CPDECOMP_CACHE_DIR", "CPDECOMP_REVIEW_DB"):
        monkeypatch.delenv(variable, raising=False)
    startup.check()  # no secrets file: fine
    # A folder in the file's place cannot be read as a file, even by root (a 0600 file of
    # another user is the container test's case).
    (tmp_path / ".streamlit" / "secrets.toml").mkdir(parents=True)
    with pytest.raises(startup.StartupError) as raised:
        startup.check()
    message = str(raised.value)
    assert message.startswith(f"{tmp_path / '.streamlit' / 'secrets.toml'} cannot be read by "
                              f"user {os.getuid()}")
    assert "chmod 0440" in message and "\n" not in message


def test_numba_cache_keeps_one_code_version(tmp_path):
    folder = tmp_path / "numba"
    environ = {"NUMBA_CACHE_DIR": str(folder)}
    assert startup.bound_numba_cache(environ) is False  # new: only the stamp is written
    stamp = (folder / startup.NUMBA_STAMP).read_text().strip()
    (folder / "kernels").mkdir()
    (folder / "kernels" / "f-1.py311.nbi").write_text("index")
    assert startup.bound_numba_cache(environ) is False  # same code: kept
    assert (folder / "kernels" / "f-1.py311.nbi").exists()
    (folder / startup.NUMBA_STAMP).write_text("another version\n")
    assert startup.bound_numba_cache(environ) is True  # other code's kernels: gone
    assert sorted(p.name for p in folder.iterdir()) == [startup.NUMBA_STAMP]
    assert (folder / startup.NUMBA_STAMP).read_text().strip() == stamp


def test_a_failed_check_ends_a_starting_server_with_status_2_and_one_line(tmp_path):
    bad = blocked(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", "from cpdecomp.app import startup; startup.check_or_exit()"],
        env={**os.environ, "TMPDIR": str(bad)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"cpdecomp: error: {bad} is not writable by user "
                                        f"{os.getuid()} (uploads are staged there): "
                                        f"{startup.TMP_HINT}"]


def test_health_fails_on_a_folder_and_on_no_answer(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TMPDIR", str(blocked(tmp_path)))
    assert health.main(["--port", "9"]) == 1
    assert capsys.readouterr().err.startswith("unhealthy: ")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    for variable in ("NUMBA_CACHE_DIR", "CPDECOMP_CACHE_DIR", "CPDECOMP_REVIEW_DB"):
        monkeypatch.delenv(variable, raising=False)
    assert health.main(["--port", "9", "--timeout", "2"]) == 1  # port 9: nothing listens
    assert "no answer from http://127.0.0.1:9/_stcore/script-health-check" in \
        capsys.readouterr().err


def answer(path: str, client: str) -> int:
    """The status KeepInside (in front of an app that answers 200) gives a GET of `path`."""
    sent: list[dict] = []

    async def app(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def receive() -> dict:
        return {"type": "http.request", "body": b""}

    async def send(message) -> None:
        sent.append(message)

    scope = {"type": "http", "path": path, "client": (client, 1234), "method": "GET"}
    asyncio.run(closed_paths.KeepInside(app)(scope, receive, send))
    return sent[0]["status"]


def test_metrics_are_closed_and_the_script_check_answers_loopback_only():
    for client in ("127.0.0.1", "::1", "10.1.2.3"):
        assert answer("/_stcore/metrics", client) == 404
        assert answer("/base/_stcore/metrics/", client) == 404
        assert answer("/_stcore/health", client) == 200
        assert answer("/", client) == 200
    assert answer("/_stcore/script-health-check", "127.0.0.1") == 200
    assert answer("/_stcore/script-health-check", "::1") == 200
    assert answer("/_stcore/script-health-check", "10.1.2.3") == 404
    assert answer("/_stcore/script-health-check", "testclient") == 404


def test_host_lists_accept_commas():
    env = streamlit_environment(DASHBOARD_SETTINGS, {
        "STREAMLIT_SERVER_ALLOWED_HOSTS": "cpdecomp.hospital.internal, cpdecomp,localhost",
        "STREAMLIT_SERVER_CORS_ALLOWED_ORIGINS": "https://a.example,https://b.example"})
    assert env["STREAMLIT_SERVER_ALLOWED_HOSTS"] == "cpdecomp.hospital.internal cpdecomp localhost"
    assert env["STREAMLIT_SERVER_CORS_ALLOWED_ORIGINS"] == "https://a.example https://b.example"


def test_warm_up_loads_what_a_run_needs_in_the_background():
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys; from cpdecomp.app import startup\n"
         "assert 'sklearn' not in sys.modules and 'numba' not in sys.modules\n"
         "thread = startup.warm_up(); thread.join(300)\n"
         "print(thread.daemon, all(m in sys.modules for m in startup.WARM_UP_MODULES),"
         " 'sklearn' in sys.modules, 'numba' in sys.modules)"],
        capture_output=True, text=True, timeout=320)
    assert done.stdout.split() == ["True", "True", "True", "True"], done.stderr[-2000:]

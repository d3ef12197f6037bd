"""Driving the real dashboard: a `streamlit run` server on a free port and Playwright on Debian's
chromium. Shared by the browser tests and by `benchmarks/load.py`.

Never `playwright install`: it downloads a browser, which fails on a network without internet.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import timing

ROOT = Path(__file__).resolve().parents[1]
MAIN = ROOT / "app" / "main.py"
CHROMIUM = os.environ.get("CPDECOMP_CHROMIUM", "/usr/bin/chromium")
# Without the background-networking flags chromium keeps trying to reach Google's hosts, which
# a closed network refuses many times a second.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
# Deadlines only: every wait ends as soon as the page shows what it waits for. Bases for an
# idle 2-core machine, stretched by how busy this one is when the tests start (tests/timing.py).
START_TIMEOUT = timing.seconds(60)
STEP_TIMEOUT = timing.milliseconds(30_000)  # per browser wait
RUN_TIMEOUT = timing.milliseconds(180_000)  # for Run: fitting beside other test workers


def browser_missing() -> str | None:
    """Why the browser cannot be driven here, or None when it can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        return f"chromium is not at {CHROMIUM} (apt-get install chromium)"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def dashboard_command(port: int, script: Path = MAIN) -> list[str]:
    """`streamlit run app/main.py` as a developer starts it, on `port` (or another Streamlit
    `script` the same way, such as the benchmarks' trivial app)."""
    return [sys.executable, "-m", "streamlit", "run", str(script),
            "--server.port", str(port), "--server.address", "127.0.0.1",
            "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--server.fileWatcherType", "none"]


def health(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
            return answer.read().strip() == b"ok"
    except OSError:
        return False


@contextmanager
def streamlit_server(environment: dict[str, str], log: Path, *,
                     command: Sequence[str] | None = None, port: int | None = None,
                     user: Sequence[str] = ()) -> Iterator[tuple[str, subprocess.Popen]]:
    """A dashboard server until the block ends: yields its URL and process.

    `command` replaces the default start command (it must listen on `port`); `user` is a prefix
    such as setpriv's that runs the server as another user.
    """
    if command is None:
        port = free_port()
        command = dashboard_command(port)
    assert port is not None, "a custom command needs its port"
    with log.open("ab") as output:
        process = subprocess.Popen([*user, *command], cwd=ROOT, env=environment, stdout=output,
                                   stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not health(url):
            if process.poll() is not None:
                raise AssertionError(f"streamlit exited early:\n{log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"streamlit did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.25)
        yield url, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


SCREENSHOTS = Path(os.environ.get("CPDECOMP_SCREENSHOT_DIR", ROOT / "out" / "e2e"))
"""Where the browser tests put their screenshots (outside git)."""


@contextmanager
def dashboard_page(tmp_path: Path, width: int = 1440, height: int = 900) -> Iterator:
    """(page, url): a fresh dashboard server with its own review store and cache under
    tmp_path, and a chromium page of the given size; a failure inside the block leaves
    SCREENSHOTS/failure.png, the page as it was."""
    from playwright.sync_api import sync_playwright

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    environment = {**os.environ, "CPDECOMP_REVIEW_DB": str(tmp_path / "reviews.sqlite3"),
                   "CPDECOMP_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            with streamlit_server(environment, tmp_path / "server.log") as (url, _):
                page = browser.new_page(viewport={"width": width, "height": height})
                try:
                    yield page, url
                except Exception:
                    page.screenshot(path=str(SCREENSHOTS / "failure.png"), full_page=True)
                    raise
                page.close()
        finally:
            browser.close()


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def settle(page) -> None:
    """Wait until the script rerun that the last action started has finished drawing: Streamlit's
    status widget shows while a script runs, and its app element says the script's state."""
    # the rerun request is sent asynchronously, later on a busy machine
    page.wait_for_timeout(timing.milliseconds(300))
    page.get_by_test_id("stStatusWidget").wait_for(state="hidden", timeout=STEP_TIMEOUT)
    page.locator("[data-testid='stApp'][data-test-script-state='notRunning']").wait_for(
        state="attached", timeout=STEP_TIMEOUT)
    page.wait_for_timeout(200)


def open_page(page, name: str) -> None:
    page.get_by_test_id("stSidebarNav").get_by_role("link", name=name).click()
    settle(page)


def choose(page, key: str, option: str | None = None, index: int | None = None) -> None:
    """Open the select box with widget key `key` and pick an option by text or position.

    A rerun that lands while the list is open redraws it and detaches the option being
    clicked (seen on a loaded machine): close the list and try again, a few times.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(4):
        settle(page)
        page.locator(f".st-key-{key} [role='combobox']").click()
        target = (page.get_by_role("option", name=option, exact=True) if option is not None
                  else page.get_by_role("option").nth(index or 0))
        try:
            target.click(timeout=8_000)
            break
        except PlaywrightTimeout:
            if attempt == 3:
                raise
            page.keyboard.press("Escape")
    settle(page)


def run_current_data(page) -> None:
    """Press Run on the Setup page and wait for the results."""
    from playwright.sync_api import expect

    open_page(page, "Setup")
    page.locator(".st-key-run button").click()
    expect(page.get_by_text(re.compile(r"Results for \d+ patients"))).to_be_visible(
        timeout=RUN_TIMEOUT)


def run_sample(page, url: str, sample: str | None = None) -> None:
    """Open the dashboard, keep (or pick) a bundled sample, and run it with the defaults."""
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.locator(".st-key-data_source")).to_be_visible(timeout=STEP_TIMEOUT)
    if sample is not None:
        choose(page, "sample", sample)
    expect(page.get_by_text("Current data: sample")).to_be_visible(timeout=STEP_TIMEOUT)
    run_current_data(page)


def upload_and_run(page, url: str, csv: Path, target: str, features: int) -> None:
    """Upload one table, choose its target, and press Run."""
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.locator(".st-key-data_source")).to_be_visible(timeout=STEP_TIMEOUT)
    page.locator(".st-key-data_source").get_by_text("Upload one table").click()
    page.locator(".st-key-upload input[type='file']").set_input_files(str(csv))
    expect(page.get_by_text(f"Current data: {csv.name}")).to_be_visible(timeout=STEP_TIMEOUT)
    choose(page, "target_column", target)
    expect(page.get_by_text(f"Target '{target}', {features} features")).to_be_visible(
        timeout=STEP_TIMEOUT)
    run_current_data(page)

"""The dashboard in a real browser: upload, choose the target, run, compare the views, switch
patient, review a case, restart the server, and find the review still there.

Drives Debian's chromium through Playwright (never `playwright install`: it downloads a browser).
Without chromium the test fails when CI is set and is skipped otherwise. It writes a screenshot
of the Patient page to out/e2e/patient_page.png (or $CPDECOMP_SCREENSHOT_DIR), outside git.
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
MAIN = ROOT / "app" / "main.py"
CHROMIUM = os.environ.get("CPDECOMP_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = Path(os.environ.get("CPDECOMP_SCREENSHOT_DIR", ROOT / "out" / "e2e"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
START_TIMEOUT = 60
STEP_TIMEOUT = 30_000  # ms, per browser wait
NOTE = "Checked labs; repeat HbA1c (e2e)"
WARD = "ward-7-oncology"
"""A cell value that must never reach the server's log."""

pytestmark = pytest.mark.slow


def browser_missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        return f"chromium is not at {CHROMIUM} (apt-get install chromium)"
    return None


@pytest.fixture(scope="module", autouse=True)
def browser_available() -> None:
    reason = browser_missing()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser test, but {reason}")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def streamlit_server(environment: dict[str, str], log: Path) -> Iterator[str]:
    """`streamlit run app/main.py` on a free port until the block ends."""
    port = free_port()
    command = [sys.executable, "-m", "streamlit", "run", str(MAIN),
               "--server.port", str(port), "--server.address", "127.0.0.1",
               "--server.headless", "true", "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none"]
    with log.open("ab") as output:
        process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=output,
                                   stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                raise AssertionError(f"streamlit exited early:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
                    if answer.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"streamlit did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.25)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def cohort_csv(path: Path) -> Path:
    """A cohort whose outcome is not the last column, so the target must be chosen."""
    rng = np.random.default_rng(7)
    n = 160
    x1, x2, x3 = rng.normal(size=(3, n))
    outcome = 2 * x1 + (1 + np.abs(x2)) * rng.normal(size=n)
    ward = rng.choice([WARD, "general"], size=n)
    pd.DataFrame({"mrn": [f"M{i:03d}" for i in range(n)], "outcome": outcome, "x1": x1,
                  "x2": x2, "ward": ward, "x3": x3}).to_csv(path, index=False)
    return path


def settle(page) -> None:
    """Wait until the script rerun that the last action started has finished drawing."""
    page.wait_for_timeout(300)  # the rerun request is sent asynchronously
    page.get_by_test_id("stStatusWidget").wait_for(state="hidden", timeout=STEP_TIMEOUT)
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


def history_line(page):
    """The case history's line with the note (the queue table shows the note too)."""
    return page.get_by_test_id("stText").filter(has_text=NOTE)


def upload_and_run(page, url: str, csv: Path) -> None:
    """Upload the CSV, choose its target, and press Run."""
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.locator(".st-key-data_source")).to_be_visible(timeout=STEP_TIMEOUT)
    page.locator(".st-key-data_source").get_by_text("Upload one table").click()
    page.locator(".st-key-upload input[type='file']").set_input_files(str(csv))
    expect(page.get_by_text(f"Current data: {csv.name}")).to_be_visible(timeout=STEP_TIMEOUT)
    choose(page, "target_column", "outcome")
    expect(page.get_by_text("Target 'outcome', 4 features")).to_be_visible(timeout=STEP_TIMEOUT)
    open_page(page, "Setup")
    page.locator(".st-key-run button").click()
    expect(page.get_by_text("Results for 40 patients")).to_be_visible(timeout=STEP_TIMEOUT)


def test_upload_run_compare_review_and_restart(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    csv = cohort_csv(tmp_path / "ward_cohort.csv")
    environment = {
        **os.environ,
        "CPDECOMP_REVIEW_DB": str(tmp_path / "reviews.sqlite3"),
        "CPDECOMP_CACHE_DIR": str(tmp_path / "cache"),
        "OMP_NUM_THREADS": "1",  # two test workers share two cores
    }
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "streamlit.log"

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            with streamlit_server(environment, log) as url:
                page = browser.new_page(viewport={"width": 1400, "height": 2300})
                upload_and_run(page, url, csv)

                open_page(page, "Patient")
                heading = page.get_by_text("Why is patient")
                expect(heading).to_be_visible(timeout=STEP_TIMEOUT)
                first = heading.inner_text()
                bars = page.locator(".js-plotly-plot").first
                for title in ("Calibration-driven", "Instance-driven", "Total (= calibration"):
                    expect(bars.get_by_text(title)).to_be_visible(timeout=STEP_TIMEOUT)

                choose(page, "patient", index=3)
                expect(heading).not_to_have_text(first, timeout=STEP_TIMEOUT)
                expect(bars.get_by_text("Instance-driven")).to_be_visible(timeout=STEP_TIMEOUT)
                page.wait_for_timeout(800)  # let plotly finish drawing before the picture
                page.screenshot(path=str(SCREENSHOTS / "patient_page.png"), full_page=True)

                open_page(page, "Review queue")
                note = page.locator(".st-key-review_note textarea")
                expect(note).to_be_visible(timeout=STEP_TIMEOUT)
                case_box = page.locator(".st-key-review_patient [role='combobox']")
                case = case_box.input_value().split("·")[0].strip()  # "M046 · width 16.8"
                assert case.startswith("M"), case
                note.fill(NOTE)
                note.press("Control+Enter")  # commit the text before the click
                page.locator(".st-key-mark_reviewed button").click()
                expect(page.get_by_text("marked reviewed")).to_be_visible(timeout=STEP_TIMEOUT)
                expect(history_line(page)).to_be_visible(timeout=STEP_TIMEOUT)
                page.close()

            # A new server process: nothing survives but the review database.
            with streamlit_server(environment, log) as url:
                page = browser.new_page(viewport={"width": 1400, "height": 2300})
                upload_and_run(page, url, csv)
                open_page(page, "Review queue")
                case_box = page.locator(".st-key-review_patient [role='combobox']")
                expect(case_box).to_have_value(re.compile(rf"^{case} · .* · reviewed$"),
                                               timeout=STEP_TIMEOUT)
                expect(history_line(page)).to_be_visible(timeout=STEP_TIMEOUT)
                page.close()
        finally:
            browser.close()
    assert (SCREENSHOTS / "patient_page.png").stat().st_size > 10_000
    server_log = log.read_text(errors="replace")
    assert WARD not in server_log and case not in server_log and NOTE not in server_log

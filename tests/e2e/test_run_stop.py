"""One user's slow Run does not hold up another user, and Stop or a closed tab ends the work.

A real server and two chromium contexts (two users). The first user chooses a configuration
that masks by brute force (gbm with the gamma family, its left-out features averaged on the
outcome's own scale: minutes of work); while it computes, the
second user's patient switch completes (before the fix it waited behind the first user's run
for minutes). Stop ends the work (the server's log says the run was cancelled) and the page
says so; a page switch meanwhile does not stop it; Streamlit's own Stop and closing the tab
cancel later slow runs. Speed is measured in
benchmarks/load.py, not asserted here.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from dashboard_driver import (
    RUN_TIMEOUT,
    STEP_TIMEOUT,
    launch,
    open_page,
    run_sample,
    settle,
    streamlit_server,
)

PROGRESS = re.compile(r"^(Computing the calibration game|Explaining every patient \()")
"""A run's progress label past its fit (the Setup page's caption names the game too)."""
CANCELLED = re.compile(r"run\.stopped after_stop_s=[0-9.]+ cancelled=True")

pytestmark = pytest.mark.slow


def start_slow_run(page, url: str) -> None:
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.get_by_text("Current data: sample")).to_be_visible(timeout=STEP_TIMEOUT)
    open_page(page, "Setup")
    page.locator(".st-key-cp_family [role='combobox']").click()
    page.get_by_role("option", name=re.compile("^gamma:")).click()
    settle(page)
    page.locator(".st-key-response_scale label").click()
    settle(page)
    page.locator(".st-key-run button").click()
    expect(page.get_by_text(PROGRESS)).to_be_visible(timeout=RUN_TIMEOUT)
    # The progress label (not the page's caption, which also names the calibration game),
    # the run followed (its Stop button drawn) and the Run button not on screen: Streamlit
    # keeps the previous script run's elements, faded, until the running one ends.
    expect(page.locator(".st-key-stop_run button").first).to_be_visible(timeout=STEP_TIMEOUT)
    expect(page.locator(".st-key-run button")).to_be_hidden(timeout=STEP_TIMEOUT)


def cancelled_runs(log: Path) -> int:
    return len(CANCELLED.findall(log.read_text()))


def test_a_slow_run_leaves_others_alone_and_stops_on_stop_or_close(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    environment = {**os.environ, "CPDECOMP_REVIEW_DB": str(tmp_path / "reviews.sqlite3"),
                   "CPDECOMP_CACHE_DIR": str(tmp_path / "cache")}
    log = tmp_path / "streamlit.log"
    with streamlit_server(environment, log) as (url, _), sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            other = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            run_sample(other, url)
            open_page(other, "Patient")
            heading = other.get_by_text("Why is patient")
            expect(heading).to_be_visible(timeout=STEP_TIMEOUT)

            slow_context = browser.new_context(viewport={"width": 1280, "height": 900})
            slow = slow_context.new_page()
            start_slow_run(slow, url)

            before = heading.inner_text()
            other.locator(".st-key-patient [role='combobox']").click()
            other.keyboard.press("ArrowDown")
            other.keyboard.press("Enter")
            expect(heading).not_to_have_text(before, timeout=STEP_TIMEOUT)
            # The switch finished while the slow run was still computing.
            assert slow.locator(".st-key-stop_run button").first.is_visible()
            assert cancelled_runs(log) == 0

            # Another page and back: the run goes on (Streamlit stops the following script
            # for every rerun; only Stop, Streamlit's Stop or the session's end stop the run).
            open_page(slow, "Cohort")
            slow.get_by_test_id("stSidebarNav").get_by_role("link", name="Setup").click()
            expect(slow.locator(".st-key-stop_run button").first).to_be_visible(
                timeout=STEP_TIMEOUT)
            assert cancelled_runs(log) == 0

            slow.locator(".st-key-stop_run button").first.click()
            expect(slow.get_by_text("Stopped: nothing was kept")).to_be_visible(
                timeout=STEP_TIMEOUT)
            assert cancelled_runs(log) == 1
            assert slow.get_by_text("Results for").count() == 0  # nothing half-done shown

            # Streamlit's own Stop (top right) stops the script and, with no run after it,
            # the computation.
            start_slow_run(slow, url)
            slow.get_by_test_id("stStatusWidget").get_by_role("button", name="Stop").click()
            deadline = time.monotonic() + 60
            while cancelled_runs(log) < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert cancelled_runs(log) == 2, "Streamlit's Stop did not stop the run"
            assert "asked=Streamlit's Stop" in log.read_text()

            start_slow_run(slow, url)
            slow_context.close()
            deadline = time.monotonic() + 60
            while cancelled_runs(log) < 3 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert cancelled_runs(log) == 3, "closing the tab did not stop its run"
            assert "asked=session ended" in log.read_text()
        finally:
            browser.close()

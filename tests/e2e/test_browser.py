"""The dashboard in a real browser: upload, choose the target, run, compare the views, switch
patient, review a case, restart the server, and find the review still there.

Drives Debian's chromium through Playwright (never `playwright install`: it downloads a browser).
Without chromium the test fails when CI is set and is skipped otherwise. It writes a screenshot
of the Patient page to out/e2e/patient_page.png (or $CPDECOMP_SCREENSHOT_DIR), outside git.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dashboard_driver import (
    ROOT,
    STEP_TIMEOUT,
    choose,
    launch,
    open_page,
    streamlit_server,
    upload_and_run,
)

SCREENSHOTS = Path(os.environ.get("CPDECOMP_SCREENSHOT_DIR", ROOT / "out" / "e2e"))
NOTE = "Checked labs; repeat HbA1c (e2e)"
WARD = "ward-7-oncology"
"""A cell value that must never reach the server's log."""

pytestmark = pytest.mark.slow


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


def history_line(page):
    """The case history's line with the note (the queue table shows the note too)."""
    return page.get_by_test_id("stText").filter(has_text=NOTE)


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
        browser = launch(playwright)
        try:
            with streamlit_server(environment, log) as (url, _):
                page = browser.new_page(viewport={"width": 1400, "height": 2300})
                upload_and_run(page, url, csv, "outcome", 4)
                expect(page.get_by_text("Results for 40 patients")).to_be_visible()

                open_page(page, "Patient")
                heading = page.get_by_text("Why is patient")
                expect(heading).to_be_visible(timeout=STEP_TIMEOUT)
                first = heading.inner_text()
                bars = page.locator(".st-key-patient_bars .cp-chart")
                for title in ("Calibration-driven", "Instance-driven", "Total"):
                    expect(bars.locator(".cp-head", has_text=title)).to_be_visible(
                        timeout=STEP_TIMEOUT)

                choose(page, "patient", index=3)
                expect(heading).not_to_have_text(first, timeout=STEP_TIMEOUT)
                expect(bars.locator(".cp-head", has_text="Instance-driven")).to_be_visible(
                    timeout=STEP_TIMEOUT)
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
            with streamlit_server(environment, log) as (url, _):
                page = browser.new_page(viewport={"width": 1400, "height": 2300})
                upload_and_run(page, url, csv, "outcome", 4)
                expect(page.get_by_text("Results for 40 patients")).to_be_visible()
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

"""The Recalibration page in a real browser at 1280x720 and 1440x900: the bundled sample's
calibration rows split by a column, then a second calibration file a user brings (a site
whose outcomes are noisier), and a file with a missing column refused in an error box while
the earlier comparison stays.

Drives Debian's chromium through Playwright (never `playwright install`). Screenshots go to
$CPDECOMP_SCREENSHOT_DIR (default out/e2e/), outside git.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dashboard_driver import (
    ROOT,
    SCREENSHOTS,
    STEP_TIMEOUT,
    dashboard_page,
    open_page,
    run_sample,
    settle,
)

VIEWPORTS = ((1280, 720), (1440, 900))

pytestmark = pytest.mark.slow


def shots(page, name: str, anchor) -> None:
    """The part of the page around `anchor`, at both sizes."""
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(600)
        anchor.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{width}x{height}.png"))
    page.set_viewport_size({"width": 1440, "height": 900})
    settle(page)


def site_file(tmp_path: Path) -> Path:
    """Another site's calibration rows: the sample's rows with noisier outcomes."""
    table = pd.read_csv(ROOT / "sample_data" / "diabetes.csv")
    rows = table.sample(200, random_state=1).copy()
    rows["progression"] = rows["progression"] + np.random.default_rng(2).normal(0, 80, 200)
    path = tmp_path / "site_b.csv"
    rows.to_csv(path, index=False)
    return path


def test_recalibration_page(tmp_path: Path) -> None:
    with dashboard_page(tmp_path) as (page, url):
        checks(page, url, tmp_path)


def checks(page, url: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    run_sample(page, url)  # diabetes, the defaults (gbm, normalized, exact)
    open_page(page, "Recalibration")
    reading = page.locator(".st-key-recal_reading")
    expect(reading).to_be_visible(timeout=STEP_TIMEOUT)
    expect(reading.get_by_text(re.compile(r"^Under sex 2, intervals are"))).to_be_visible()
    change = page.locator(".st-key-recal_change")
    expect(change.locator(".cp-row")).to_have_count(10)  # one bar per feature
    expect(page.locator(".st-key-recal_widths .cp-row")).to_have_count(2)  # one box per set
    expect(page.locator(".st-key-recal_coverage table tbody tr")).to_have_count(4)
    shots(page, "recalibration-split", page.get_by_text("Compare this run's calibration set"))
    shots(page, "recalibration-split-charts", change)
    patient = page.locator(".st-key-recal_patient_calibration")
    expect(patient.locator(".cp-head")).to_have_count(2)  # the two sets side by side
    shots(page, "recalibration-split-patient", patient)

    # A second calibration file, as a hospital brings it.
    page.locator(".st-key-recal_mode").get_by_text("Another calibration file").click()
    settle(page)
    page.locator(".st-key-recalibration_upload input[type='file']").set_input_files(
        str(site_file(tmp_path)))
    settle(page)
    expect(reading.get_by_text(re.compile(r"^Under site_b, intervals are"))).to_be_visible(
        timeout=STEP_TIMEOUT)
    coverage = page.locator(".st-key-recal_coverage")
    # The run's intervals checked on the noisier site's rows are too narrow, and the page says
    # that this is the sign that recalibrating was needed.
    expect(coverage.locator("tbody tr").first).to_contain_text("too narrow")
    expect(reading.get_by_text(re.compile(r"recalibrating on site_b was needed"))).to_be_visible()
    shots(page, "recalibration-upload", page.get_by_text("Compare this run's calibration set"))
    shots(page, "recalibration-upload-coverage", coverage)

    # A file without one of the model's columns: one error box, the earlier comparison kept.
    bad = tmp_path / "site_c.csv"
    pd.read_csv(site_file(tmp_path)).drop(columns="bmi").to_csv(bad, index=False)
    page.locator(".st-key-recalibration_upload input[type='file']").set_input_files(str(bad))
    settle(page)
    error = page.get_by_test_id("stAlertContentError")
    expect(error).to_contain_text("has no feature column 'bmi'", timeout=STEP_TIMEOUT)
    expect(reading.get_by_text(re.compile(r"^Under site_b, intervals are"))).to_be_visible()
    shots(page, "recalibration-refused", error)

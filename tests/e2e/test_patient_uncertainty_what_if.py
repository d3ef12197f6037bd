"""The Patient page in a real browser at 1280x720 and 1440x900: the calibration-driven bars'
whiskers and ? marks, the optional standard-SHAP panel, what-if editing (a live interval, an
error box for a value that is not a number, a warning outside the training range, Reset), and
the Cohort page's subgroup report and whiskered calibration-driven vector.

Drives Debian's chromium through Playwright (never `playwright install`). Screenshots go to
$CPDECOMP_SCREENSHOT_DIR (default out/e2e/), outside git.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dashboard_driver import (
    SCREENSHOTS,
    STEP_TIMEOUT,
    choose,
    dashboard_page,
    open_page,
    run_sample,
    settle,
)

VIEWPORTS = ((1280, 720), (1440, 900))

pytestmark = pytest.mark.slow


def shots(page, name: str, anchor=None) -> None:
    """The part of the page around `anchor`, at both sizes."""
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(900)  # plotly redraws for the new width
        if anchor is not None:
            anchor.scroll_into_view_if_needed()
            page.wait_for_timeout(300)
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{width}x{height}.png"))
    page.set_viewport_size({"width": 1440, "height": 900})
    settle(page)


def metric(page, label: str):
    return page.get_by_test_id("stMetric").filter(has_text=label).get_by_test_id(
        "stMetricValue")


def test_uncertainty_standard_shap_and_what_if(tmp_path: Path) -> None:
    with dashboard_page(tmp_path) as (page, url):
        checks(page, url)


def checks(page, url: str) -> None:
    from playwright.sync_api import expect

    run_sample(page, url)
    open_page(page, "Patient")
    bars = page.locator(".st-key-patient_bars .cp-chart")
    expect(bars).to_be_visible(timeout=STEP_TIMEOUT)
    # The ? mark sits on the shared feature axis; the caption says how many.
    expect(bars.locator(".cp-labels div").filter(has_text="?").first).to_be_visible()
    caption = page.get_by_text(re.compile(r"whiskers on the calibration-driven bars"))
    expect(caption).to_contain_text(re.compile(r"not settled \(\d+ of 10 features here\)"))
    reading = page.locator(".st-key-patient_reading")
    shots(page, "patient-uncertainty", bars)

    # The standard SHAP panel: off by default, then one more chart with its sentence.
    charts_before = page.locator(".cp-chart").count()
    page.locator(".st-key-fixed_q_on").get_by_text("Show what a standard SHAP").click()
    settle(page)
    expect(page.locator(".cp-chart")).to_have_count(charts_before + 1)
    expect(page.locator(".st-key-fixed_q_chart .cp-title")).to_contain_text(
        "What a standard SHAP of the interval shows")
    sentence = page.get_by_text(re.compile("has no calibration-driven part"))
    expect(sentence).to_be_visible()
    shots(page, "patient-standard-shap", page.locator(".st-key-fixed_q_chart"))

    # What-if: edit bmi, see the edited interval change; a word is refused, state kept.
    page.locator(".st-key-whatif_on").get_by_text("What if").click()
    settle(page)
    width = metric(page, "Edited width")
    expect(width).to_be_visible(timeout=STEP_TIMEOUT)
    original = width.inner_text()
    bmi = page.locator(".st-key-whatif_2 input")
    bmi.fill("45")
    bmi.press("Enter")
    settle(page)
    expect(width).not_to_have_text(original)
    edited = width.inner_text()
    expect(page.get_by_text("Outside the training range: bmi")).to_be_visible()
    shots(page, "patient-what-if", page.locator(".st-key-whatif_panel"))

    age = page.locator(".st-key-whatif_0 input")
    age.fill("old")
    age.press("Enter")
    settle(page)
    expect(page.get_by_test_id("stAlertContentError")).to_contain_text("Not a number: age")
    expect(width).to_have_text(edited)
    expect(age).to_have_value("old")
    shots(page, "patient-what-if-error", page.locator(".st-key-whatif_panel"))

    page.locator(".st-key-whatif_reset button").click()
    settle(page)
    expect(width).to_have_text(original)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)
    expect(reading).to_be_visible()

    # Cohort: the subgroup report, and the calibration-driven vector's whiskers in log units.
    open_page(page, "Cohort")
    choose(page, "subgroup_feature", "bmi")
    table = page.locator(".st-key-subgroup_report")
    expect(table).to_be_visible(timeout=STEP_TIMEOUT)
    expect(page.get_by_text(re.compile("Mondrian"))).to_be_visible()
    shots(page, "cohort-subgroups", table)
    page.get_by_test_id("stSidebar").get_by_text("log units").click()
    settle(page)
    vector = page.locator(".st-key-cohort_calibration .cp-chart")
    expect(vector.locator(".cp-labels div").filter(has_text="?").first).to_be_visible(
        timeout=STEP_TIMEOUT)
    shots(page, "cohort-calibration-vector", vector)

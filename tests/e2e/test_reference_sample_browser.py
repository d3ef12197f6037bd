"""The Setup page's reference-sample check in a real browser: turned on before Run, the Patient
page's bars show the green band's legend entry and the hover says the reference sample's error
in words, and the Cohort's calibration-driven vector carries the band; screenshots at 1280x720
and 1440x900.

Drives Debian's chromium through Playwright (never `playwright install`). Screenshots go to
$CPDECOMP_SCREENSHOT_DIR (default out/e2e/), outside git.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dashboard_driver import (
    RUN_TIMEOUT,
    SCREENSHOTS,
    STEP_TIMEOUT,
    dashboard_page,
    open_page,
    settle,
)

VIEWPORTS = ((1280, 720), (1440, 900))
REDRAWS = 8

pytestmark = pytest.mark.slow


def test_background_check_on_the_patient_page(tmp_path: Path) -> None:
    with dashboard_page(tmp_path) as (page, url):
        checks(page, url)


def checks(page, url: str) -> None:
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.locator(".st-key-data_source")).to_be_visible(timeout=STEP_TIMEOUT)
    open_page(page, "Setup")
    expect(page.get_by_text(re.compile(r"^Off\. With 20 redraws"))).to_be_visible(
        timeout=STEP_TIMEOUT)
    page.locator(".st-key-background_check").get_by_text("Also check how much").click()
    settle(page)
    redraws = page.locator(".st-key-background_redraws input")
    redraws.fill(str(REDRAWS))
    redraws.press("Enter")
    settle(page)
    expect(page.get_by_text(re.compile(rf"^{REDRAWS} redraws: about \d+ s more"))).to_be_visible()
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(500)
        page.get_by_text(re.compile(rf"^{REDRAWS} redraws: about")).scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOTS / f"setup-background-check-{width}x{height}.png"))
    page.set_viewport_size({"width": 1440, "height": 900})
    settle(page)
    page.locator(".st-key-run button").click()
    expect(page.get_by_text(re.compile(r"Results for \d+ patients"))).to_be_visible(
        timeout=RUN_TIMEOUT)

    open_page(page, "Patient")
    bars = page.locator(".st-key-patient_bars .cp-chart")
    expect(bars).to_be_visible(timeout=STEP_TIMEOUT)
    expect(bars.locator(".cp-legend span").filter(
        has_text="Green band: reference-sample error")).to_be_visible(timeout=STEP_TIMEOUT)
    expect(page.get_by_text(re.compile(r"^The black whiskers.*Green band on the calibration"))
           ).to_be_visible()
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(300)
        bars.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        hover_text = hover_widest_bar(page, bars)
        assert "reference-sample error: ±" in hover_text, hover_text
        assert "with another reference sample:" in hover_text, hover_text
        page.screenshot(path=str(SCREENSHOTS / f"patient-background-check-{width}x{height}.png"))
        page.mouse.move(5, 5)
        page.wait_for_timeout(300)
        # Below the bars: the legend with the green band's entry, whole.
        legend = bars.locator(".cp-legend")
        legend.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        box, plot = legend.bounding_box(), bars.bounding_box()
        assert box is not None and plot is not None
        assert box["x"] >= plot["x"] and box["x"] + box["width"] <= plot["x"] + plot["width"]
        page.screenshot(
            path=str(SCREENSHOTS / f"patient-background-legend-{width}x{height}.png"))
    page.set_viewport_size({"width": 1440, "height": 900})
    cohort_checks(page)


def hover_widest_bar(page, bars) -> str:
    """Point at the widest calibration-driven bar and return the words its row shows, checked
    to be whole on the screen."""
    rows = bars.locator(".cp-panel").first.locator(".cp-row")
    widths = [rows.nth(i).locator(".cp-bar").bounding_box() for i in range(rows.count())]
    widest = max(range(len(widths)), key=lambda i: (widths[i] or {"width": 0})["width"])
    box = widths[widest]
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    hover = rows.nth(widest).locator(".cp-tip")
    hover.wait_for(state="visible", timeout=STEP_TIMEOUT)
    shown, screen = hover.bounding_box(), page.viewport_size
    assert shown is not None and screen is not None
    assert 0 <= shown["x"] and shown["x"] + shown["width"] <= screen["width"]
    return hover.inner_text()


def cohort_checks(page) -> None:
    """The Cohort's single calibration-driven vector (log units) carries the band too."""
    from playwright.sync_api import expect

    open_page(page, "Cohort")
    page.get_by_test_id("stSidebar").get_by_text("log units").click()
    settle(page)
    vector = page.locator(".st-key-cohort_calibration .cp-chart")
    expect(vector.locator(".cp-legend span").filter(
        has_text="Green band: reference-sample error")).to_be_visible(timeout=STEP_TIMEOUT)
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(900)
        vector.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        page.screenshot(path=str(SCREENSHOTS / f"cohort-background-check-{width}x{height}.png"))
    page.set_viewport_size({"width": 1440, "height": 900})

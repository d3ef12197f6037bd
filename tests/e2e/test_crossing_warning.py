"""Setup page in a real browser: before Run, CQR-r with the linear model shows a plain warning
that it will most likely be refused (the quantile lines cross) and what to choose instead; no
other choice shows it. A choice with no fast exact path warns with its expected time, and both
warnings are on screen at 1280x720 without scrolling. Screenshots at 1280x720 and 1440x900 go
to $CPDECOMP_SCREENSHOT_DIR (default out/e2e/), outside git.

Drives Debian's chromium through Playwright (never `playwright install`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_driver import (
    SCREENSHOTS,
    STEP_TIMEOUT,
    choose,
    dashboard_page,
    open_page,
    settle,
)

VIEWPORTS = ((1280, 720), (1440, 900))

pytestmark = pytest.mark.slow


def test_crossing_warning_before_run(tmp_path: Path) -> None:
    with dashboard_page(tmp_path) as (page, url):
        checks(page, url)


def test_warnings_before_run_are_on_the_first_screen(tmp_path: Path) -> None:
    """At 1280x720 the Run button is below the fold; the warnings about the choices are not
    (they were drawn beside Run, and a clinician could press Run without having seen them)."""
    from playwright.sync_api import expect

    with dashboard_page(tmp_path, 1280, 720) as (page, url):
        page.goto(url)
        expect(page.get_by_text("Current data: sample")).to_be_visible(timeout=STEP_TIMEOUT)
        open_page(page, "Setup")
        expect(page.locator(".st-key-run button")).to_be_visible(timeout=STEP_TIMEOUT)
        choose(page, "cp_family", "gamma: Gamma (relative residual)")
        page.locator(".st-key-response_scale label").click()
        settle(page)
        slow = page.locator(".st-key-slow_path_warning")
        expect(slow).to_be_visible(timeout=STEP_TIMEOUT)
        assert "Expected time on this machine" in slow.inner_text()
        page.evaluate("window.scrollTo(0, 0)")
        box = slow.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 720, box
        page.screenshot(path=str(SCREENSHOTS / "slow-warning-1280x720.png"))
        page.set_viewport_size({"width": 1440, "height": 900})
        settle(page)
        page.screenshot(path=str(SCREENSHOTS / "slow-warning-1440x900.png"))
        page.locator(".st-key-response_scale label").click()
        settle(page)
        expect(slow).to_have_count(0)
        choose(page, "model", "Linear (least squares)")
        choose(page, "cp_family", "cqr-r: CQR-r (range-scaled)")
        crossing = page.locator(".st-key-crossing_warning")
        expect(crossing).to_be_visible(timeout=STEP_TIMEOUT)
        page.set_viewport_size({"width": 1280, "height": 720})
        settle(page)
        page.evaluate("window.scrollTo(0, 0)")
        box = crossing.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 720, box


def checks(page, url: str) -> None:
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.locator(".st-key-data_source")).to_be_visible(timeout=STEP_TIMEOUT)
    expect(page.get_by_text("Current data: sample")).to_be_visible(timeout=STEP_TIMEOUT)
    open_page(page, "Setup")
    warning = page.locator(".st-key-crossing_warning")
    expect(page.locator(".st-key-run button")).to_be_visible(timeout=STEP_TIMEOUT)
    expect(warning).to_have_count(0)  # the defaults: gradient boosting, normalized
    choose(page, "cp_family", "cqr-r: CQR-r (range-scaled)")
    expect(warning).to_have_count(0)  # CQR-r with trees is fine
    choose(page, "model", "Linear (least squares)")
    expect(warning).to_be_visible(timeout=STEP_TIMEOUT)
    text = warning.inner_text()
    assert "most likely stop" in text and "cross" in text, text
    assert "gradient boosting or random forest" in text and "cqr family" in text, text
    # It comes before Run, so it is read before the click.
    assert warning.bounding_box()["y"] < page.locator(".st-key-run button").bounding_box()["y"]
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(600)
        warning.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        page.screenshot(path=str(SCREENSHOTS / f"crossing-warning-{width}x{height}.png"))
    page.set_viewport_size({"width": 1440, "height": 900})
    settle(page)
    choose(page, "cp_family", "cqr: CQR")
    expect(warning).to_have_count(0)  # linear CQR allows crossing
    choose(page, "cp_family", "normalized: Normalized residual")
    expect(warning).to_have_count(0)
    choose(page, "cp_family", "cqr-r: CQR-r (range-scaled)")
    expect(warning).to_be_visible(timeout=STEP_TIMEOUT)
    choose(page, "model", "Random forest")
    expect(warning).to_have_count(0)

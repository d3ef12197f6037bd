"""Setup page in a real browser: before Run, CQR-r with the linear model shows a plain warning
that it will most likely be refused (the quantile lines cross) and what to choose instead; no
other choice shows it. Screenshots at 1280x720 and 1440x900 go to $CPDECOMP_SCREENSHOT_DIR
(default out/e2e/), outside git.

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

"""The Cohort page's "Features that act together" section in a real browser at 1280x720 and
1440x900: folded by default, computed when asked, a table of the strongest pairs and the three
heat maps; after a run with a sampling method, a plain sentence says why it is not available.

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
    run_current_data,
    run_sample,
    settle,
)

VIEWPORTS = ((1280, 720), (1440, 900))

pytestmark = pytest.mark.slow


def shots(page, name: str, anchor) -> None:
    """The part of the page around `anchor`, at both sizes."""
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(900)  # plotly redraws for the new width
        anchor.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{width}x{height}.png"))
    page.set_viewport_size({"width": 1440, "height": 900})
    settle(page)


def test_features_that_act_together(tmp_path: Path) -> None:
    with dashboard_page(tmp_path) as (page, url):
        checks(page, url)


def checks(page, url: str) -> None:
    from playwright.sync_api import expect

    run_sample(page, url)  # the bundled sample: 10 features, the exact method
    open_page(page, "Cohort")
    section = page.get_by_test_id("stExpander").filter(has_text="Features that act together")
    expect(section).to_be_visible(timeout=STEP_TIMEOUT)
    panel = page.locator(".st-key-interactions_panel")
    expect(panel).to_have_count(0)  # folded, and nothing computed until asked
    section.get_by_text("Features that act together").click()
    settle(page)
    toggle = section.get_by_text("Show the pairs")
    expect(toggle).to_be_visible()
    expect(panel).to_have_count(0)
    toggle.click()
    settle(page)
    expect(panel).to_be_visible(timeout=STEP_TIMEOUT)
    expect(panel.get_by_test_id("stDataFrame")).to_be_visible()
    expect(panel.get_by_text(re.compile(r"The 10 strongest pairs by the total"))).to_be_visible()
    heat = panel.get_by_test_id("stPlotlyChart")
    expect(heat).to_be_visible()
    for title in ("Calibration-driven", "Instance-driven", "Total"):
        expect(heat.locator("text.annotation-text").filter(has_text=title)).to_have_count(1)
    expect(heat.locator("g.xtick text").filter(has_text="bmi").first).to_be_visible()
    # The table: 10 pairs named "a & b", strongest first (the grid draws on a canvas; glide
    # mirrors its cells in a hidden accessible table, read here by test id).
    grid = panel.get_by_test_id("stDataFrame")
    expect(grid.get_by_test_id("glide-cell-0-0")).to_have_text(re.compile(r"^\S.* & \S"),
                                                                 timeout=STEP_TIMEOUT)
    expect(grid.get_by_test_id("glide-cell-0-9")).to_have_text(re.compile(r" & "))
    expect(grid.get_by_test_id("glide-cell-0-10")).to_have_count(0)
    expect(grid.get_by_test_id("glide-cell-4-0")).to_have_text(
        re.compile(r"^(widen|narrow) for \d+% of patients$"))
    shots(page, "cohort-interactions-table", panel.get_by_test_id("stDataFrame"))
    shots(page, "cohort-interactions-heat", heat)

    # A sampling method has no lattice: the section says so in one sentence.
    open_page(page, "Setup")
    choose(page, "attribution_method", "Permutation sampling (antithetic)")
    run_current_data(page)
    expect(page.get_by_test_id("stSidebar").get_by_text(re.compile(r"permutation on"))
           ).to_be_visible(timeout=STEP_TIMEOUT)
    open_page(page, "Cohort")
    note = section.get_by_text(re.compile(r"only the exact method computes"))
    if not note.is_visible():  # the expander may remember that it was open
        section.get_by_text("Features that act together").click()
        settle(page)
    expect(note).to_be_visible(timeout=STEP_TIMEOUT)
    expect(section.get_by_text("Show the pairs")).to_have_count(0)
    expect(panel).to_have_count(0)
    shots(page, "cohort-interactions-unavailable", note)

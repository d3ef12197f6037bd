"""In chromium: the Cohort page's charts that Setup draws ahead under the first results
(app/views/setup.py, `cohort_charts_ahead`) are drawn, yet take no room and show nothing: the
page looks as it did without them. Then the Cohort page draws its own four charts.

Drives Debian's chromium through Playwright (never `playwright install`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_driver import (
    SCREENSHOTS,
    STEP_TIMEOUT,
    dashboard_page,
    open_page,
    run_sample,
    settle,
)

pytestmark = pytest.mark.slow

BLOCK = ".st-key-cohort_charts_ahead"

LOOK = """(selector) => {
  const block = document.querySelector(selector);
  const box = block.getBoundingClientRect();
  const hidden = Array.from(block.querySelectorAll('*'))
    .every(el => getComputedStyle(el).visibility === 'hidden');
  return {height: box.height, hidden,
          drawn: block.querySelectorAll('.js-plotly-plot .main-svg').length > 0,
          plots: block.querySelectorAll('.js-plotly-plot').length};
}"""


WITHOUT_IT = """(selector) => {
  const page = document.querySelector('[data-testid=stMainBlockContainer]');
  const block = document.querySelector(selector);
  const wrapper = block.parentElement;
  const before = page.getBoundingClientRect().height;
  const next = wrapper.nextSibling, parent = wrapper.parentElement;
  wrapper.remove();
  const without = page.getBoundingClientRect().height;
  parent.insertBefore(wrapper, next);
  return [Math.abs(before - without) < 0.5,
          wrapper.getAttribute('data-testid') === 'stLayoutWrapper'];
}"""


@pytest.mark.parametrize("width,height", [(1280, 720), (1440, 900)])
def test_the_charts_drawn_ahead_take_no_room_and_show_nothing(tmp_path: Path, width: int,
                                                              height: int) -> None:
    from playwright.sync_api import expect

    with dashboard_page(tmp_path, width, height) as (page, url):
        run_sample(page, url)
        page.wait_for_function(
            f"document.querySelectorAll('{BLOCK} .js-plotly-plot .main-svg').length >= 4",
            timeout=STEP_TIMEOUT)
        look = page.evaluate(LOOK, BLOCK)
        assert look == {"height": 0, "hidden": True, "drawn": True, "plots": 4}
        # Nothing of it reaches a screen reader or the pointer: Playwright's visibility
        # (what a user can see) says the same of every chart in it.
        charts = page.locator(f"{BLOCK} .js-plotly-plot")
        assert all(not charts.nth(k).is_visible() for k in range(4))
        page.locator(BLOCK).scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOTS / f"setup_results_end_{width}x{height}.png"))
        # No room, not even the gap before it: the page is as long without the block.
        assert page.evaluate(WITHOUT_IT, BLOCK) == [True, True]
        # A rerun of the page (here Streamlit's R key; a reconnecting browser does the same)
        # keeps them: drawn by the first script run alone, it removed them.
        page.locator("h1").first.click()
        page.keyboard.press("r")
        settle(page)
        assert page.evaluate(LOOK, BLOCK) == look
        open_page(page, "Cohort")
        expect(page.locator(BLOCK)).to_have_count(0)
        page.wait_for_function(
            "document.querySelectorAll('.js-plotly-plot').length === 4", timeout=STEP_TIMEOUT)

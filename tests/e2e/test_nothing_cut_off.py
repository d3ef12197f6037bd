"""Nothing cut off at 1280x720 and 1440x900, measured in a real browser.

After a run on the bundled sample: on the Patient, Cohort (with a subgroup report and the
coverage by interval width),
Recalibration and Review queue pages no text element clips its text (scrollWidth >
clientWidth where overflow hides), no data table needs a horizontal scroll bar except the
queue's, whose patient column is pinned,
and every text of every plotly figure (tick labels, titles, bar labels, legend) lies inside the
figure. Screenshots of each page at both sizes go to $CPDECOMP_SCREENSHOT_DIR (default
out/e2e/cut_off), outside git.

Drives Debian's chromium through Playwright (never `playwright install`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from dashboard_driver import (
    ROOT,
    STEP_TIMEOUT,
    choose,
    launch,
    open_page,
    run_sample,
    streamlit_server,
)

SCREENSHOTS = Path(os.environ.get("CPDECOMP_SCREENSHOT_DIR", ROOT / "out" / "e2e" / "cut_off"))
VIEWPORTS = ((1280, 720), (1440, 900))

pytestmark = pytest.mark.slow

CLIPPED_TEXT = """(root) => {
  // Elements whose own text is wider than their box while their overflow hides it (ellipsis or
  // hidden): what a reader sees cut. Only elements that hold text directly are looked at.
  const cut = [];
  for (const el of root.querySelectorAll('*')) {
    if (!el.offsetParent || el.closest('.js-plotly-plot, [data-testid="stDataFrame"]')) continue;
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const style = getComputedStyle(el);
    const hides = style.overflowX !== 'visible' || style.textOverflow === 'ellipsis';
    if (hides && el.scrollWidth > el.clientWidth + 1) cut.push(el.textContent.trim().slice(0, 60));
  }
  return cut;
}"""

TABLES_SCROLLING = """(root) => [
  ...root.querySelectorAll('[data-testid="stDataFrame"], .cp-table-wrap')]
  .filter(t => t.offsetParent)
  .map(t => {
    // A data grid scrolls in its .dvn-scroller; an HTML table (app/html_charts.py) in its wrap.
    const scroller = t.classList.contains('cp-table-wrap') ? t : t.querySelector('.dvn-scroller');
    const scrolls = scroller && scroller.scrollWidth > scroller.clientWidth + 1;
    return scrolls ? (t.closest('[class*="st-key-"]')?.className || 'a table') : null;
  }).filter(x => x)"""

FIGURE_TEXT_OUTSIDE = """(root) => {
  // Every text of every figure (ticks, titles, annotations, bar labels, legend) inside the
  // figure's own box, with a pixel of slack.
  const outside = [];
  let seen = 0;
  for (const plot of root.querySelectorAll('.js-plotly-plot')) {
    const svg = plot.querySelector('.main-svg');
    if (!svg) continue;
    const box = svg.getBoundingClientRect();
    for (const text of plot.querySelectorAll('text')) {
      if (!text.textContent.trim()) continue;
      const r = text.getBoundingClientRect();
      if (r.width === 0) continue;
      seen += 1;
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1
          || r.bottom > box.bottom + 1) outside.push(text.textContent.trim().slice(0, 40));
    }
  }
  // The Patient page's HTML charts (app/html_charts.py): every text on show inside the chart,
  // and no two axis numbers (of one panel or of neighbouring panels) running into each other.
  for (const chart of root.querySelectorAll('.cp-chart')) {
    const box = chart.getBoundingClientRect();
    for (const el of chart.querySelectorAll('*')) {
      const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
      if (!own || !el.checkVisibility()) continue;
      const r = el.getBoundingClientRect();
      if (r.width === 0) continue;
      seen += 1;
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1
          || r.bottom > box.bottom + 1) outside.push(el.textContent.trim().slice(0, 40));
    }
    const ticks = [...chart.querySelectorAll('.cp-axis span')].map(t => t.getBoundingClientRect())
      .filter(r => r.width > 0).sort((a, b) => a.left - b.left);
    for (let i = 1; i < ticks.length; i++) {
      if (ticks[i].top === ticks[i - 1].top && ticks[i].left < ticks[i - 1].right + 2)
        outside.push(`axis numbers touching at x=${Math.round(ticks[i].left)}`);
    }
  }
  return [outside, seen];
}"""


def assert_nothing_cut(page, where: str, figures: bool = True) -> None:
    main = page.get_by_test_id("stMain").element_handle()
    assert page.evaluate(CLIPPED_TEXT, main) == [], f"{where}: text cut off"
    outside, seen = page.evaluate(FIGURE_TEXT_OUTSIDE, main)
    assert outside == [], f"{where}: figure text outside its figure"
    if figures:  # the check saw the charts' texts
        assert seen >= 20, f"{where}: only {seen} figure texts found"


def wait_for_figures(page, count: int) -> None:
    page.wait_for_function(
        "document.querySelectorAll('.js-plotly-plot .main-svg, .cp-chart').length >= "
        f"{count}", timeout=STEP_TIMEOUT)
    page.wait_for_timeout(500)


def shoot(page, name: str, width: int, height: int, scroll_to=None) -> None:
    if scroll_to is not None:
        scroll_to.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
    page.screenshot(path=str(SCREENSHOTS / f"{name}_{width}x{height}.png"))


def test_no_text_is_cut_off_in_the_key_panels() -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import expect, sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="cpdecomp-cut-off-"))
    environment = {**os.environ, "CPDECOMP_REVIEW_DB": str(folder / "reviews.sqlite3"),
                   "CPDECOMP_CACHE_DIR": str(folder / "cache")}
    with sync_playwright() as playwright, \
            streamlit_server(environment, folder / "server.log") as (url, _):
        browser = launch(playwright)
        try:
            for width, height in VIEWPORTS:
                page = browser.new_page(viewport={"width": width, "height": height})
                run_sample(page, url)

                open_page(page, "Patient")
                expect(page.get_by_text("Why is patient")).to_be_visible(timeout=STEP_TIMEOUT)
                wait_for_figures(page, 2)
                assert_nothing_cut(page, f"Patient at {width}x{height}")
                assert page.evaluate(TABLES_SCROLLING,
                                     page.get_by_test_id("stMain").element_handle()) == []
                shoot(page, "patient", width, height)

                open_page(page, "Cohort")
                wait_for_figures(page, 4)
                choose(page, "subgroup_feature", "bmi")
                subgroup = page.locator(".st-key-subgroup_report")
                expect(subgroup.get_by_test_id("stDataFrame")).to_be_visible(
                    timeout=STEP_TIMEOUT)
                page.wait_for_timeout(500)
                assert_nothing_cut(page, f"Cohort at {width}x{height}")
                # The subgroup table shows every column without a scroll bar.
                assert page.evaluate(TABLES_SCROLLING, subgroup.element_handle()) == [], (
                    f"the subgroup table scrolls at {width}x{height}")
                shoot(page, "cohort_subgroups", width, height, scroll_to=subgroup)
                # Coverage by interval width: folded unless the narrowest are under-covered.
                by_width = page.locator(".st-key-cohort_width_coverage")
                if not by_width.is_visible():
                    page.get_by_test_id("stExpander").filter(
                        has_text="Coverage by interval width").locator("summary").click()
                expect(by_width.locator(".cp-table")).to_be_visible(timeout=STEP_TIMEOUT)
                page.wait_for_timeout(300)
                assert_nothing_cut(page, f"Cohort's coverage by width at {width}x{height}")
                assert page.evaluate(TABLES_SCROLLING, by_width.element_handle()) == [], (
                    f"the coverage-by-width table scrolls at {width}x{height}")
                page.get_by_test_id("stExpander").filter(
                    has_text="Coverage by interval width").scroll_into_view_if_needed()
                page.wait_for_timeout(300)
                shoot(page, "cohort_width_coverage", width, height)

                open_page(page, "Recalibration")  # the sample's rows split by sex
                expect(page.locator(".st-key-recal_reading")).to_be_visible(
                    timeout=STEP_TIMEOUT)
                wait_for_figures(page, 4)
                assert_nothing_cut(page, f"Recalibration at {width}x{height}")
                assert page.evaluate(TABLES_SCROLLING,
                                     page.get_by_test_id("stMain").element_handle()) == [], (
                    f"the coverage table scrolls at {width}x{height}")
                shoot(page, "recalibration", width, height)

                open_page(page, "Review queue")
                expect(page.get_by_text("Mark a case reviewed")).to_be_visible(
                    timeout=STEP_TIMEOUT)
                assert_nothing_cut(page, f"Review queue at {width}x{height}", figures=False)
                shoot(page, "queue", width, height)
                page.close()
        finally:
            browser.close()

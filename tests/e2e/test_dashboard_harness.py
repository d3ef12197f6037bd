"""benchmarks/dashboard.py's measure of the browser's work per click, in a real browser: it
must read the page's own renderer, in seconds, and count every click of a round. Speed is not
asserted here: the benchmark measures it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from dashboard_driver import launch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import dashboard  # benchmarks/ is not a package: found on the path set above
import load

pytestmark = pytest.mark.slow


def test_the_work_per_click_is_the_pages_own_main_thread_in_seconds(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    with load.trivial_server(tmp_path, "trivial.log") as (url, _), \
            sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page()
            page.goto(url)
            dashboard.subheading(page, dashboard.TRIVIAL_HEADING).wait_for()
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable")
            before = dashboard.busy_seconds(cdp)
            # 300 ms of the page's main thread, busy on purpose: seconds, not milliseconds,
            # and this page's renderer (another page's work would not show here).
            page.evaluate("() => { const t = performance.now();"
                          " while (performance.now() - t < 300) {} }")
            spent = dashboard.busy_seconds(cdp) - before
            assert 0.29 <= spent < 2.0, spent

            times: dict[str, list[float]] = {"t": [], "t settled": [], "t busy": []}
            dashboard._in_page_times(page, "next", dashboard.TRIVIAL_HEADING, 3, times, "t")
            assert len(times["t"]) == 3 and len(times["t busy"]) == 1
            # The page settles after its new heading, and both are a click's round trip.
            assert all(0 < h <= s < 30 for h, s in zip(times["t"], times["t settled"], strict=True))
            assert 0 < times["t busy"][0] < 2.0  # per click: a round trip is some milliseconds
            assert "Clicked 3 times" in page.locator("h3").first.inner_text()
        finally:
            browser.close()

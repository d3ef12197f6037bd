"""The Patient page's charts in a real browser: plain HTML and CSS (app/html_charts.py), no
chart library. Each switch shows the new patient's bars, which agree with the plain reading
written from the same run by other code (app/reading.py); pointing at a row shows its words
in a box that stays on the screen, and the box goes when the pointer leaves.

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
    dashboard_page,
    open_page,
    run_sample,
    settle,
)

pytestmark = pytest.mark.slow

VIEWPORTS = ((1280, 720), (1440, 900))
BARS = ".st-key-patient_bars .cp-chart"
LEAD = re.compile(r"comes from this patient's (.+?) \(([+−][\d.,]*\d)")
"""The reading's sentence naming the feature that moves the width most, and its total."""


def chart_rows(page) -> dict:
    """The bars chart as the page shows it: feature labels top to bottom, and each panel's
    numbers beside the bars."""
    return page.evaluate("""(selector) => {
      const chart = document.querySelector(selector);
      return {
        labels: [...chart.querySelectorAll('.cp-labels div')].map(d => d.textContent),
        panels: [...chart.querySelectorAll('.cp-panel')].map(panel =>
          [...panel.querySelectorAll('.cp-row')].map(row =>
            (row.querySelector('.cp-value') || {}).textContent || null)),
        heads: [...chart.querySelectorAll('.cp-head')].map(d => d.textContent),
        plots: document.querySelectorAll('.st-key-patient_bars .js-plotly-plot, '
          + '.st-key-patient_bars canvas, .st-key-patient_bars script').length,
      };
    }""", BARS)


def test_the_bars_follow_each_switch_and_agree_with_the_reading(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    with dashboard_page(tmp_path) as (page, url):
        run_sample(page, url)
        open_page(page, "Patient")
        expect(page.locator(BARS)).to_be_visible(timeout=STEP_TIMEOUT)
        expect(page.locator(".st-key-patient_waterfall .cp-chart")).to_be_visible()
        heading = page.locator("h3").filter(has_text="Why is patient")
        reading = page.locator(".st-key-patient_reading")
        seen = set()
        for _ in range(4):
            shown = chart_rows(page)
            assert shown["plots"] == 0  # HTML only
            assert shown["heads"] == ["Calibration-driven", "Instance-driven", "Total"]
            assert len(shown["panels"]) == 3
            assert all(len(rows) == len(shown["labels"]) == 10 for rows in shown["panels"])
            # The feature the reading names, and its total, are the chart's.
            lead = LEAD.search(reading.inner_text())
            assert lead is not None, reading.inner_text()
            feature, total = lead.groups()
            row = next(i for i, label in enumerate(shown["labels"])
                       if label.rstrip(" ?⇄") == feature)
            assert shown["panels"][2][row] == total, (feature, total, shown)
            seen.add(tuple(shown["panels"][2]))
            before = heading.inner_text()
            page.locator(".st-key-patient_next button").click()
            expect(heading).not_to_have_text(before, timeout=STEP_TIMEOUT)
            settle(page)
        assert len(seen) == 4  # four patients, four different sets of bars


def test_pointing_at_a_row_shows_its_words_on_screen(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    with dashboard_page(tmp_path) as (page, url):
        run_sample(page, url)
        open_page(page, "Patient")
        bars = page.locator(BARS)
        expect(bars).to_be_visible(timeout=STEP_TIMEOUT)
        for width, height in VIEWPORTS:
            page.set_viewport_size({"width": width, "height": height})
            page.wait_for_timeout(300)
            for panel, words in ((0, "calibration-driven part (set by the calibration set)"),
                                 (1, "instance-driven part"), (2, "total (calibration + "
                                                                  "instance)")):
                row = bars.locator(".cp-panel").nth(panel).locator(".cp-row").first
                tip = row.locator(".cp-tip")
                expect(tip).to_be_hidden()
                box = row.bounding_box()
                assert box is not None
                # The far end of the row, away from the bar: the whole row answers.
                page.mouse.move(box["x"] + box["width"] - 3, box["y"] + box["height"] / 2)
                expect(tip).to_be_visible()
                expect(tip).to_contain_text(words)
                shown = tip.bounding_box()
                assert shown is not None
                assert 0 <= shown["x"] and shown["x"] + shown["width"] <= width, (panel, shown)
                if panel == 2:
                    page.screenshot(path=str(SCREENSHOTS / f"patient-hover-{width}x{height}.png"))
                page.mouse.move(2, 2)
                expect(tip).to_be_hidden()
            # The waterfall's rows too: the step's feature and its number.
            waterfall = page.locator(".st-key-patient_waterfall .cp-chart")
            waterfall.scroll_into_view_if_needed()
            row = waterfall.locator(".cp-row").nth(1)
            label = waterfall.locator(".cp-labels div").nth(1).inner_text()
            row.hover()
            expect(row.locator(".cp-tip")).to_contain_text(re.compile(
                rf"^{re.escape(label)}: [+−][\d.,]+$"))
            page.screenshot(path=str(SCREENSHOTS / f"patient-waterfall-{width}x{height}.png"))
            page.mouse.move(2, 2)
            page.get_by_test_id("stMain").evaluate("e => e.scrollTo(0, 0)")

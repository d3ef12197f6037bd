"""The Patient page's charts stay mounted across a patient switch (app/chart_component.py), in
a real browser: both charts are drawn; after Next the same chart elements show the new
patient's bars (their data and their axis labels in the DOM); and what the in-place update drew
is what a freshly mounted chart draws for that patient.

Drives Debian's chromium through Playwright (never `playwright install`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_driver import STEP_TIMEOUT, dashboard_page, open_page, run_sample, settle

from app import chart_component

pytestmark = pytest.mark.slow

SCRIPT = f"./component/app.chart_component.plotly_js/{chart_component.PLOTLY_SCRIPT}"
CHARTS = {"bars": ".st-key-patient_bars .js-plotly-plot",
          "waterfall": ".st-key-patient_waterfall .js-plotly-plot"}

DRAWN = """(selector) => {
  const plot = document.querySelector(selector);
  return {
    marker: plot.dataset.marker || null,
    draws: Number(plot.dataset.draws || 0),
    // plotly's own decoded traces: what it drew, whatever form the JSON sent
    traces: plot._fullData.map(t => ({name: t.name || null, x: Array.from(t.x || [], Number),
                                      y: Array.from(t.y || [], String)})),
    // the feature labels as text on screen, top to bottom
    ticks: Array.from(plot.querySelectorAll('.yaxislayer-above .ytick text'))
      .map(t => [t.getBoundingClientRect().top, t.textContent])
      .sort((a, b) => a[0] - b[0]).map(t => t[1]),
  };
}"""


def drawn(page, chart: str) -> dict:
    return page.evaluate(DRAWN, CHARTS[chart])


def wait_drawn(page) -> None:
    page.wait_for_function(
        "(selectors) => selectors.every(s => { const p = document.querySelector(s);"
        " return p && p._fullData && p.querySelector('.main-svg'); })",
        arg=list(CHARTS.values()), timeout=STEP_TIMEOUT, polling="raf")


def heading(page) -> str:
    return page.get_by_text("Why is patient").inner_text()


def test_a_switch_updates_the_mounted_charts_in_place(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    with dashboard_page(tmp_path) as (page, url):
        run_sample(page, url)
        open_page(page, "Patient")
        wait_drawn(page)
        first = {chart: drawn(page, chart) for chart in CHARTS}
        bars = first["bars"]
        assert [t["name"] for t in bars["traces"]][:3] == [
            "Calibration-driven", "Instance-driven", "Total (= calibration + instance)"]
        features = {"age", "sex", "bmi", "bp", "s1 tc", "s2 ldl", "s3 hdl", "s4 tch", "s5 ltg",
                    "s6 glu"}
        # The labels on screen are the traces' feature labels (with their marks)...
        assert bars["ticks"], "no feature labels drawn"
        assert {tick.rstrip(" ?⇄") for tick in bars["ticks"]} == features
        # ...and the bars are numbers, one per feature in each panel.
        assert all(len(t["x"]) == len(features) for t in bars["traces"][:3])
        expect(page.locator(".st-key-patient_bars g.legend")).to_contain_text("Calibration-driven")

        page.evaluate("(selectors) => selectors.forEach(s =>"
                      " document.querySelector(s).dataset.marker = 'mounted')",
                      list(CHARTS.values()))
        before = heading(page)
        page.locator(".st-key-patient_next button").click()
        expect(page.get_by_text("Why is patient")).not_to_have_text(before, timeout=STEP_TIMEOUT)
        page.wait_for_function(
            "([selectors, counts]) => selectors.every((s, i) =>"
            " Number(document.querySelector(s).dataset.draws) > counts[i])",
            arg=[list(CHARTS.values()), [first[c]["draws"] for c in CHARTS]],
            timeout=STEP_TIMEOUT, polling="raf")
        settle(page)
        switched = {chart: drawn(page, chart) for chart in CHARTS}
        for chart in CHARTS:
            # The same element, redrawn: not a new chart...
            assert switched[chart]["marker"] == "mounted", f"the {chart} chart was rebuilt"
            # ...showing another patient's numbers.
            assert switched[chart]["traces"] != first[chart]["traces"], chart
        new_bars = switched["bars"]
        # The labels on screen, top to bottom, follow the new patient's feature order (by
        # |total|; the axis runs top down).
        assert new_bars["ticks"] == list(new_bars["traces"][0]["y"])

        # A fresh mount for the same patient (leave the page and come back) draws the same.
        shown = heading(page)
        open_page(page, "Cohort")
        open_page(page, "Patient")
        expect(page.get_by_text("Why is patient")).to_have_text(shown)
        wait_drawn(page)
        for chart in CHARTS:
            fresh = drawn(page, chart)
            assert fresh["marker"] is None  # a new element: the marker test can fail
            assert fresh["traces"] == switched[chart]["traces"], chart
            assert fresh["ticks"] == switched[chart]["ticks"], chart

        # The plotly package's plotly.js, which the chart loads when the page has no
        # plotly.js of the same major version, is served by the dashboard itself.
        served = page.evaluate("""async (path) => {
            const answer = await fetch(new URL(path, document.baseURI));
            const text = await answer.text();
            return {status: answer.status, type: answer.headers.get('content-type'),
                    head: text.slice(0, 200), sets: text.includes('window.Plotly = Plotly')};
        }""", SCRIPT)
        assert served["status"] == 200
        assert "javascript" in served["type"]
        assert f"plotly.js v{chart_component.PLOTLY_VERSION}" in served["head"]
        assert served["sets"]

        # Hover texts survive the in-place update.
        page.locator(".st-key-patient_next button").click()
        settle(page)
        chart = page.locator(CHARTS["bars"])
        paths = chart.locator("g.trace.bars").nth(1).locator("path")
        boxes = [paths.nth(i).bounding_box() for i in range(paths.count())]
        widest = max((b for b in boxes if b is not None), key=lambda b: b["width"])
        page.mouse.move(widest["x"] + widest["width"] / 2, widest["y"] + widest["height"] / 2)
        hover = chart.locator("g.hoverlayer g.hovertext")
        hover.first.wait_for(state="visible", timeout=STEP_TIMEOUT)
        text = hover.first.text_content() or ""
        assert any(feature in text for feature in features), text

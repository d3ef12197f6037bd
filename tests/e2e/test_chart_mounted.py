"""The Patient page's charts stay mounted across a patient switch (app/chart_component.py), in
a real browser: both charts are drawn; the next patient's are drawn ahead on a hidden plot in
each slot; after Next that plot is shown, with the new patient's bars (their data and their axis
labels in the DOM), and the other is hidden; a switch to a patient not drawn ahead (Previous)
draws in place; and what a slot shows is what a freshly mounted chart draws for that patient.

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
"""The first plot in a slot is the one on show (the component keeps it first)."""
SHOWN = {chart: f"{selector}:not(.{chart_component.SPARE_CLASS})"
         for chart, selector in CHARTS.items()}
SPARES = {chart: f"{selector}.{chart_component.SPARE_CLASS}" for chart, selector in CHARTS.items()}

DRAWN = """(selector) => {
  const plot = document.querySelector(selector);
  return {
    marker: plot.dataset.marker || null,
    // on screen: visible, and the other plot in the slot not
    visible: plot.checkVisibility({visibilityProperty: true}),
    plots: plot.parentElement.querySelectorAll(':scope > .js-plotly-plot').length,
    visiblePlots: [...plot.parentElement.querySelectorAll(':scope > .js-plotly-plot')]
      .filter(p => p.checkVisibility({visibilityProperty: true})).length,
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


FRAME_OF_HEADING = """(shown) => {
  window.shownWithHeading = null;
  const text = () => (Array.from(document.querySelectorAll('h3'))
    .find(h => h.textContent.includes('Why is patient')) || {}).textContent;
  const before = text();
  const look = () => {
    const now = text();
    if (now && now !== before) {
      window.shownWithHeading = shown.map(s => document.querySelector(s).dataset.marker || null);
    } else requestAnimationFrame(look);
  };
  requestAnimationFrame(look);
}"""


def drawn(page, chart: str) -> dict:
    return page.evaluate(DRAWN, CHARTS[chart])


def spare(page, chart: str) -> dict:
    return page.evaluate(DRAWN, SPARES[chart])


def wait_drawn_ahead(page) -> None:
    """Until each slot's hidden plot has drawn the figure it was given."""
    page.wait_for_function(
        "(selectors) => selectors.every(s => { const p = document.querySelector(s);"
        " return p && p._cpdecompReady && p._cpdecompReady === p._cpdecompFigure; })",
        arg=list(SPARES.values()), timeout=STEP_TIMEOUT, polling="raf")


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
        first_heading = heading(page)
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
        expect(page.locator(f"{SHOWN['bars']} g.legend")).to_contain_text("Calibration-driven")

        # The next patient's charts are drawn ahead, hidden, in each slot.
        wait_drawn_ahead(page)
        for chart in CHARTS:
            # (counted now: plotly marks a plot as its own once it has drawn on it)
            now = drawn(page, chart)
            assert now["visiblePlots"] == 1 and now["plots"] == 2, chart
            assert now["traces"] == first[chart]["traces"], chart
            ahead = spare(page, chart)
            assert not ahead["visible"], chart
            assert ahead["traces"] != first[chart]["traces"], chart
        page.evaluate("(selectors) => selectors.forEach(s =>"
                      " document.querySelector(s).dataset.marker = 'ahead')",
                      list(SPARES.values()))
        page.evaluate("(selectors) => selectors.forEach(s =>"
                      " document.querySelector(s).dataset.marker = 'shown')",
                      list(CHARTS.values()))
        drawn_ahead = {chart: spare(page, chart) for chart in CHARTS}
        before = heading(page)
        # On each animation frame until the heading names the next patient: which plot each
        # slot shows then.
        page.evaluate(FRAME_OF_HEADING, list(SHOWN.values()))
        page.locator(".st-key-patient_next button").click()
        expect(page.get_by_text("Why is patient")).not_to_have_text(before, timeout=STEP_TIMEOUT)
        page.wait_for_function(
            "([selectors, counts]) => selectors.every((s, i) =>"
            " Number(document.querySelector(s).dataset.draws) > counts[i])",
            arg=[list(CHARTS.values()), [first[c]["draws"] for c in CHARTS]],
            timeout=STEP_TIMEOUT, polling="raf")
        settle(page)
        switched = {chart: drawn(page, chart) for chart in CHARTS}
        # The charts drawn ahead were on show in the very frame the new heading first was.
        assert page.evaluate("() => window.shownWithHeading") == ["ahead", "ahead"]
        for chart in CHARTS:
            # The plot drawn ahead is the one now on show, alone: not a new chart...
            assert switched[chart]["marker"] == "ahead", f"{chart}: not the plot drawn ahead"
            assert switched[chart]["visible"] and switched[chart]["visiblePlots"] == 1, chart
            assert switched[chart]["plots"] == 2, chart
            # ...showing another patient's numbers, those it drew ahead.
            assert switched[chart]["traces"] != first[chart]["traces"], chart
            assert switched[chart]["traces"] == drawn_ahead[chart]["traces"], chart
        # The plot shown before is hidden, and draws the patient after this one ahead.
        wait_drawn_ahead(page)
        for chart in CHARTS:
            following = spare(page, chart)
            assert following["marker"] == "shown" and not following["visible"], chart
            assert following["traces"] not in (first[chart]["traces"],
                                                switched[chart]["traces"]), chart
        new_bars = switched["bars"]
        # The labels on screen, top to bottom, follow the new patient's feature order (by
        # |total|; the axis runs top down).
        assert new_bars["ticks"] == list(new_bars["traces"][0]["y"])

        # Previous: a patient not drawn ahead, drawn in place on the plot on show.
        before = heading(page)
        page.locator(".st-key-patient_previous button").click()
        expect(page.get_by_text("Why is patient")).to_have_text(
            first_heading, timeout=STEP_TIMEOUT)
        page.wait_for_function(
            "([s, count]) => Number(document.querySelector(s).dataset.draws) > count",
            arg=[CHARTS["bars"], switched["bars"]["draws"]], timeout=STEP_TIMEOUT,
            polling="raf")
        settle(page)
        back = drawn(page, "bars")
        assert back["marker"] == "ahead" and back["visible"]  # the same plot, drawn again
        assert back["traces"] == first["bars"]["traces"]
        page.locator(".st-key-patient_next button").click()
        expect(page.get_by_text("Why is patient")).to_have_text(before, timeout=STEP_TIMEOUT)
        page.wait_for_function(
            "([s, count]) => Number(document.querySelector(s).dataset.draws) > count",
            arg=[CHARTS["bars"], back["draws"]], timeout=STEP_TIMEOUT, polling="raf")
        settle(page)
        assert drawn(page, "bars")["traces"] == switched["bars"]["traces"]

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
        chart = page.locator(SHOWN["bars"])
        paths = chart.locator("g.trace.bars").nth(1).locator("path")
        boxes = [paths.nth(i).bounding_box() for i in range(paths.count())]
        widest = max((b for b in boxes if b is not None), key=lambda b: b["width"])
        page.mouse.move(widest["x"] + widest["width"] / 2, widest["y"] + widest["height"] / 2)
        hover = chart.locator("g.hoverlayer g.hovertext")
        hover.first.wait_for(state="visible", timeout=STEP_TIMEOUT)
        text = hover.first.text_content() or ""
        assert any(feature in text for feature in features), text

        # The toolbar's fullscreen button (Streamlit's own charts have one) shows the slot
        # fullscreen, its chart as tall as the screen; leaving fullscreen gives the figure's
        # height back.
        tall, wide = page.evaluate("(s) => { const l = document.querySelector(s)._fullLayout;"
                                   " return [l.height, l.width]; }", SHOWN["bars"])
        chart.hover()
        button = chart.locator('.modebar-btn[data-title="View fullscreen"]')
        button.wait_for(state="visible", timeout=STEP_TIMEOUT)
        button.click()
        page.wait_for_function(
            "(s) => { const f = document.fullscreenElement, p = document.querySelector(s);"
            " return f && f.contains(p) && f.closest('.st-key-patient_bars')"
            " && p._fullLayout.height === window.innerHeight"
            " && p._fullLayout.width === window.innerWidth; }",
            arg=SHOWN["bars"], timeout=STEP_TIMEOUT, polling="raf")
        page.evaluate("() => document.exitFullscreen()")
        page.wait_for_function(
            "([s, height, width]) => !document.fullscreenElement"
            " && document.querySelector(s)._fullLayout.height === height"
            " && document.querySelector(s)._fullLayout.width === width",
            arg=[SHOWN["bars"], tall, wide], timeout=STEP_TIMEOUT, polling="raf")
        # (the checks above can fail: the chart is smaller than the screen both ways)
        screen = page.evaluate("() => [window.innerHeight, window.innerWidth]")
        assert tall < screen[0] and wide < screen[1]

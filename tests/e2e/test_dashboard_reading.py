"""What a clinician sees, in a real browser at 1280x720 and 1440x900: tied widths under the
absolute family flag nobody, the default target is the outcome (not an id or a 0/1 flag),
intervals beyond what the outcome can be are marked clipped, each patient gets a plain reading,
marking a case changes its row at once, and names from the data never render as markup (no
request leaves the page).

Drives Debian's chromium through Playwright (never `playwright install`). Screenshots go to
$CPDECOMP_SCREENSHOT_DIR (default out/e2e/), outside git.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pandas as pd
import pytest
from dashboard_driver import (
    RUN_TIMEOUT,
    SCREENSHOTS,
    STEP_TIMEOUT,
    choose,
    dashboard_page,
    open_page,
    settle,
)

VIEWPORTS = ((1280, 720), (1440, 900))
OUTSIDE = "http://198.51.100.7:9"
"""A documentation-only address (RFC 5737): a request to it means markup was rendered."""

pytestmark = pytest.mark.slow


def stay_csv(path: Path) -> Path:
    """A heart-attack-like cohort: a row id first, the never-negative outcome in the middle and
    a 0/1 censoring flag last (the column a naive default would take)."""
    rng = np.random.default_rng(11)
    n = 240
    age = rng.normal(65, 10, n)
    chf = rng.integers(0, 2, n)
    bmi = rng.normal(27, 4, n)
    stay = np.maximum(0, 2 + 4 * chf + 0.1 * (age - 65) + rng.gamma(2, 1 + 2 * chf, n)).round()
    pd.DataFrame({"id": np.arange(1, n + 1), "age": age.round(1), "chf": chf, "bmi": bmi.round(1),
                  "lenstay": stay, "sysbp": rng.normal(130, 20, n).round(),
                  "cens": rng.integers(0, 2, n)}).to_csv(path, index=False)
    return path


def upload(page, url: str, csv: Path) -> None:
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.locator(".st-key-data_source")).to_be_visible(timeout=STEP_TIMEOUT)
    page.locator(".st-key-data_source").get_by_text("Upload one table").click()
    page.locator(".st-key-upload input[type='file']").set_input_files(str(csv))
    expect(page.get_by_text(re.compile("Current data:"))).to_be_visible(timeout=STEP_TIMEOUT)
    settle(page)


def shots(page, name: str) -> None:
    """The part of the page on screen, at both sizes."""
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(900)  # plotly redraws for the new width
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{width}x{height}.png"))
    page.set_viewport_size({"width": 1440, "height": 900})
    settle(page)


def metric(page, label: str):
    return page.get_by_test_id("stMetric").filter(has_text=label).get_by_test_id(
        "stMetricValue")


def run(page, model: str, family: str) -> None:
    """Choose the model and family on Setup, press Run, and wait for this run's results."""
    from playwright.sync_api import expect

    open_page(page, "Setup")
    choose(page, "model", model)
    choose(page, "cp_family", family)
    page.locator(".st-key-run button").click()
    family_key = family.split(":")[0]
    expect(page.get_by_test_id("stSidebar")).to_contain_text(
        re.compile(rf"Last run: \w+, {family_key},"), timeout=RUN_TIMEOUT)
    settle(page)


def test_tied_widths_clipped_intervals_reading_and_the_queue(tmp_path: Path) -> None:
    csv = stay_csv(tmp_path / "stay.csv")
    with dashboard_page(tmp_path) as (page, url):
        reading_checks(page, url, csv)


def reading_checks(page, url: str, csv: Path) -> None:
    from playwright.sync_api import expect

    upload(page, url, csv)
    # The outcome, not the id (first) or the 0/1 flag (last).
    target = page.locator(".st-key-target_column [role='combobox']")
    expect(target).to_have_value("lenstay", timeout=STEP_TIMEOUT)
    expect(page.get_by_text("taken as never negative")).to_be_visible()
    choose(page, "target_column", "cens")
    expect(page.get_by_text(re.compile("has only two values"))).to_be_visible(
        timeout=STEP_TIMEOUT)
    choose(page, "target_column", "lenstay")
    shots(page, "data")

    # Absolute family: every width is 2q, up to rounding.
    open_page(page, "Setup")
    choose(page, "model", "Linear (least squares)")
    expect(page.locator(".st-key-background_used input")).to_have_value("120")
    shots(page, "setup")
    run(page, "Linear (least squares)", "absolute: Absolute residual")
    open_page(page, "Review queue")
    expect(metric(page, "Flagged")).to_have_text("0 of 60", timeout=STEP_TIMEOUT)
    expect(page.get_by_text("Every patient has the same width")).to_be_visible()
    shots(page, "queue-absolute")
    open_page(page, "Cohort")
    expect(page.get_by_text("there is no instance-driven part")).to_be_visible(
        timeout=STEP_TIMEOUT)
    shots(page, "cohort-absolute")
    open_page(page, "Patient")
    reading = page.locator(".st-key-patient_reading")
    expect(reading).to_contain_text("the width is the same for every patient",
                                    timeout=STEP_TIMEOUT)
    # Compared with the model without features, never with "a typical patient" (every
    # patient has this width).
    expect(reading).to_contain_text("than it would be if the model used none of the features")
    expect(reading).not_to_contain_text("nothing is known")
    # A short stay predicted under 2q/2 days reaches below 0: shown clipped at 0.
    clipped = page.get_by_test_id("stMetric").filter(has_text="clipped")
    for _ in range(12):
        if clipped.count():
            break
        page.locator(".st-key-patient_next button").click()
        settle(page)
    expect(clipped.get_by_test_id("stMetricValue")).to_have_text(
        re.compile(r"^\[0, [\d.]+\] ✂$"))
    expect(page.get_by_text("clipping is not a sum of feature parts")).to_be_visible()
    shots(page, "patient-absolute")

    # A family whose width follows the patient.
    run(page, "Gradient boosting", "normalized: Normalized residual")
    open_page(page, "Patient")
    expect(reading).to_contain_text(re.compile(
        r"The interval is [\d.]+ (wider|narrower) than for a patient about whom nothing is "
        r"known"),
        timeout=STEP_TIMEOUT)
    assert "e-0" not in reading.inner_text()  # rounded for people
    bars = page.locator(".st-key-patient_bars .cp-chart")
    for title in ("Calibration-driven", "Instance-driven", "Total"):
        # Above the fold at 1440x900.
        expect(bars.locator(".cp-head", has_text=title)).to_be_in_viewport()
    shots(page, "patient")
    page.locator(".st-key-compare_on label").click()
    settle(page)
    compared = page.locator(".st-key-compare_patient")
    expect(compared).to_be_visible(timeout=STEP_TIMEOUT)
    compared.scroll_into_view_if_needed()
    # The patient's two charts and the two compared patients' panels.
    expect(page.locator(".cp-chart")).to_have_count(4, timeout=STEP_TIMEOUT)
    shots(page, "patient-compare")
    page.locator(".st-key-compare_on label").click()
    settle(page)
    open_page(page, "Cohort")
    shots(page, "cohort")

    open_page(page, "Review queue")
    expect(metric(page, "Flagged")).to_have_text("6 of 60", timeout=STEP_TIMEOUT)
    # The table is drawn on a canvas (no text in the page); the row's status is the
    # queue frame's (checked in tests/app), and the case box and the count show it.
    case_box = page.locator(".st-key-review_patient [role='combobox']")
    patient = case_box.input_value().split("·")[0].strip()
    expect(case_box).not_to_have_value(re.compile("reviewed"))
    page.locator(".st-key-review_note textarea").fill("seen")
    page.locator(".st-key-review_note textarea").press("Control+Enter")
    page.locator(".st-key-mark_reviewed button").click()
    settle(page)
    expect(case_box).to_have_value(re.compile(rf"^{patient} · .* · reviewed$"),
                                   timeout=STEP_TIMEOUT)
    expect(metric(page, "Reviewed")).to_have_text("1")
    page.get_by_test_id("stDataFrame").scroll_into_view_if_needed()
    shots(page, "queue-after-marking")
    page.get_by_test_id("stMain").evaluate("e => e.scrollTo(0, 0)")
    shots(page, "queue")


MARKUP_NAMES = {
    "image": f"![x]({OUTSIDE}/feature.png)",
    "link": f'<a href="{OUTSIDE}/a">link</a>',
    "bold": "<b>bold</b><br>x",
}
"""Feature names carrying Markdown and plotly markup."""


def markup_csv(path: Path) -> Path:
    """A cohort whose column names and patient ids are markup, and whose widths vary."""
    rng = np.random.default_rng(5)
    n = 160
    x = rng.normal(size=(3, n))
    outcome = 2 * x[0] + (1 + np.abs(x[1])) * rng.normal(size=n)
    ids = [f"![p{i}]({OUTSIDE}/p{i}.png) :red[alarm] www.example.org" for i in range(n)]
    frame = pd.DataFrame({"patient_id": ids, **{name: x[k] for k, name in
                                                enumerate(MARKUP_NAMES.values())},
                          "outcome": outcome})
    frame.to_csv(path, index=False)
    return path


def no_markup_rendered(page) -> None:
    """No image, link or bold text made from the names, in Markdown or in plotly."""
    assert page.locator(f"img[src*='{OUTSIDE[7:]}']").count() == 0
    links = page.locator(f"a[href*='{OUTSIDE[7:]}'], a[href*='example.org']")
    assert links.count() == 0, [links.nth(i).evaluate(
        "e => e.closest('[data-testid]').getAttribute('data-testid') + ': ' + "
        "e.closest('[data-testid]').outerHTML.slice(0, 300)") for i in range(links.count())]
    assert page.locator(".js-plotly-plot a, .cp-chart a").count() == 0
    assert page.locator(".js-plotly-plot tspan[style*='bold']").count() == 0
    # In the HTML charts the only bold is the hover's own feature name (hidden until hovered).
    assert page.locator(".cp-chart b:not(.cp-tip > b)").count() == 0


def test_names_from_the_data_render_as_plain_text(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    csv = markup_csv(tmp_path / "markup.csv")
    with dashboard_page(tmp_path) as (page, url):
        here = urlsplit(url).netloc
        outside: list[str] = []
        page.on("request", lambda request: outside.append(request.url)
                if urlsplit(request.url).netloc != here
                and not request.url.startswith(("data:", "blob:")) else None)
        upload(page, url, csv)
        expect(page.locator(".st-key-target_column [role='combobox']")).to_have_value(
            "outcome")
        no_markup_rendered(page)
        run(page, "Linear (least squares)", "normalized: Normalized residual")
        no_markup_rendered(page)
        open_page(page, "Patient")
        heading = page.get_by_text(re.compile(r"^Why is patient"))
        expect(heading).to_be_visible(timeout=STEP_TIMEOUT)
        # As written, once the invisible word joiners that break bare links go.
        assert re.fullmatch(
            rf"Why is patient !\[p\d+\]\({re.escape(OUTSIDE)}/p\d+\.png\) "
            r":red\[alarm\] www\.example\.org's interval this wide\?",
            heading.inner_text().replace("\u2060", "")), heading.inner_text()
        bars = page.locator(".st-key-patient_bars .cp-chart")
        for name in MARKUP_NAMES.values():
            # Tick labels show the name as written (escaped, not rendered).
            ticks = bars.locator(".cp-labels div")
            expect(ticks.first).to_be_attached(timeout=STEP_TIMEOUT)
            texts = [ticks.nth(i).text_content() for i in range(ticks.count())]
            # Long names are cut with … on the axis; the hover has them whole.
            assert any(t.startswith(name[:20]) for t in texts), texts
        no_markup_rendered(page)
        shots(page, "markup-patient")
        open_page(page, "Cohort")
        page.wait_for_timeout(800)
        no_markup_rendered(page)
        shots(page, "markup-cohort")
        open_page(page, "Review queue")
        download = page.locator(".st-key-download_case_html")
        expect(download).to_contain_text("Case summary of", timeout=STEP_TIMEOUT)
        assert f"({OUTSIDE}/p" in download.inner_text().replace("\u2060", "")
        no_markup_rendered(page)
        shots(page, "markup-queue")
        assert outside == [], outside

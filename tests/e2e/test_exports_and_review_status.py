"""What the exports and the review status show, in a real browser (issue 35, items 2 and 8).

Item 2: the case summary (from the Patient page and from the Review queue) and the queue's CSV
show the interval as the page does: clipped to the outcome's range kept with the run, marked ✂,
with the page's ✂ note and its plain reading.

Item 8: the Patient page says whether the case was reviewed above the fold (1280x720, no
scrolling) and in its patient box; the Review queue's table cuts no text ("reviewe") and shows
its interval column whole at 1280 px. The table is drawn on a canvas, so its cells are checked
on the canvas's pixels: no text reaches a column's edge (the cell's padding stays blank), and
the interval column's right edge lies inside the table's visible part.

Drives Debian's chromium through Playwright (never `playwright install`). Screenshots go to
$CPDECOMP_SCREENSHOT_DIR (default out/e2e/), outside git.
"""

from __future__ import annotations

import html
import io
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dashboard_driver import (
    RUN_TIMEOUT,
    SCREENSHOTS,
    STEP_TIMEOUT,
    choose,
    launch,
    open_page,
    settle,
    streamlit_server,
)
from test_dashboard_reading import metric, shots, stay_csv, upload

pytestmark = pytest.mark.slow


def download(page, key: str) -> str:
    """The text of the file the download button with widget key `key` gives."""
    button = page.locator(f".st-key-{key} button")
    button.scroll_into_view_if_needed()
    with page.expect_download(timeout=STEP_TIMEOUT) as started:
        button.click()
    return Path(started.value.path()).read_bytes().decode("utf-8-sig")


def page_text(page_html: str) -> str:
    """An HTML page's text, tags dropped and entities read."""
    return html.unescape(re.sub(r"<[^>]+>", " ", page_html))


def squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def grid_problems(page, where: str) -> list[str]:
    """The Review queue table's cut texts and whether its interval column shows whole, read
    off the canvas the table is drawn on."""
    from PIL import Image

    page.mouse.move(1, 1)  # no hover marks on the headers
    page.wait_for_timeout(400)
    canvas = page.get_by_test_id("stDataFrame").locator("[data-testid='data-grid-canvas']")
    headers = [h.strip() for h in canvas.locator("th").all_inner_texts()]
    rows = canvas.locator("tbody tr").count()
    picture = Image.open(io.BytesIO(canvas.screenshot())).convert("L")
    picture.save(SCREENSHOTS / f"queue-grid-{where}.png")
    gray = np.asarray(picture, dtype=float)
    height = min(gray.shape[0], 35 * (rows + 1))  # the header and the rows drawn
    gray = gray[:height]
    # Column edges: thin vertical lines, lighter than text, down the whole table.
    left, right = np.roll(gray, 2, axis=1), np.roll(gray, -2, axis=1)
    line = (np.abs(gray - left) > 3) & (np.abs(gray - right) > 3) & (np.abs(left - right) < 3)
    share = line.mean(axis=0)
    edges = [x for x in range(3, gray.shape[1] - 3)
             if share[x] > 0.8 and share[x] >= share[x - 1] and share[x] > share[x + 1]]
    problems = []
    if "interval" not in headers:
        return [f"{where}: no interval column on show ({headers})"]
    column = headers.index("interval")
    if column >= len(edges):
        problems.append(f"{where}: the interval column is cut at the table's edge "
                        f"({len(edges)} column edges on show, {headers})")
    ink = gray < 170  # text; lines and backgrounds are lighter
    starts = [0, *edges]
    for k, end in enumerate(edges):  # each column whose both edges are on show
        name = headers[k] if k < len(headers) else f"column {k + 1}"
        begin = starts[k]
        near_edges = np.r_[begin + 2:begin + 5, end - 4:end - 1]
        touched = np.flatnonzero(ink[:, near_edges].any(axis=1))
        if touched.size:
            problems.append(f"{where}: text reaches the edge of column {name!r} "
                            f"(rows at y={touched[:3].tolist()})")
    return problems


def test_exports_follow_the_page_and_review_status_shows(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    table = stay_csv(tmp_path / "stay.csv")
    environment = {**os.environ,
                   "CPDECOMP_REVIEW_DB": str(tmp_path / "reviews.sqlite3"),
                   "CPDECOMP_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    with sync_playwright() as playwright, \
            streamlit_server(environment, tmp_path / "server.log") as (url, _):
        browser = launch(playwright)
        try:
            context = browser.new_context(accept_downloads=True,
                                          viewport={"width": 1280, "height": 720})
            page = context.new_page()
            try:
                checks(page, url, table)
            except Exception:
                page.screenshot(path=str(SCREENSHOTS / "failure.png"), full_page=True)
                raise
        finally:
            browser.close()


def checks(page, url: str, table: Path) -> None:
    from playwright.sync_api import expect

    upload(page, url, table)
    expect(page.locator(".st-key-outcome_low_on input[type='checkbox']")).to_be_checked()
    unit = page.locator(".st-key-outcome_unit input")
    unit.fill("days")
    unit.press("Enter")
    settle(page)
    open_page(page, "Setup")
    choose(page, "model", "Linear (least squares)")
    choose(page, "cp_family", "normalized: Normalized residual")
    page.locator(".st-key-run button").click()
    expect(page.get_by_test_id("stSidebar")).to_contain_text(
        re.compile(r"Last run: \w+, normalized,"), timeout=RUN_TIMEOUT)
    settle(page)

    # --- the Patient page's case summary: a clipped patient ---------------------------------
    open_page(page, "Patient")
    clipped = page.get_by_test_id("stMetric").filter(has_text="clipped")
    for _ in range(30):
        if clipped.count():
            break
        page.locator(".st-key-patient_next button").click()
        settle(page)
    interval = clipped.get_by_test_id("stMetricValue").inner_text().strip()
    assert re.fullmatch(r"\[0, [\d.,]+\] ✂", interval), interval
    reading = squeeze(page.locator(".st-key-patient_reading").inner_text())
    note = squeeze(page.get_by_text(re.compile("^✂ The interval is clipped")).inner_text())
    assert "never below 0" in note and "days" in note, note
    summary = squeeze(page_text(download(page, "download_patient_html")))
    assert f"interval {interval}" in summary, summary[:600]
    assert note in summary, (note, summary[:1500])
    assert reading in summary, (reading, summary[:1500])
    assert "what the outcome can be never below 0 (days)" in summary

    # --- the Review queue: every patient flagged, its CSV and a case summary ----------------
    open_page(page, "Review queue")
    slider = page.get_by_test_id("stSlider").get_by_role("slider")
    slider.focus()
    page.keyboard.press("Home")  # percentile 0: every patient but the narrowest is flagged
    settle(page)
    expect(metric(page, "Flagged")).to_have_text(re.compile(r"^\d{2} of 60$"),
                                                 timeout=STEP_TIMEOUT)
    queue = pd.read_csv(io.StringIO(download(page, "download_queue_csv")))
    below = queue[queue["lower"] < 0]
    assert len(below), "no interval reaches below 0: the check would prove nothing"
    assert (queue["shown_lower"] >= 0).all()
    assert (below["shown_lower"] == 0).all() and (below["clipped_to"] == "never below 0").all()
    assert below["interval"].str.match(r"^\[0, [\d.,]+\] ✂$").all(), below["interval"]
    assert not queue.loc[queue["lower"] >= 0, "interval"].str.contains("✂").any()

    # The case box's first case, clipped or not: its summary shows the CSV's interval.
    case_box = page.locator(".st-key-review_patient [role='combobox']")
    patient = case_box.input_value().split("·")[0].strip()
    row = queue[queue["patient_id"].astype(str) == patient].iloc[0]
    summary = squeeze(page_text(download(page, "download_case_html")))
    assert f"interval {row['interval']}" in summary, (row["interval"], summary[:600])
    assert "than for a patient about whom nothing is known" in summary or (
        "about as wide as" in summary)

    # --- item 8: mark the case reviewed; the table cuts nothing -----------------------------
    page.locator(".st-key-reviewer input").fill("Dr. Okafor-Mwangi")
    page.locator(".st-key-reviewer input").press("Enter")
    settle(page)
    page.locator(".st-key-review_note textarea").fill("seen, discharge planned")
    page.locator(".st-key-review_note textarea").press("Control+Enter")
    page.locator(".st-key-mark_reviewed button").click()
    settle(page)
    expect(case_box).to_have_value(re.compile(rf"^{re.escape(patient)} · .* · reviewed$"),
                                   timeout=STEP_TIMEOUT)
    page.get_by_test_id("stMain").evaluate("e => e.scrollTo(0, 0)")
    problems = []
    for width, height in ((1280, 720), (1440, 900)):
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(900)
        page.get_by_test_id("stDataFrame").scroll_into_view_if_needed()
        problems += grid_problems(page, f"{width}x{height}")
    assert problems == [], problems
    page.get_by_test_id("stMain").evaluate("e => e.scrollTo(0, 0)")
    shots(page, "review-status-queue")

    # --- item 8: the Patient page says so, above the fold and in its box --------------------
    page.set_viewport_size({"width": 1280, "height": 720})
    open_page(page, "Patient")
    choose_patient(page, patient)
    box = page.locator(".st-key-patient [role='combobox']")
    expect(box).to_have_value(re.compile(rf"^{re.escape(patient)} · .* · reviewed$"),
                              timeout=STEP_TIMEOUT)
    status = page.locator(".st-key-patient_review_status")
    expect(status).to_contain_text("Reviewed on", timeout=STEP_TIMEOUT)
    expect(status).to_contain_text("by Dr. Okafor-Mwangi: “seen, discharge planned”")
    assert page.get_by_test_id("stMain").evaluate("e => e.scrollTop") == 0
    expect(status).to_be_in_viewport(ratio=1.0)
    shots(page, "review-status-patient")
    # Another patient, not reviewed: said too, and no mark in its box.
    page.locator(".st-key-patient_next button").click()
    settle(page)
    expect(status).to_contain_text("Not reviewed yet", timeout=STEP_TIMEOUT)
    expect(box).not_to_have_value(re.compile("reviewed$"))


def choose_patient(page, patient: str) -> None:
    """Pick the patient in the Patient page's box by typing its id."""
    box = page.locator(".st-key-patient [role='combobox']")
    box.click()
    box.fill(patient)
    page.get_by_role("option", name=re.compile(rf"^{re.escape(patient)} · ")).first.click()
    settle(page)

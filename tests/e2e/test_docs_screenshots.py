"""The documentation's pictures of the dashboard, made in a real browser at 1440x900.

Runs the bundled sample as a clinician would (Data, Setup → Run, then Cohort, Patient and
Review queue) and writes one screenshot of each page into docs/images/, where the clinician's
guide (docs/clinician.md) and the README show them: the pictures are remade on every run, never
drawn by hand, so they show the dashboard as it is (a picture that differs from the committed one
only in a few pixels, a focus ring or the text cursor, is left as it was). The test checks that
each picture is 1440x900, that the page it shows had drawn what the guide describes, and that
every picture in docs/images/ is made here and shown by a page.

Drives Debian's chromium through Playwright (never `playwright install`).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest
from dashboard_driver import ROOT, STEP_TIMEOUT, dashboard_page, open_page, run_sample, settle

IMAGES = ROOT / "docs" / "images"
SIZE = (1440, 900)
PICTURES = ("data", "setup", "cohort", "patient", "patient-reading", "review-queue")
"""The pictures this test makes, one per page, in the order a clinician meets them."""
READING = ("s5 ltg widens it for this patient (+50) but narrows it through the calibration set "
           "(−69): the total shows only −18")
"""The Patient page's reading of the first patient, which docs/clinician.md and the README
quote."""

SCROLL_BELOW_HEADER = """el => {
  // The page scrolls in stMain (or the window, in other Streamlit layouts): whichever moves.
  const main = document.querySelector('[data-testid="stMain"]');
  main.scrollBy(0, el.getBoundingClientRect().top - 90);
  window.scrollBy(0, el.getBoundingClientRect().top - 90);
}"""

pytestmark = pytest.mark.slow


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's header (its IHDR chunk)."""
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    return struct.unpack(">II", header[16:24])


CHANGED = 0.001
"""The share of pixels that must differ for a new picture to replace the one in docs/images/:
the same page shot twice differs in a few dozen pixels (a focus ring, the text cursor), which
would otherwise change every committed picture on every run."""


def changed_pixels(old: bytes, new: bytes) -> float:
    """The share of pixels that differ between two PNGs (1.0 when their sizes differ)."""
    import io

    from PIL import Image, ImageChops

    before, after = (Image.open(io.BytesIO(data)).convert("RGB") for data in (old, new))
    if before.size != after.size:
        return 1.0
    differing = ImageChops.difference(before, after).convert("L").point(lambda v: 255 * (v > 0))
    return differing.histogram()[255] / (after.size[0] * after.size[1])


def shoot(page, name: str) -> None:
    """Shoot the page; write the picture unless the committed one shows the same page."""
    page.wait_for_timeout(500)  # the last chart's layout
    path = IMAGES / f"{name}.png"
    picture = page.screenshot()
    if not path.is_file() or changed_pixels(path.read_bytes(), picture) > CHANGED:
        path.write_bytes(picture)


def test_the_guides_pictures_are_the_dashboard_at_1440x900(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    IMAGES.mkdir(parents=True, exist_ok=True)
    with dashboard_page(tmp_path, *SIZE) as (page, url):
        page.goto(url)
        expect(page.get_by_text("Current data: sample")).to_be_visible(timeout=STEP_TIMEOUT)
        # The preview is a data grid drawn on a canvas after the page: wait for its rows.
        expect(page.get_by_test_id("stDataFrame").first).to_be_visible(timeout=STEP_TIMEOUT)
        settle(page)
        page.wait_for_timeout(1_000)
        shoot(page, "data")

        run_sample(page, url)  # Setup → Run with the defaults
        page.get_by_test_id("stMain").evaluate("main => main.scrollTo(0, 0)")
        shoot(page, "setup")

        open_page(page, "Cohort")
        page.wait_for_function("document.querySelectorAll('.cp-chart').length >= 2",
                               timeout=STEP_TIMEOUT)
        shoot(page, "cohort")

        open_page(page, "Patient")
        expect(page.get_by_text("Why is patient")).to_be_visible(timeout=STEP_TIMEOUT)
        bars = page.locator(".st-key-patient_bars .cp-chart")
        for title in ("Calibration-driven", "Instance-driven", "Total"):
            expect(bars.locator(".cp-head", has_text=title)).to_be_visible(timeout=STEP_TIMEOUT)
        # The guide and the README read this patient's picture in these words and numbers: a
        # change that moves them must update the pages too.
        expect(page.locator(".st-key-patient [role='combobox']")).to_have_value(
            "P0004 · width 365 (percentile 96)")
        expect(page.get_by_test_id("stMain")).to_contain_text(READING)
        shoot(page, "patient")
        # Further down: the reading in words, then the waterfall; the reading's first line
        # clear of Streamlit's header (which overlays the top of the scrolled page).
        page.locator(".st-key-patient_reading").evaluate(SCROLL_BELOW_HEADER)
        expect(page.locator(".st-key-patient_waterfall .cp-chart")).to_be_visible(
            timeout=STEP_TIMEOUT)
        shoot(page, "patient-reading")

        open_page(page, "Review queue")
        expect(page.get_by_text("Mark a case reviewed")).to_be_visible(timeout=STEP_TIMEOUT)
        shoot(page, "review-queue")

    for name in PICTURES:
        assert png_size(IMAGES / f"{name}.png") == SIZE, name
        assert (IMAGES / f"{name}.png").stat().st_size > 20_000, f"{name}.png is nearly empty"
    shown = "\n".join(path.read_text() for path in [ROOT / "README.md",
                                                    *(ROOT / "docs").rglob("*.md")])
    referenced = set(re.findall(r"images/([\w-]+)\.png", shown))
    assert referenced == set(PICTURES), "docs/images/ and the pages' pictures disagree"
    assert {path.stem for path in IMAGES.glob("*.png")} == set(PICTURES), (
        "a picture in docs/images/ that this test does not make")
    assert "docs/images/patient.png" in (ROOT / "README.md").read_text()

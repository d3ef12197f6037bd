"""Clicking through patients keeps every setting (issue 35, item 1), in a real browser.

Next and Previous on the Patient page rerun only its panel; Streamlit then drops the state of
the widgets that panel did not draw. The next full rerun must bring back what the user chose
(α, the family, the outcome's lowest value and unit), not the defaults: with the defaults the
intervals reach below 0 again (the Cohort's clip note goes, and the queue and its export
follow, since they read the same bound).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dashboard_driver import RUN_TIMEOUT, STEP_TIMEOUT, choose, dashboard_page, open_page, settle
from test_dashboard_reading import stay_csv, upload

pytestmark = pytest.mark.slow


def test_next_and_previous_keep_alpha_family_bound_and_unit(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    table = stay_csv(tmp_path / "stay.csv")
    with dashboard_page(tmp_path, 1280, 720) as (page, url):
        upload(page, url, table)
        low_on = page.locator(".st-key-outcome_low_on input[type='checkbox']")
        expect(low_on).to_be_checked()  # a length of stay is never negative
        unit = page.locator(".st-key-outcome_unit input")
        unit.fill("days")
        unit.press("Enter")
        settle(page)

        open_page(page, "Setup")
        choose(page, "model", "Linear (least squares)")
        choose(page, "cp_family", "absolute: Absolute residual")
        alpha = page.locator(".st-key-alpha input")
        alpha.fill("0.20")
        alpha.press("Enter")
        settle(page)
        page.locator(".st-key-run button").click()
        expect(page.get_by_test_id("stSidebar")).to_contain_text(
            re.compile(r"Last run: .*, absolute, α = 0.2,"), timeout=RUN_TIMEOUT)
        settle(page)

        open_page(page, "Patient")
        for button in ("patient_next", "patient_next", "patient_previous"):
            page.locator(f".st-key-{button} button").click()
            settle(page)

        open_page(page, "Setup")
        expect(page.locator(".st-key-alpha input")).to_have_value("0.20", timeout=STEP_TIMEOUT)
        expect(page.locator(".st-key-cp_family [role='combobox']")).to_have_value(
            re.compile("^absolute"))
        open_page(page, "Data")
        expect(page.locator(".st-key-outcome_low_on input[type='checkbox']")).to_be_checked()
        expect(page.locator(".st-key-outcome_unit input")).to_have_value("days")

        # The bound still holds: the Cohort's clip note is there.
        open_page(page, "Cohort")
        expect(page.get_by_text(re.compile("intervals reach values the outcome cannot take"))
               ).to_be_visible(timeout=STEP_TIMEOUT)


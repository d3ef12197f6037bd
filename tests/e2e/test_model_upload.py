"""The dashboard's "Your fitted model" source in a real browser: upload a table and real model
files (XGBoost JSON for f, LightGBM text for sigma), Run, and see the three panels; a pickle
and a model that reads a column the table lacks are refused in an error box, and the data
already loaded stays.

Drives Debian's chromium through Playwright (never `playwright install`). Screenshots of the
Data and Patient pages at 1280x720 and 1440x900 go to $CPDECOMP_SCREENSHOT_DIR (default
out/e2e/model_upload), outside git.
"""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dashboard_driver import (
    ROOT,
    STEP_TIMEOUT,
    launch,
    open_page,
    run_current_data,
    settle,
    streamlit_server,
)

SCREENSHOTS = Path(os.environ.get("CPDECOMP_SCREENSHOT_DIR", ROOT / "out" / "e2e" / "model_upload"))
VIEWPORTS = ((1280, 720), (1440, 900))

pytestmark = pytest.mark.slow


def files(folder: Path) -> dict[str, Path]:
    """A cohort table, the hospital's models fitted on it, and two files to refuse."""
    import lightgbm
    import xgboost

    rng = np.random.default_rng(11)
    n = 160
    x = pd.DataFrame(rng.normal(size=(n, 3)), columns=["age_z", "creatinine_z", "bmi_z"])
    outcome = 2 * x["age_z"] + (1 + np.abs(x["creatinine_z"])) * rng.normal(size=n)
    table = pd.concat([pd.DataFrame({"mrn": [f"M{i:03d}" for i in range(n)]}), x,
                       pd.DataFrame({"length_of_stay": outcome})], axis=1)
    paths = {"table": folder / "ward.csv", "f": folder / "point.json",
             "sigma": folder / "difficulty.txt", "pickle": folder / "point.pkl",
             "other": folder / "other_columns.json"}
    table.to_csv(paths["table"], index=False)
    point = xgboost.XGBRegressor(n_estimators=30, max_depth=3, n_jobs=1).fit(x, outcome)
    point.save_model(paths["f"])
    spread = np.abs(outcome - point.predict(x))
    lightgbm.train({"objective": "regression", "verbose": -1, "num_threads": 1},
                   lightgbm.Dataset(x, spread), num_boost_round=20).save_model(paths["sigma"])
    paths["pickle"].write_bytes(pickle.dumps(point))  # written, never read back
    other = x.rename(columns={"bmi_z": "weight_z"})
    xgboost.XGBRegressor(n_estimators=5, n_jobs=1).fit(other, outcome).save_model(paths["other"])
    return paths


def shoot(page, name: str) -> None:
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(600)
        page.screenshot(path=str(SCREENSHOTS / f"{name}_{width}x{height}.png"))


def test_upload_model_files_run_and_refuse_a_pickle(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    paths = files(tmp_path)
    environment = {**os.environ, "CPDECOMP_REVIEW_DB": str(tmp_path / "reviews.sqlite3"),
                   "CPDECOMP_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "streamlit.log"
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            with streamlit_server(environment, log) as (url, _):
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                page.goto(url)
                expect(page.locator(".st-key-data_source")).to_be_visible(timeout=STEP_TIMEOUT)
                page.locator(".st-key-data_source").get_by_text("Your fitted model").click()
                settle(page)
                page.locator(".st-key-model_table input[type='file']").set_input_files(
                    str(paths["table"]))
                settle(page)
                page.locator(".st-key-model_f input[type='file']").set_input_files(
                    str(paths["f"]))
                settle(page)
                page.locator(".st-key-model_sigma input[type='file']").set_input_files(
                    str(paths["sigma"]))
                current = page.get_by_text(
                    "Current data: ward.csv with point.json, difficulty.txt")
                expect(current).to_be_visible(timeout=STEP_TIMEOUT)
                # the models' columns are the features; the target is the column they do not read
                expect(page.get_by_text("Target 'length_of_stay', 3 features")).to_be_visible(
                    timeout=STEP_TIMEOUT)
                shoot(page, "data_page")

                run_current_data(page)
                expect(page.get_by_text("Results for 40 patients")).to_be_visible()
                # The run is named by the user's models, not the unused built-in choice.
                expect(page.get_by_test_id("stSidebar").get_by_text(
                    "Last run: your models: XGBoost + LightGBM")).to_be_visible()
                expect(page.get_by_text("Results for 40 patients")).to_contain_text(
                    "your models: XGBoost + LightGBM")
                open_page(page, "Patient")
                expect(page.get_by_text("Why is patient")).to_be_visible(timeout=STEP_TIMEOUT)
                bars = page.locator(".st-key-patient_bars .cp-chart")
                for title in ("Calibration-driven", "Instance-driven", "Total"):
                    expect(bars.locator(".cp-head", has_text=title)).to_be_visible(
                        timeout=STEP_TIMEOUT)
                page.wait_for_timeout(800)
                shoot(page, "patient_page")

                # A pickle is refused with the pointer to skops; the loaded data stays.
                open_page(page, "Data")
                page.locator(".st-key-model_f input[type='file']").set_input_files(
                    str(paths["pickle"]))
                settle(page)
                error = page.get_by_test_id("stAlertContentError")
                expect(error).to_contain_text("pickle files are refused", timeout=STEP_TIMEOUT)
                expect(error).to_contain_text("skops")
                expect(current).to_be_visible()
                shoot(page, "pickle_refused")

                # A model reading a column the table lacks is refused by the column's name
                # (the upload boxes start empty on coming back to the page: give the table).
                page.locator(".st-key-model_table input[type='file']").set_input_files(
                    str(paths["table"]))
                settle(page)
                page.locator(".st-key-model_f input[type='file']").set_input_files(
                    str(paths["other"]))
                settle(page)
                expect(error).to_contain_text(re.compile(r"the table lacks 'weight_z'"),
                                              timeout=STEP_TIMEOUT)
                expect(current).to_be_visible()
                page.close()
        finally:
            browser.close()
    for name in ("data_page", "patient_page", "pickle_refused"):
        for width, height in VIEWPORTS:
            assert (SCREENSHOTS / f"{name}_{width}x{height}.png").stat().st_size > 10_000

"""Recalibration page: the run's calibration rows split by a column, or a second calibration
file; its numbers are core's comparison, a bad file is refused in an error box with the earlier
comparison kept, and the reading says what the numbers say."""

from __future__ import annotations

import numpy as np
import pandas as pd
from dashboard_helpers import (
    SAMPLE,
    csv_bytes,
    drawn_figures,
    errors,
    new_app,
    run_linear,
    shown_table,
)
from dashboard_helpers import shown as shown_text

from cpdecomp import prepare_study
from cpdecomp.app import recalibration, runs
from cpdecomp.core.recalibration import compare_calibrations

PAGE = "views/recalibration.py"


def run_study(at):
    config, dataset = at.session_state["last_run"], at.session_state["run_dataset"]
    study = prepare_study(dataset.patients, config.options, train=dataset.train,
                          calibration=dataset.calibration, models=dataset.models)
    return config, study


def site_rows(noise: float = 0.0, rows: int = 150) -> pd.DataFrame:
    table = pd.read_csv(SAMPLE)
    chosen = table.sample(rows, random_state=3).copy()
    chosen["progression"] += np.random.default_rng(4).normal(0, noise, rows) if noise else 0
    return chosen


def test_split_by_a_column_shows_cores_comparison() -> None:
    at = run_linear(new_app())
    at.switch_page(PAGE).run()
    assert errors(at) == []
    assert at.radio(key="recal_mode").value == "split"  # the sample has columns to split by
    assert at.selectbox(key="recal_split_by").value == "sex"
    config, study = run_study(at)
    expected = study.compare(by="sex", by_name=recalibration.SPLIT_NAME, method=config.method,
                             alpha=config.alpha, budget=config.budget,
                             calibration_bootstrap=runs.CALIBRATION_BOOTSTRAP)
    assert expected.names == ("sex 1", "sex 2")
    figures = drawn_figures(at)
    change = figures["recal_change"].data[0]
    cohort = expected.cohort["sex 2"]
    order = recalibration.change_order(expected, "sex 2")
    np.testing.assert_allclose(np.asarray(change.x, dtype=float), cohort.change[order],
                               rtol=1e-12, atol=0)
    whiskers = np.asarray(change.error_x.array, dtype=float)
    np.testing.assert_allclose(whiskers, np.maximum(cohort.high - cohort.change, 0)[order],
                               rtol=1e-12, atol=1e-12)
    # Pale exactly where the change's range holds 0.
    opacity = np.asarray(change.marker.opacity, dtype=float)
    np.testing.assert_array_equal(opacity < 1, cohort.holds_zero[order])
    table = shown_table(at)
    assert list(table["Intervals from"]) == ["sex 1", "sex 1", "sex 2", "sex 2"]
    assert list(table["checked on"]) == ["sex 2", "this run's patients", "sex 1",
                                         "this run's patients"]
    records = expected.coverage
    np.testing.assert_array_equal(table["inside"].to_numpy(), records["covered"].to_numpy())
    reading = shown_text(at.info[0].value)
    assert reading.startswith("Under sex 2, intervals are")
    assert "featureless width" in reading
    patient = figures["recal_patient_calibration"]
    np.testing.assert_allclose(
        sorted(np.asarray(patient.data[1].x, dtype=float)),
        sorted(expected.set("sex 2").decomposition.calibration[0]), rtol=1e-12)


def test_an_uploaded_file_is_compared_and_a_bad_one_refused_keeping_the_earlier() -> None:
    at = run_linear(new_app())
    at.switch_page(PAGE).run()
    at.radio(key="recal_mode").set_value("upload").run()
    assert errors(at) == []
    assert any("Upload the calibration rows" in i.value for i in at.info)
    at.file_uploader(key="recalibration_upload").set_value(
        ("site_b.csv", csv_bytes(site_rows(noise=80)), "text/csv"))
    at.run()
    assert errors(at) == []
    reading = shown_text(at.info[0].value)
    assert reading.startswith("Under site_b, intervals are") and "wider" in reading
    warning = shown_text(at.warning[0].value)
    assert "too narrow" in warning and "recalibrating on site_b was needed" in warning
    assert at.selectbox(key="recal_reference").value == recalibration.OWN
    # A file without one of the model's columns: an error, and the earlier comparison stays.
    at.file_uploader(key="recalibration_upload").set_value(
        ("site_c.csv", csv_bytes(site_rows().drop(columns="bmi")), "text/csv"))
    at.run()
    assert any("calibration set 'site_c' has no feature column 'bmi'" in m for m in errors(at))
    assert shown_text(at.info[-1].value).startswith("Under site_b, intervals are")
    assert any("Showing the earlier comparison" in c.value for c in at.caption)


def test_the_reference_can_be_the_uploaded_set_and_the_upload_survives_a_page_switch() -> None:
    at = run_linear(new_app())
    at.switch_page(PAGE).run()
    at.radio(key="recal_mode").set_value("upload").run()
    at.file_uploader(key="recalibration_upload").set_value(
        ("site_b.csv", csv_bytes(site_rows()), "text/csv"))
    at.run()
    at.selectbox(key="recal_reference").set_value("site_b").run()
    assert errors(at) == []
    assert shown_text(at.info[0].value).startswith(f"Under {recalibration.OWN}, intervals")
    at.switch_page("views/cohort.py").run()
    at.switch_page(PAGE).run()
    assert errors(at) == []
    assert at.radio(key="recal_mode").value == "upload"
    assert any("uploaded earlier" in c.value for c in at.caption)
    assert shown_text(at.info[0].value).startswith(f"Under {recalibration.OWN}, intervals")


def test_the_reading_follows_the_numbers(diabetes_system) -> None:
    """Two identical sets: nothing moved, said so; a noisier set: the featureless width and
    the features' parts add up to the cohort's mean change, and the coverage reads too narrow."""
    system, patients = diabetes_system
    fitted = system.fitted
    rows = (pd.DataFrame(system.calibration_rows, columns=list(fitted.feature_names)),
            system.calibration_targets)
    same = compare_calibrations(fitted, {"A": rows, "B": rows}, patients, background_size=32)
    text = recalibration.reading(same, "B", scale=100.0)
    assert "about as wide" in text
    assert "No feature's calibration-driven part moved beyond" in text
    noisy = (rows[0], rows[1] + np.random.default_rng(0).normal(0, 80, len(rows[1])))
    moved = compare_calibrations(fitted, {"A": rows, "B": noisy}, patients, background_size=32)
    split = recalibration.breakdown(moved, "B")
    mean_change = float(np.mean(moved.set("B").width - moved.set("A").width))
    np.testing.assert_allclose(split.total, mean_change, rtol=1e-9)
    np.testing.assert_allclose(split.featureless + split.calibration + split.instance,
                               split.total, rtol=1e-9)
    text = recalibration.reading(moved, "B", scale=100.0, unit="points")
    assert text.startswith("Under B, intervals are") and "wider" in text
    assert "points" in text
    assert "rescaled with each interval" in text  # width units of the normalized family
    sentence = recalibration.coverage_sentence(moved, "B")
    assert sentence is not None and "too narrow" in sentence


def test_the_sets_panels_and_boxes_draw_one_per_set_with_names_escaped() -> None:
    from cpdecomp.app import charts, html_charts

    part = np.array([1.0, -2.0])
    page = html_charts.chart(charts.set_bars(
        ["age", "bmi"], {"site A": part, "<b>B</b>": -part}, view="calibration",
        units="width", title="t", order=np.array([1, 0])))
    assert page.count('class="cp-head"') == 2
    assert "under &lt;b&gt;B&lt;/b&gt;" in page and "<b>B</b>" not in page
    boxes = html_charts.chart(charts.set_width_boxes(
        {"site A": np.array([1.0, 2.0, 3.0]), "site B": np.array([2.0, 4.0])}, units="width",
        title="widths"))
    assert boxes.count('class="cp-row"') == 2 and "site B" in boxes


def test_a_table_the_user_brings_is_split_by_its_site_column() -> None:
    from dashboard_helpers import small_table

    at = new_app()
    at.radio(key="data_source").set_value("upload").run()
    table = small_table(240).rename(columns={"ward": "site"})
    at.file_uploader(key="upload").set_value(("cohort.csv", csv_bytes(table), "text/csv"))
    at.run()
    at = run_linear(at)
    at.switch_page(PAGE).run()
    assert errors(at) == []
    assert at.radio(key="recal_mode").value == "split"
    assert at.selectbox(key="recal_split_by").value == "site"
    assert at.selectbox(key="recal_reference").value == "site A"
    assert shown_text(at.info[0].value).startswith("Under site B, intervals are")
    # Only columns whose every group has the rows alpha needs are offered.
    assert at.selectbox(key="recal_split_by").options == ["site"]

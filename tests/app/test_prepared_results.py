"""What the run's worker prepares for the result pages (the Cohort page's numbers and charts, the
first patients' figures and tables) is what the pages computed for themselves before.

On the bundled sample, with the calibration bootstrap (so unsettled signs count) and in both
units: each prepared summary against the report read afresh by `summaries`, and each kept
figure against one built anew from the report's own arrays.
"""

from __future__ import annotations

import copy
import gc

import numpy as np
import pandas as pd
import pytest

from cpdecomp import StudyOptions
from cpdecomp.app import cases, charts, html_charts, runs, shown, summaries
from cpdecomp.app.shown import shown_for
from cpdecomp.app.sources import load_sample

OPTIONS = StudyOptions(target="progression", id_column="patient_id", model="linear",
                       family="normalized")
CONFIG = runs.RunConfig("digest-of-the-sample", "diabetes", OPTIONS, "exact", None, 0.1)


@pytest.fixture(scope="module")
def prepared() -> tuple[runs.StudyHandle, object]:
    """One Run as the worker computes it: the record it hands on, and the study's handle."""
    dataset = load_sample("diabetes")
    handed: list = []
    runs.compute(CONFIG, dataset, finished=handed.append)
    handle = runs.fitted_study(CONFIG.digest, CONFIG.options, dataset)
    return handle, handed[0]


def report_in(handle: runs.StudyHandle, units: str):
    return handle.report(CONFIG.method, CONFIG.alpha, units, CONFIG.budget)  # type: ignore[arg-type]


def figure_data(figure) -> list[dict]:
    """A figure's traces and layout as plain JSON values, to compare two builds."""
    import json

    import plotly.io

    return json.loads(plotly.io.to_json(figure, validate=False))


def test_the_worker_hands_on_the_record_the_pages_read(prepared) -> None:
    handle, record = prepared
    report = report_in(handle, "width")
    assert runs.shown_record(CONFIG, report, "width") is record
    assert record.key == (CONFIG, "width")
    # The Cohort page's summary was worked out before the run counted as done.
    assert "cohort" in record.__dict__


@pytest.mark.parametrize("units", ["width", "log"])
def test_the_cohort_summary_is_the_report_read_afresh(prepared, units: str) -> None:
    handle, _ = prepared
    report = report_in(handle, units)
    summary = runs.shown_record(CONFIG, report, units).cohort
    e = report.explanation
    d = e.decomposition
    assert summary.coverage == summaries.coverage(report)
    assert 0 < summary.coverage.n <= len(e.width)
    np.testing.assert_array_equal(summary.widths, summaries.comparable_widths(e.width))
    assert summary.tied == summaries.widths_tied(e.width) is False
    np.testing.assert_allclose(
        summary.wider, np.mean(summaries.comparable_widths(e.width)
                               > e.base_width * (1 + summaries.WIDTH_TIE)), rtol=1e-12)
    order = charts.feature_order(np.abs(d.total).mean(axis=0))
    np.testing.assert_array_equal(summary.order, order)
    pd.testing.assert_frame_equal(summary.disagreement,
                                  summaries.sign_disagreement(report).iloc[order])
    # The calibration-driven vector: one for the cohort on the additive (log) scale; in width
    # units a multiplicative family rescales it per patient and the page shows the mean.
    assert summary.one_vector is (units == "log")
    expected = d.calibration[0] if units == "log" else d.calibration.mean(axis=0)
    np.testing.assert_allclose(summary.vector, expected, rtol=1e-12, atol=0)


def test_the_kept_cohort_charts_are_those_built_from_the_report(prepared) -> None:
    handle, record = prepared
    report = report_in(handle, "width")
    d = report.explanation.decomposition
    figures = cases.cohort_figures(record)
    assert cases.cohort_figures(record) is figures  # kept, not built again
    order = charts.feature_order(np.abs(d.total).mean(axis=0))
    counts = summaries.sign_disagreement(report).iloc[order]
    fresh = charts.sign_disagreement_bars(counts["feature"], counts["calibration_vs_instance"],
                                          counts["total_vs_instance"])
    assert figure_data(figures.disagreement) == figure_data(fresh)
    fresh = charts.instance_distribution(d.features, d.instance, order,
                                         units=record.units_label)
    assert figure_data(figures.instance) == figure_data(fresh)
    fresh = charts.width_histogram(summaries.comparable_widths(report.explanation.width),
                                   base_width=report.explanation.base_width)
    assert figure_data(figures.widths) == figure_data(fresh)
    # Width units, multiplicative family: the cohort's mean vector, without whiskers.
    assert not figures.calibration_whiskers
    bars = figures.calibration.data[0]
    np.testing.assert_allclose(bars.x, d.calibration.mean(axis=0)[order], rtol=1e-12)


def test_prepared_patients_are_the_figures_a_switch_would_build(prepared) -> None:
    _, record = prepared
    cases.prepare(record, patients=3, pace=0.0)
    for position in range(3):
        key = ("bars", record.key, position)
        assert key in cases._kept
        kept = cases.bars_figure(record, position)
        assert kept is cases._kept[key]
        cases._kept.pop(key)
        assert figure_data(cases.bars_figure(record, position)) == figure_data(kept)
        # The HTML the page draws is that figure's.
        assert cases.bars_chart(record, position) == html_charts.chart(kept)
        assert cases.waterfall_chart(record, position) == html_charts.chart(
            cases.waterfall_figure(record, position))
        pd.testing.assert_frame_equal(cases.patient_table(record, position),
                                      cases._patient_table(record, position))


def test_one_record_per_report() -> None:
    dataset = load_sample("diabetes")
    handle = runs.fitted_study(CONFIG.digest, CONFIG.options, dataset)
    report = report_in(handle, "width")
    record = shown_for(report, ("another key", "width"), "progression")
    assert shown_for(report, ("another key", "width"), "progression") is record
    # The same key with another report (recomputed after its study left the cache): its own.
    again = copy.copy(report)
    other = shown_for(again, ("another key", "width"), "progression")
    assert other is not record
    np.testing.assert_array_equal(other.width, record.width)
    # A record goes with its report: a released study is not kept alive through it.
    assert ("another key", "width") in shown._records
    del again
    gc.collect()
    assert ("another key", "width") not in shown._records

"""Cohort page: the subgroup report (counts, coverage with an exact binomial interval, median
width and the two parts' means per group), checked against numbers computed here from core's
report and SciPy's own binomial test."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from dashboard_helpers import (
    drawn_figures,
    errors,
    figure_numbers,
    new_app,
    run_linear,
    shown,
    shown_table,
)
from scipy.stats import binomtest

from cpdecomp import prepare_study
from cpdecomp.app import sources, summaries


def cohort_report(at):
    config = at.session_state["last_run"]
    dataset = sources.load_sample("diabetes")
    study = prepare_study(dataset.patients, config.options, train=dataset.train,
                          calibration=dataset.calibration)
    return study.explain(method=config.method, alpha=config.alpha)


@pytest.mark.parametrize(("successes", "n"), [(0, 7), (7, 7), (25, 28), (1, 2), (90, 111)])
def test_binomial_interval_is_clopper_pearson(successes: int, n: int) -> None:
    expected = binomtest(successes, n).proportion_ci(0.95, method="exact")
    np.testing.assert_allclose(summaries.binomial_interval(successes, n),
                               (expected.low, expected.high), rtol=1e-9, atol=1e-12)


def test_groups_by_category_by_value_and_by_quartile() -> None:
    ward = pd.Series(["b", "a", None, "a"])
    assert list(summaries.subgroup_labels(ward)) == ["b", "a", "(missing)", "a"]
    flag = pd.Series([1.0, 2.0, 2.0, np.nan])
    assert list(summaries.subgroup_labels(flag)) == ["1", "2", "2", "(missing)"]
    values = pd.Series(np.arange(1.0, 21.0))
    labels = summaries.subgroup_labels(values)
    assert labels.nunique() == 4 and labels.value_counts().tolist() == [5, 5, 5, 5]


def test_subgroup_report_on_the_cohort_page() -> None:
    at = run_linear(new_app())
    at.switch_page("views/cohort.py").run()
    assert errors(at) == []
    before = len(at.dataframe)  # nothing until a feature is chosen
    at.selectbox(key="subgroup_feature").set_value("bmi").run()
    assert errors(at) == []
    assert len(at.dataframe) == before + 1
    table = at.dataframe[-1].value
    report = cohort_report(at)
    e, d = report.explanation, report.explanation.decomposition
    bmi = report.feature_values["bmi"].to_numpy(dtype=float)
    edges = np.quantile(bmi, [0, 0.25, 0.5, 0.75, 1])
    assert len(table) == 4 and table["patients"].sum() == len(bmi)
    y = report.targets
    for k, row in enumerate(table.itertuples(index=False)):
        member = (bmi > edges[k]) & (bmi <= edges[k + 1]) if k else (bmi <= edges[1])
        assert row.patients == member.sum()
        inside = (y[member] >= e.lower[member]) & (y[member] <= e.upper[member])
        np.testing.assert_allclose(row[3], round(100 * inside.mean(), 1), atol=1e-9)
        ci = binomtest(int(inside.sum()), int(member.sum())).proportion_ci(0.95, "exact")
        # The 95% range in one column, as the page shows it ("73.5 to 97.9", in %).
        assert row[4] == f"{100 * ci.low:.1f} to {100 * ci.high:.1f}"
        np.testing.assert_allclose(row[5], np.median(e.width[member]), rtol=1e-9)
        np.testing.assert_allclose(row[6], d.calibration[member].sum(axis=1).mean(), rtol=1e-9)
        np.testing.assert_allclose(row[7], d.instance[member].sum(axis=1).mean(), rtol=1e-9)
    captions = " ".join(shown(c.value) for c in at.caption)
    assert "Mondrian" in captions and "does not split into feature parts" in captions

    at.selectbox(key="subgroup_feature").set_value("sex").run()
    table = at.dataframe[-1].value
    assert list(table["group"]) == ["1", "2"]


def test_cohort_calibration_vector_has_the_bootstrap_whiskers_in_log_units() -> None:


    from cpdecomp.app import charts
    from cpdecomp.app.runs import CALIBRATION_BOOTSTRAP

    array = figure_numbers

    at = run_linear(new_app())
    at.switch_page("views/cohort.py").run()
    # In width units a multiplicative family's vector is a mean over patients: no whiskers.
    vector = drawn_figures(at)["cohort_calibration"].data[0]
    assert vector.error_x.array is None
    at.radio(key="units").set_value("log").run()
    assert errors(at) == []
    vector = drawn_figures(at)["cohort_calibration"].data[0]
    config = at.session_state["last_run"]
    dataset = sources.load_sample("diabetes")
    study = prepare_study(dataset.patients, config.options, train=dataset.train,
                          calibration=dataset.calibration)
    d = study.explain(method=config.method, alpha=config.alpha, units="log",
                      calibration_bootstrap=CALIBRATION_BOOTSTRAP).explanation.decomposition
    order = charts.feature_order(np.abs(d.total).mean(axis=0))
    x = array(vector.x)
    np.testing.assert_allclose(x, d.calibration[0][order], rtol=1e-9)
    np.testing.assert_allclose(x - array(vector.error_x.arrayminus), d.calibration_low[0][order],
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(x + array(vector.error_x.array), d.calibration_high[0][order],
                               rtol=1e-9, atol=1e-12)
    unsettled = d.calibration_sign_uncertain[0][order]
    assert [label.endswith(charts.UNSETTLED_MARK) for label in vector.y] == list(unsettled)
    assert any(f"({unsettled.sum()} of {len(unsettled)} features)" in shown(c.value)
               for c in at.caption)


def test_coverage_by_interval_width_on_the_cohort_page() -> None:
    """The Cohort page's coverage by width group is core's (core.coverage) on the run's own
    report, narrowest first; the warning shows exactly when the narrowest group's whole 95%
    range lies below 1 - alpha."""
    from cpdecomp.core.coverage import coverage_by_width, narrowest_undercovered

    at = run_linear(new_app())
    at.switch_page("views/cohort.py").run()
    assert errors(at) == []
    e = cohort_report(at)
    groups = coverage_by_width(e.explanation.width, e.explanation.lower, e.explanation.upper,
                               e.targets)
    assert len(groups) >= 2
    table = shown_table(at, "cohort_width_coverage")
    assert list(table.columns) == ["intervals", "widths", "patients", "coverage %",
                                   "95% range", "reading"]
    assert table["intervals"].iloc[0].startswith("narrowest ")
    assert table["intervals"].iloc[-1].startswith("widest ")
    assert list(table["patients"]) == [g.n for g in groups]
    assert list(table["coverage %"]) == [round(100 * g.coverage) for g in groups]
    narrow = narrowest_undercovered(groups, 0.9)
    warned = [w.value for w in at.warning if "surest about" in w.value]
    assert bool(warned) == (narrow is not None)
    if narrow is not None:
        assert f"{narrow.coverage:.0%} of {narrow.n} patients" in warned[0]
        assert table["reading"].iloc[0] == "too narrow (below 90%)"
    expander = [x for x in at.expander if x.label == "Coverage by interval width"]
    assert len(expander) == 1

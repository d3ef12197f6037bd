"""The Setup page's background check: a Run that redraws the reference sample (background) puts
the background intervals of φ_C and φ_I into `Shown` and onto the Patient page's bars, and a
Run without it leaves the page as it was."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from dashboard_helpers import (
    drawn_figures,
    errors,
    figure_numbers,
    new_app,
    run_linear,
    shown_table,
)

from cpdecomp import prepare_study
from cpdecomp.app import charts, runs, sources, summaries
from cpdecomp.app.shown import shown_report
from cpdecomp.core.errors import CpdecompError

REDRAWS = 8


def core_decomposition(config, background_bootstrap: int):
    """The run's decomposition computed by core on its own, outside the dashboard."""
    dataset = sources.load_sample("diabetes")
    study = prepare_study(dataset.patients, config.options, train=dataset.train,
                          calibration=dataset.calibration)
    return study.explain(method=config.method, alpha=config.alpha, units="width",
                         calibration_bootstrap=runs.CALIBRATION_BOOTSTRAP,
                         background_bootstrap=background_bootstrap).explanation.decomposition


def patient_bars(at):
    at.switch_page("views/patient.py").run()
    assert errors(at) == []
    return drawn_figures(at)["patient_bars"]


def test_a_run_with_the_background_check_shows_the_reference_sample_error() -> None:
    at = run_linear(new_app(), background_check=True, background_redraws=REDRAWS)
    assert errors(at) == []
    config = at.session_state["last_run"]
    assert config.background_bootstrap == REDRAWS
    d = core_decomposition(config, REDRAWS)
    assert d.background_low is not None and d.instance_background_low is not None

    # Shown carries core's numbers.
    handle = runs.fitted_study(config.digest, config.options, at.session_state["run_dataset"])
    report = handle.report(config.method, config.alpha, "width", config.budget,
                           background_bootstrap=REDRAWS)
    shown = shown_report(report, (config, "width"), config.options.target)
    assert shown.background_bootstrap == REDRAWS
    for mine, core in ((shown.background_low, d.background_low),
                       (shown.background_high, d.background_high),
                       (shown.instance_background_low, d.instance_background_low),
                       (shown.instance_background_high, d.instance_background_high)):
        np.testing.assert_allclose(mine, core, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(
        shown.calibration_unsettled,
        d.calibration_sign_uncertain | d.background_sign_uncertain)

    # The Patient page's bars: a green band on the calibration- and instance-driven panels,
    # from core's low to core's high end, in the bars' order.
    figure = patient_bars(at)
    position = int(at.session_state["patient"])
    order = charts.feature_order(d.total[position])
    bands = [t for t in figure.data if t.legendgroup == "background"]
    assert [b.xaxis for b in bands] == ["x", "x2"]
    assert [bool(b.showlegend) for b in bands] == [True, False]
    assert bands[0].name == charts.BACKGROUND_LEGEND
    for band, part, low, high in ((bands[0], d.calibration, d.background_low, d.background_high),
                                  (bands[1], d.instance, d.instance_background_low,
                                   d.instance_background_high)):
        x = figure_numbers(band.x)
        np.testing.assert_allclose(x, part[position][order], rtol=0, atol=1e-12)
        np.testing.assert_allclose(x + figure_numbers(band.error_x.array),
                                   high[position][order], rtol=0, atol=1e-12)
        np.testing.assert_allclose(x - figure_numbers(band.error_x.arrayminus),
                                   low[position][order], rtol=0, atol=1e-12)
        assert band.error_x.color == charts.BACKGROUND_BAND
    # The hover of each calibration- and instance-driven bar says it in words.
    bars = [t for t in figure.data if t.type == "bar"]
    for bar in bars[:2]:
        assert all("reference-sample error: ±" in text for text in bar.customdata)
    assert not any("reference-sample" in text for text in bars[2].customdata)
    # A part whose band holds 0 is pale, and a calibration-driven one marks its feature ?.
    instance_unsettled = ((d.instance_background_low <= 0)
                          & (d.instance_background_high >= 0))[position][order]
    opacity = np.asarray(bars[1].marker.opacity, dtype=float)
    np.testing.assert_array_equal(opacity < 1, instance_unsettled)
    marked = [label.endswith(charts.UNSETTLED_MARK) for label in bars[0].y]
    np.testing.assert_array_equal(marked, shown.calibration_unsettled[position][order])
    # The table lists the ranges' ends.
    table = shown_table(at)
    for column in ("calibration ref. low", "instance ref. high", "instance direction"):
        assert column in table.columns
    assert any("Green band" in c.value for c in at.caption)


def test_a_run_without_the_background_check_draws_the_bars_as_before() -> None:
    at = run_linear(new_app())
    assert errors(at) == []
    config = at.session_state["last_run"]
    assert config.background_bootstrap == 0
    figure = patient_bars(at)
    assert [t.type for t in figure.data] == ["bar", "bar", "bar"]
    assert [t.name for t in figure.data] == [charts.TITLES[v] for v in charts.VIEWS]
    assert not any("reference-sample" in text for t in figure.data for text in t.customdata)
    # The ? marks are the calibration set's alone, as core says.
    d = core_decomposition(config, 0)
    position = int(at.session_state["patient"])
    order = charts.feature_order(d.total[position])
    marked = [label.endswith(charts.UNSETTLED_MARK) for label in figure.data[0].y]
    np.testing.assert_array_equal(marked, d.calibration_sign_uncertain[position][order])
    assert "instance direction" not in shown_table(at).columns
    assert not any("Green band" in c.value for c in at.caption)


def test_the_setup_page_says_what_the_check_costs() -> None:
    at = new_app()
    at.switch_page("views/setup.py").run()
    assert any(c.value.startswith("Off. With 20 redraws") for c in at.caption)
    at.checkbox(key="background_check").check().run()
    assert any("20 redraws: about" in c.value for c in at.caption)
    assert at.number_input(key="background_redraws").value == runs.BACKGROUND_BOOTSTRAP


def test_redraws_count_in_the_run_budget() -> None:
    plain = runs.RunSize(n_features=10, n_train=100, n_explained=100, background=64,
                         coalitions=1024, brute_force_seconds=0.0, n_calibration=50)
    assert plain.cells == 1024 * 100
    redrawn = replace(plain, background_redraws=20, redraw_seconds=2.0)
    assert redrawn.cells == 1024 * (100 + 50 * 20)
    assert redrawn.redraws_seconds == 40.0
    runs.check_run_budget(redrawn)
    with pytest.raises(CpdecompError, match="limit"):
        runs.check_run_budget(replace(plain, background_redraws=20,
                                      redraw_seconds=runs.MAX_RUN_SECONDS / 10))
    with pytest.raises(CpdecompError, match="redraws"):
        runs.check_run_budget(replace(plain,
                                      background_redraws=runs.MAX_BACKGROUND_BOOTSTRAP + 1))


def test_a_background_band_holding_zero_unsettles_the_sign_like_the_calibration_one() -> None:
    d = core_decomposition(runs.RunConfig(
        "d", "diabetes", _options(), "exact", None, 0.1), 0)
    report_d = replace(d, calibration_low=None, calibration_high=None)
    assert summaries.calibration_unsettled(report_d) is None
    low, high = d.calibration.copy(), d.calibration.copy()
    low[:, 0], high[:, 0] = -1.0, 1.0
    redrawn = replace(report_d, background_low=low, background_high=high)
    unsettled = summaries.calibration_unsettled(redrawn)
    assert unsettled is not None
    assert unsettled[:, 0].all() and not unsettled[:, 1:].any()


def _options():
    from cpdecomp import StudyOptions

    return StudyOptions(target="progression", id_column="patient_id", model="linear",
                        background=16)


def test_the_cohort_vector_and_the_case_summary_carry_the_reference_sample_error() -> None:
    from cpdecomp.app import cases
    from cpdecomp.app.state import Results

    at = run_linear(new_app(), background_check=True, background_redraws=REDRAWS)
    config = at.session_state["last_run"]
    at.switch_page("views/cohort.py").run()
    at.radio(key="units").set_value("log").run()  # the single calibration-driven vector
    assert errors(at) == []
    vector = drawn_figures(at)["cohort_calibration"]
    dataset = sources.load_sample("diabetes")
    study = prepare_study(dataset.patients, config.options, train=dataset.train,
                          calibration=dataset.calibration)
    report = study.explain(method=config.method, alpha=config.alpha, units="log",
                           calibration_bootstrap=runs.CALIBRATION_BOOTSTRAP,
                           background_bootstrap=REDRAWS)
    d = report.explanation.decomposition
    order = charts.feature_order(np.abs(d.total).mean(axis=0))
    (band,) = [t for t in vector.data if t.legendgroup == "background"]
    x = figure_numbers(band.x)
    np.testing.assert_allclose(x, d.calibration[0][order], rtol=0, atol=1e-12)
    np.testing.assert_allclose(x - figure_numbers(band.error_x.arrayminus),
                               d.background_low[0][order], rtol=0, atol=1e-12)
    np.testing.assert_allclose(x + figure_numbers(band.error_x.array),
                               d.background_high[0][order], rtol=0, atol=1e-12)
    assert any("Green band" in c.value for c in at.caption)

    # The HTML case summary: the note and the ranges' ends in its table.
    results = Results(config, study, study.explain(
        method=config.method, alpha=config.alpha, units="width",
        calibration_bootstrap=runs.CALIBRATION_BOOTSTRAP, background_bootstrap=REDRAWS),
        "width")
    html = cases.case_html(results.shown, 0, {"units": results.shown.units_label}, [])
    assert "Green band on the calibration-driven and instance-driven bars" in html
    assert "instance-driven, reference-sample low" in html
    assert "calibration-driven, reference-sample high" in html


def test_what_if_keeps_the_reference_sample_error() -> None:
    at = run_linear(new_app(), background_check=True, background_redraws=REDRAWS)
    at.switch_page("views/patient.py").run()
    at.toggle(key="whatif_on").set_value(True).run()
    assert errors(at) == []
    edited = drawn_figures(at)["whatif_chart"]
    assert [t.legendgroup for t in edited.data if t.legendgroup] == ["background"] * 2


def test_an_unsettled_instance_driven_part_is_not_counted_as_opposing() -> None:
    from dashboard_helpers import SAMPLE

    from cpdecomp import load_table

    study = prepare_study(load_table(SAMPLE), _options())
    report = study.explain(method="exact", alpha=0.1)
    d = report.explanation.decomposition
    plain = summaries.sign_disagreement(report)
    opposed = int(np.argmax(plain["calibration_vs_instance"].to_numpy()))
    assert plain["calibration_vs_instance"].iloc[opposed] > 0
    low, high = d.instance.copy(), d.instance.copy()
    low[:, opposed], high[:, opposed] = -1.0, 1.0  # φ_I's band holds 0 for everyone
    banded = replace(report, explanation=replace(report.explanation, decomposition=replace(
        d, instance_background_low=low, instance_background_high=high)))
    counted = summaries.sign_disagreement(banded)
    expected = plain["calibration_vs_instance"].to_numpy().copy()
    expected[opposed] = 0.0
    np.testing.assert_allclose(counted["calibration_vs_instance"], expected, atol=0)
    assert counted["total_vs_instance"].iloc[opposed] == 0.0
    shown = shown_report(banded, "k", "progression")
    assert not shown.disagree[:, opposed].any()

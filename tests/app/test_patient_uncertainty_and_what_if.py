"""Patient page: the calibration-driven parts' intervals (whiskers, ? where the sign is not
settled, a reading that does not state such a sign), the standard-SHAP panel, and what-if.

Expected numbers come from core, recomputed here from the run's own options: the bootstrap
interval from `Study.explain(calibration_bootstrap=...)`, the comparator from
`fixed_quantile=True`, and an edited patient's interval from the conformal system's own
`predict_interval` (not the explanation path the page uses).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from dashboard_helpers import (
    drawn_figures,
    errors,
    figure_numbers,
    new_app,
    run_linear,
    shown,
    shown_table,
)

from cpdecomp import prepare_study
from cpdecomp.app import charts, sources
from cpdecomp.app.reading import patient_reading
from cpdecomp.app.reviews import ReviewStore
from cpdecomp.app.runs import CALIBRATION_BOOTSTRAP
from cpdecomp.app.text import people_number


def patient_page():
    at = run_linear(new_app())
    return at.switch_page("views/patient.py").run()


def independent_report(at):
    """The run's study, fitted again from its options, explained by core directly."""
    config = at.session_state["last_run"]
    dataset = sources.load_sample("diabetes")
    study = prepare_study(dataset.patients, config.options, train=dataset.train,
                          calibration=dataset.calibration)
    return study, study.explain(method=config.method, alpha=config.alpha,
                                calibration_bootstrap=CALIBRATION_BOOTSTRAP,
                                fixed_quantile=True)


def figures(at) -> list[go.Figure]:
    """The Patient page's charts in page order (all HTML charts)."""
    return list(drawn_figures(at).values())


array = figure_numbers


def test_whiskers_and_unsettled_marks_follow_the_bootstrap() -> None:
    at = patient_page()
    assert errors(at) == []
    _, report = independent_report(at)
    d = report.explanation.decomposition
    assert d.calibration_low is not None and d.calibration_high is not None
    unsettled = d.calibration_sign_uncertain[0]
    assert 0 < unsettled.sum() < len(d.features)  # the sample has both kinds: a real check

    bars = figures(at)[0]
    calibration = bars.data[0]
    order = charts.feature_order(d.total[0])
    np.testing.assert_allclose(array(calibration.x), d.calibration[0][order], rtol=1e-9)
    np.testing.assert_allclose(array(calibration.x) - array(calibration.error_x.arrayminus),
                               d.calibration_low[0][order], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(array(calibration.x) + array(calibration.error_x.array),
                               d.calibration_high[0][order], rtol=1e-9, atol=1e-9)
    marked = [label.endswith(charts.UNSETTLED_MARK) for label in calibration.y]
    assert marked == list(unsettled[order])
    pale = [o < 1 for o in calibration.marker.opacity]
    assert pale == list(unsettled[order])
    assert bars.data[1].error_x.array is None  # whiskers on the calibration-driven part only

    caption = next(shown(c.value) for c in at.caption if "whiskers" in c.value)
    assert f"({unsettled.sum()} of {len(d.features)} features here)" in caption
    table = shown_table(at)
    assert (table["direction"] == "not settled").sum() == unsettled.sum()
    details = next(e for e in at.expander if "analysts" in e.label)
    assert "200 bootstrap resamples" in shown(details.markdown[0].value)


def test_the_reading_does_not_state_an_unsettled_calibration_sign() -> None:
    features = ["bmi", "age", "bp"]
    calibration = np.array([1.5, 0.02, 0.0])
    instance = np.array([-4.0, 3.0, 0.5])
    total = calibration + instance
    settled = patient_reading(features, calibration, instance, total, 20.0, 20.0 + total.sum())
    assert "widens it through the calibration set (+1.5)" in settled
    unsure = patient_reading(features, calibration, instance, total, 20.0, 20.0 + total.sum(),
                             calibration_unsettled=np.array([True, False, False]))
    assert "through the calibration set" not in unsure
    assert "Whether the calibration set makes bmi widen or narrow the interval is not settled" \
        in unsure
    # A part too small to matter is not listed (age's 0.02 is under the cut).
    quiet = patient_reading(features, calibration, instance, total, 20.0, 20.0 + total.sum(),
                            calibration_unsettled=np.array([False, True, False]))
    assert "not settled" not in quiet


def test_standard_shap_panel_is_off_by_default_and_shows_the_fixed_quantile_view() -> None:
    at = patient_page()
    assert len(figures(at)) == 2
    assert at.toggle(key="fixed_q_on").value is False
    at.toggle(key="fixed_q_on").set_value(True).run()
    assert errors(at) == []
    charts_shown = figures(at)
    assert len(charts_shown) == 3
    _, report = independent_report(at)
    d = report.explanation.decomposition
    order = charts.feature_order(d.total[0])
    panel = charts_shown[2]
    assert panel.layout.title.text.startswith("What a standard SHAP of the interval")
    np.testing.assert_allclose(array(panel.data[0].x), d.fixed_quantile[0][order], rtol=1e-9)
    assert any("has no calibration-driven part" in c.value for c in at.caption)


def what_if_page():
    at = patient_page()
    at.toggle(key="whatif_on").set_value(True).run()
    assert errors(at) == []
    return at


def box(at, feature: str):
    labels = [t.label for t in at.text_input]
    return at.text_input[labels.index(feature)]


def edited_metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label.startswith(label))


def test_what_if_follows_the_edit_and_resets() -> None:
    at = what_if_page()
    study, report = independent_report(at)
    original = report.feature_values.iloc[[0]].copy()
    assert box(at, "bmi").value == f"{original['bmi'].iloc[0]:g}"
    scale = report.explanation.base_width  # the one rounding rule: the featureless width's
    assert edited_metric(at, "Edited width") == people_number(report.explanation.width[0], scale)

    box(at, "bmi").input("35").run()
    assert errors(at) == []
    edited = original.copy()
    edited["bmi"] = 35.0
    lower, upper = study.system.predict_interval(edited, report.explanation.alpha)
    assert edited_metric(at, "Edited interval") == (f"[{people_number(lower[0], scale)}, "
                                                    f"{people_number(upper[0], scale)}]")
    assert edited_metric(at, "Edited width") == people_number(upper[0] - lower[0], scale)
    assert any("**Changed:** bmi" in m.value for m in at.markdown)
    bars = figures(at)[-1]
    # The three panels of the edited patient: total = calibration + instance, adding up to the
    # width's change from the featureless width.
    parts = [array(bars.data[k].x) for k in range(3)]
    np.testing.assert_allclose(parts[0] + parts[1], parts[2], atol=1e-9)
    np.testing.assert_allclose(parts[2].sum(), (upper[0] - lower[0])
                               - report.explanation.base_width, rtol=1e-9)

    at.button(key="whatif_reset").click().run()
    assert box(at, "bmi").value == f"{original['bmi'].iloc[0]:g}"
    scale = report.explanation.base_width  # the one rounding rule: the featureless width's
    assert edited_metric(at, "Edited width") == people_number(report.explanation.width[0], scale)
    assert any("**Changed:** nothing yet" in m.value for m in at.markdown)


def test_what_if_bad_and_out_of_range_values_keep_the_state(review_db) -> None:
    at = what_if_page()
    box(at, "bmi").input("31").run()
    width_before = edited_metric(at, "Edited width")
    box(at, "age").input("old").run()
    assert any("Not a number: age" in shown(e.value) for e in at.error)
    assert not at.exception
    assert box(at, "age").value == "old"  # what was typed stays, to be corrected
    assert edited_metric(at, "Edited width") == width_before  # the last good result stays
    assert "old" not in " ".join(shown(e.value) for e in at.error)  # never quotes the cell

    box(at, "age").input("500").run()
    assert [shown(e.value) for e in at.error] == []
    warning = " ".join(shown(w.value) for w in at.warning)
    assert "Outside the training range: age" in warning
    assert edited_metric(at, "Edited width") != width_before
    # Nothing about the edited patient reached the review store.
    store = ReviewStore(str(review_db))
    assert store.history(at.session_state["last_run"].dataset_key, "P0004") == []


def test_what_if_starts_again_from_another_patient() -> None:
    at = what_if_page()
    box(at, "bmi").input("40").run()
    at.selectbox(key="patient").set_value(3).run()
    assert errors(at) == []
    _, report = independent_report(at)
    assert box(at, "bmi").value == f"{report.feature_values['bmi'].iloc[3]:g}"
    assert edited_metric(at, "Edited width") == people_number(report.explanation.width[3],
                                                              report.explanation.base_width)


def test_the_case_summary_carries_the_intervals_and_the_mark() -> None:
    from cpdecomp.app import cases
    from cpdecomp.app.state import Results

    at = patient_page()
    study, report = independent_report(at)
    results = Results(at.session_state["last_run"], study, report, "width")
    html = cases.case_html(results.shown, 0, {"units": results.shown.units_label}, [])
    assert "resampled calibration sets" in html
    assert "calibration-driven, low end" in html and "not settled" in html


def test_what_if_in_log_units_rescales_the_edited_parts() -> None:
    at = what_if_page()
    box(at, "bmi").input("35").run()
    width_units = [array(t.x) for t in figures(at)[-1].data[:3]]
    at.radio(key="units").set_value("log").run()
    assert errors(at) == []
    assert box(at, "bmi").value == "35"  # the edit survives the units switch
    log_units = [array(t.x) for t in figures(at)[-1].data[:3]]
    # One positive factor per patient turns log units into width units (core's in_units):
    # the same signs, and the same ratio for every part of the edited patient.
    ratios = np.concatenate(width_units) / np.concatenate(log_units)
    nonzero = np.abs(np.concatenate(log_units)) > 1e-12
    np.testing.assert_allclose(ratios[nonzero], ratios[nonzero][0], rtol=1e-9)
    assert ratios[nonzero][0] > 0


def test_what_if_with_a_category_and_the_absolute_family() -> None:
    from dashboard_helpers import csv_bytes, small_table

    at = new_app()
    at.radio(key="data_source").set_value("upload").run()
    at.file_uploader(key="upload").set_value(("cohort.csv", csv_bytes(small_table()), "text/csv"))
    at.run()
    at = run_linear(at, cp_family="absolute")
    at.switch_page("views/patient.py").run()
    at.toggle(key="whatif_on").set_value(True).run()
    assert errors(at) == []
    ward = next(s for s in at.selectbox if s.label == "ward")
    assert ward.options == ["(missing)", "A", "B"]
    before = edited_metric(at, "Edited prediction")
    ward.set_value("B" if ward.value == "A" else "A").run()
    assert errors(at) == []
    assert any("**Changed:** ward" in m.value for m in at.markdown)
    # Absolute: the width is the calibration set's alone, so an edit moves the prediction only.
    width = next(m.value for m in at.metric if m.label == "Width")
    assert edited_metric(at, "Edited width") == width
    assert edited_metric(at, "Edited prediction") != before  # the linear model uses ward
    bars = figures(at)[-1]
    np.testing.assert_allclose(array(bars.data[1].x), 0.0, atol=1e-12)  # no instance part

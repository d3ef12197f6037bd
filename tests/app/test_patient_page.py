"""Patient page: interval, side-by-side bars, waterfall, values; switching is an index."""

from __future__ import annotations

import time

import numpy as np
from dashboard_helpers import (
    drawn_charts,
    drawn_figures,
    errors,
    new_app,
    run_linear,
    shown_table,
)

from cpdecomp.app import cases, html_charts


def patient_page():
    at = run_linear(new_app())
    return at.switch_page("views/patient.py").run()


def heading(at) -> str:
    return next(s.value for s in at.subheader if s.value.startswith("Why is patient"))


def test_patient_views() -> None:
    at = patient_page()
    assert errors(at) == []
    # side-by-side bars and waterfall, each in its slot, as HTML with no script; their style
    # sheet once (outside the panel a switch reruns)
    assert list(drawn_figures(at)) == ["patient_bars", "patient_waterfall"]
    assert not any("<script" in page for page in drawn_charts(at).values())
    assert [h.proto.body for h in at.get("html") if h.proto.body.startswith("<style>")] \
        == [f"<style>{html_charts.CSS}</style>"]
    assert heading(at) == "Why is patient P0004's interval this wide?"
    labels = [m.label for m in at.metric]
    assert labels[:3] == ["Prediction", "Interval (90%)", "Width"]
    table = shown_table(at)
    assert list(table.columns) == ["feature", "value", "calibration", "instance", "total",
                                   "calibration low", "calibration high", "direction", "⇄"]
    assert len(table) == 10
    # The full words of each short header, when pointed at.
    assert table.attrs["help"]["calibration"] == "The calibration-driven part."
    assert "another calibration set" in table.attrs["help"]["calibration low"]
    # The rows in the bars' order, numbers at the page's rounding: the totals add up to the
    # width's change from the featureless width (to that rounding).
    assert table["total"].abs().is_monotonic_decreasing
    decimals = len(table.attrs["text"]["total"][0].partition(".")[2])
    np.testing.assert_allclose(table["calibration"] + table["instance"], table["total"],
                               atol=1.01 * 10.0 ** -decimals)


def test_switching_patient_is_instant_and_changes_the_view() -> None:
    at = patient_page()
    before = drawn_charts(at)
    start = time.perf_counter()
    at.selectbox(key="patient").set_value(5).run()
    elapsed = time.perf_counter() - start
    assert errors(at) == []
    assert heading(at) != "Why is patient P0004's interval this wide?"
    # The charts are patient 5's: the figures the page keeps for that patient, drawn.
    assert drawn_charts(at)["patient_bars"] != before["patient_bars"]
    for kind, key in (("bars", "patient_bars"), ("waterfall", "patient_waterfall")):
        assert any(figure is drawn_figures(at)[key] for (built, _, position), figure
                   in cases._kept.items() if built == kind and position == 5)
    assert elapsed < 5  # no recomputation: generous for a loaded CI machine


def test_previous_and_next_wrap_around() -> None:
    at = patient_page()
    at.button(key="patient_previous").click().run()
    assert at.selectbox(key="patient").value == 110
    at.button(key="patient_next").click().run()
    assert at.selectbox(key="patient").value == 0


def test_log_units_toggle() -> None:
    at = patient_page()
    at.radio(key="units").set_value("log").run()
    assert errors(at) == []
    assert list(drawn_figures(at)) == ["patient_bars", "patient_waterfall"]


def test_the_reading_and_comparing_two_patients() -> None:
    at = patient_page()
    paragraph = [m.value for m in at.markdown
                 if "than for a patient about whom nothing is known" in m.value
                 or "about as wide as" in m.value]
    assert paragraph and "e-0" not in paragraph[0]
    at.toggle(key="compare_on").set_value(True).run()
    at.selectbox(key="compare_patient").set_value(7).run()
    assert errors(at) == []
    assert list(drawn_figures(at)) == ["patient_bars", "patient_waterfall", "compare_this",
                                         "compare_other"]  # and both patients' panels
    assert at.selectbox(key="compare_patient").value == 7


def test_the_width_arrow_follows_the_sign_of_the_change() -> None:
    """A narrower interval than the featureless one points down in green, a wider one up in
    red: the numbers carry a true minus sign, which Streamlit does not read as negative."""
    from streamlit.proto.Metric_pb2 import Metric

    at = patient_page()
    seen = set()
    for position in range(12):
        at.selectbox(key="patient").set_value(position).run()
        width = next(m for m in at.metric if m.label == "Width")
        change = width.proto.delta.split(" vs ")[0]
        expected = ((Metric.MetricDirection.DOWN, Metric.MetricColor.GREEN)
                    if change.startswith("−") else
                    (Metric.MetricDirection.UP, Metric.MetricColor.RED)
                    if change.startswith("+") else
                    (Metric.MetricDirection.NONE, Metric.MetricColor.GRAY))
        assert (width.proto.direction, width.proto.color) == expected, change
        seen.add(expected[0])
    assert {Metric.MetricDirection.DOWN, Metric.MetricDirection.UP} <= seen  # both were shown

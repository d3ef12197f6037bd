"""The mounted chart (app/chart_component.py) in Streamlit's AppTest: a patient switch sends the
same element (so the browser keeps the chart and redraws it in place) with the new figure, and
the figure sent is the one built, with the app's modebar config and plotly's own plotly.js.
The drawing itself is checked in a real browser (tests/e2e/test_chart_mounted.py)."""

from __future__ import annotations

import json

import numpy as np
import plotly.io as pio
import pytest
from dashboard_helpers import errors, figure_numbers, mounted_figures, new_app, run_linear

from app import chart_component, widgets


def patient_page():
    at = run_linear(new_app())
    return at.switch_page("views/patient.py").run()


def charts_by_key(at) -> dict:
    return {chart.key: chart.proto for chart in at.get("bidi_component")}


def test_a_switch_keeps_each_chart_element_and_sends_the_new_figure() -> None:
    at = patient_page()
    before = charts_by_key(at)
    figures_before = mounted_figures(at)
    at.button(key="patient_next").click().run()
    assert errors(at) == []
    after = charts_by_key(at)
    figures_after = mounted_figures(at)
    assert list(after) == ["patient_bars", "patient_waterfall"]
    for key in after:
        # One element identity per slot, whatever the figure: the browser keeps the element.
        assert after[key].id == before[key].id, key
        # A different patient's figure in it.
        assert figures_after[key].to_json() != figures_before[key].to_json(), key


def test_the_figure_is_sent_whole_with_the_apps_config() -> None:
    at = patient_page()
    payload = json.loads(charts_by_key(at)["patient_bars"].json)
    assert payload["config"] == widgets.CHART_CONFIG
    assert payload["script"].endswith(f"/{chart_component.PLOTLY_SCRIPT}")
    assert (chart_component.PLOTLY_FOLDER / chart_component.PLOTLY_SCRIPT).is_file()
    sent = pio.from_json(payload["figure"])
    # The bars' numbers against core are checked in test_patient_uncertainty_and_what_if.py,
    # through this same payload; here, that it is the three-panel figure, whole.
    assert [t.name for t in sent.data][:3] == [
        "Calibration-driven", "Instance-driven", "Total (= calibration + instance)"]
    calibration, instance, total = (figure_numbers(t.x) for t in sent.data[:3])
    np.testing.assert_allclose(calibration + instance, total, rtol=1e-9, atol=1e-9)
    assert sent.data[0].y == sent.data[2].y  # one feature order in the three panels
    assert all(trace.hovertemplate for trace in sent.data[:3])
    assert sent.layout.height is not None  # the chart keeps the figure's height


def test_a_mounted_chart_needs_a_key() -> None:
    import plotly.graph_objects as go

    with pytest.raises(ValueError, match="needs a key"):
        widgets.chart(go.Figure(), mounted=True)

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


def payloads(at) -> dict[str, dict]:
    return {key: json.loads(proto.json) for key, proto in charts_by_key(at).items()}


def test_each_patient_chart_carries_the_figure_a_click_would_show_next() -> None:
    at = patient_page()
    first = payloads(at)
    first_at = [h.value for h in at.subheader]
    at.button(key="patient_next").click().run()
    after_next = payloads(at)
    next_at = [h.value for h in at.subheader]
    at.button(key="patient_next").click().run()
    after_two = payloads(at)
    at.button(key="patient_previous").click().run()
    after_previous = payloads(at)
    assert errors(at) == []
    for key in ("patient_bars", "patient_waterfall"):
        # What Next would show is sent ahead, byte for byte what Next then sends: the browser
        # shows the plot it drew ahead only when the texts are equal.
        assert first[key]["upcoming"] == after_next[key]["figure"], key
        assert after_next[key]["upcoming"] == after_two[key]["figure"], key
        assert after_next[key]["upcoming"] != after_next[key]["figure"], key
        # After Previous, what another Previous would show: the first patient.
        assert after_previous[key]["figure"] == after_next[key]["figure"], key
        assert after_previous[key]["upcoming"] == first[key]["figure"], key
    # The cue to show the figure drawn ahead: the heading the page draws with it.
    headings = [subheading(page) for page in (first_at, next_at)]
    assert first["patient_bars"]["cue"] == {"selector": "h3", "text": headings[1]}
    assert first["patient_waterfall"]["cue"] == first["patient_bars"]["cue"]
    assert after_next["patient_bars"]["cue"]["text"] not in headings


def test_the_figure_text_is_made_once_per_figure_and_forgotten_with_it() -> None:
    import gc

    import plotly.graph_objects as go

    figure = go.Figure(go.Bar(x=[1.0, 2.0], y=["a", "b"]))
    text = chart_component.figure_json(figure)
    assert chart_component.figure_json(figure) is text  # not made again
    assert pio.from_json(text).data[0].y == ("a", "b")
    address = id(figure)
    del figure
    gc.collect()
    assert address not in chart_component._json_made


def subheading(values: list[str]) -> str:
    """The patient panel's heading among a page's subheadings, as the browser shows it (the
    patient labels here hold no characters that Markdown would change)."""
    return next(value for value in values if value.startswith("Why is patient"))


def test_only_a_mounted_chart_draws_ahead() -> None:
    import plotly.graph_objects as go

    with pytest.raises(ValueError, match="only a mounted chart"):
        widgets.chart(go.Figure(), key="x", upcoming=go.Figure())
    with pytest.raises(ValueError, match="cues an upcoming figure"):
        chart_component.mounted_chart(go.Figure(), {}, "x", upcoming_heading="Why")


def test_a_mounted_chart_needs_a_key() -> None:
    import plotly.graph_objects as go

    with pytest.raises(ValueError, match="needs a key"):
        widgets.chart(go.Figure(), mounted=True)

"""Pieces several pages draw: the results gate, the units toggle and the chart call."""

from __future__ import annotations

from typing import Literal, TypedDict

import plotly.graph_objects as go
import streamlit as st

from cpdecomp.app import charts, html_charts, state, summaries
from cpdecomp.app.text import MINUS

UNIT_LABELS = {"width": "width units", "log": "log units"}
CHART_CONFIG = {"displaylogo": False}


def require_results(offer_units: bool = True) -> state.Results:
    """The last run's results, or a pointer to Setup and a stop.

    Without offer_units the results are in width units (signs and rankings within a patient
    are the same in both units: one positive factor per patient separates them).
    """
    run = st.session_state.get("last_run")
    if run is None:
        st.info("No results yet: choose data, then press **Run** on the Setup page.")
        st.page_link("views/setup.py", label="Go to Setup", icon=":material/tune:")
        st.stop()
    if offer_units:
        with st.sidebar:  # beside the navigation: the page keeps its height for the charts
            units_toggle(run)
    units = state.current_units(run) if offer_units else "width"
    with st.spinner(f"Explaining every patient in {UNIT_LABELS[units]}…"):
        results = state.results(units)
    if results is None:
        st.stop()
    return results


def units_toggle(run: state.RunConfig) -> None:
    """Width or log units, offered only where the family is multiplicative."""
    if run.log_family:
        st.radio("Units", list(UNIT_LABELS), key="units", horizontal=True,
                 format_func=UNIT_LABELS.__getitem__,
                 help="Width units read like the interval itself. Log units are where this "
                      "family's split is exact; in width units each patient's three parts are "
                      "scaled by one factor, so they still add up.")


class Change(TypedDict):
    delta_arrow: Literal["up", "down", "off"]
    delta_color: Literal["red", "green", "gray"]


def change_arrow(text: str, *, coloured: bool = True) -> Change:
    """st.metric's arrow and colour for a change written by text.people_number.

    Streamlit reads a change's direction from a leading ASCII '-', and people_number writes a
    true minus sign (−): without this a narrower interval showed a red up arrow. `coloured`:
    wider red, narrower green (a width); otherwise grey (a prediction, neither good nor bad).
    A change that rounds to nothing ("0", "≈0") has no arrow."""
    if text.startswith(MINUS):
        change: Change = {"delta_arrow": "down", "delta_color": "green"}
    elif text.startswith("+"):
        change = {"delta_arrow": "up", "delta_color": "red"}
    else:
        change = {"delta_arrow": "off", "delta_color": "gray"}
    if not coloured:
        change["delta_color"] = "gray"
    return change


def chart(figure: go.Figure, key: str | None = None) -> None:
    """A plotly chart (the Setup and Interactions pages' charts)."""
    st.plotly_chart(figure, config=CHART_CONFIG, theme=None, key=key)


def html_view(page: str, key: str) -> None:
    """One of the Patient or Cohort page's charts or the patient's table, drawn as HTML and
    CSS (`page`, from app/html_charts.py) in a slot named by `key`. A patient switch is the
    dashboard's most frequent click: plotly drawing the two charts was about half of the
    browser's work per switch, and the data grid most of what was left, which decides how many
    users one machine serves; on the Cohort page plotly's first drawing of a session (its code
    compiled, every label measured) made the first visit slower than the next ones
    (docs/benchmarks/dashboard.md). app/main.py sends their style sheet (chart_styles)."""
    with st.container(key=key):
        st.html(page)


def chart_styles() -> None:
    """The style sheet of html_view's charts and table, once per page (app/main.py draws it
    before every page), outside the patient panel so that a switch does not send it again (a
    style-only st.html takes no room)."""
    st.html(f"<style>{html_charts.CSS}</style>")


def results_preview(results: state.Results) -> None:
    """The run's interval widths in a small chart, on the page where Run was pressed: a first
    look at the results."""
    e = results.shown
    chart(charts.width_histogram(summaries.comparable_widths(e.width), base_width=e.base_width,
                                 height=260), key="results_preview")

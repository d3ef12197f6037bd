"""Pieces several pages draw: the results gate, the units toggle and the chart call."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from app import chart_component, charts, state, summaries

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


def chart(figure: go.Figure, key: str | None = None, *, mounted: bool = False,
          upcoming: go.Figure | None = None, upcoming_heading: str | None = None) -> None:
    """Every chart of the app. `mounted` (which needs a key) keeps the slot's chart on the page
    and redraws it in place when the figure changes (app/chart_component.py): for the charts a
    patient switch changes, where st.plotly_chart would build a new chart each time.
    `upcoming` (mounted charts only): the slot's likely next figure, drawn ahead by the
    browser, and shown at once when the page's subheading reads `upcoming_heading`."""
    if mounted:
        if key is None:
            raise ValueError("a mounted chart needs a key: it names the slot it stays in")
        chart_component.mounted_chart(figure, CHART_CONFIG, key, upcoming, upcoming_heading)
    else:
        if upcoming is not None:
            raise ValueError("only a mounted chart draws an upcoming figure ahead")
        st.plotly_chart(figure, config=CHART_CONFIG, theme=None, key=key)


def results_preview(results: state.Results) -> None:
    """The run's interval widths in a small chart, on the page where Run was pressed.

    A first look at the results, and it makes the browser load its chart code while the user
    reads the results line: without it the first visit to the Cohort or Patient page after a
    Run waited for that load too (4-9 s on a loaded machine, against 0.3-0.6 s for a visit
    again)."""
    e = results.shown
    chart(charts.width_histogram(summaries.comparable_widths(e.width), base_width=e.base_width,
                                 height=260), key="results_preview")

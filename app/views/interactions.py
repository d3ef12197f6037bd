"""Cohort: features that act together, from the exact method's pairwise interaction values.

Folded away and computed only on request: the values need the instance game on every one of
the 2^d coalitions per patient (the calibration game is the run's, already cached), so they
exist only after a run with the exact method and at most 16 features.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from cpdecomp.app import charts, widgets
from cpdecomp.app.state import Results
from cpdecomp.app.text import (
    decimals_for,
    markdown_text,
    people_number,
    plotly_text,
    table_format,
)
from cpdecomp.core.attribution import MAX_EXACT_PLAYERS, METHOD_LABELS
from cpdecomp.core.interactions import VIEWS, Interactions

TOP_PAIRS = 10
"""Pairs in the table: the strongest by the total's mean size over the patients."""
HEAT_SIZE = 300
"""Pixels per heat map side before the labels: three fit side by side at 1280 px."""


def unavailable_reason(results: Results) -> str | None:
    """Plain words for why the run cannot give interaction values; None when it can."""
    method = results.config.method
    n_features = len(results.shown.features)
    if method != "exact":
        return ("Interaction values need the value of every combination of features, which "
                f"only the exact method computes; this run used "
                f"{markdown_text(METHOD_LABELS.get(method, method))}. Choose the exact method "
                "on the Setup page and press Run again to see them.")
    if n_features > MAX_EXACT_PLAYERS:
        return (f"Interaction values need the value of every combination of features, which "
                f"is computed for at most {MAX_EXACT_PLAYERS} features; this run has "
                f"{n_features}. Choose fewer features on the Data page to see them.")
    return None


def computed(results: Results) -> Interactions:
    """The run's interaction values, kept for the session (one configuration at a time)."""
    key = (results.config, results.units)
    kept = st.session_state.get("_interactions")
    if kept is None or kept[0] != key:
        with st.spinner("Working out how pairs of features act together…"):
            value = results.study.interactions(alpha=results.config.alpha, index="SII",
                                               units="log" if results.units == "log" else "width")
        kept = (key, value)
        st.session_state["_interactions"] = kept
    return kept[1]


def calibration_sentence(interactions: Interactions) -> str:
    """What the calibration-driven joint effects are across patients, true in these units: one
    value per pair on the family's additive scale, scaled by each patient's own width factor in
    width units of a multiplicative family (method page §6)."""
    calibration = interactions.calibration
    spread = float(np.nanmax(np.ptp(calibration, axis=0), initial=0.0)) if len(calibration) \
        else 0.0
    scale = max(float(np.nanmax(np.abs(calibration), initial=0.0)), 1e-300)
    if spread <= 1e-9 * scale:
        return ("The calibration-driven joint effect comes from the calibration set, so it is "
                "the same for every patient.")
    return ("The calibration-driven joint effect comes from the calibration set; in width "
            "units it is scaled by each patient's own width, so it differs from patient to "
            f"patient (by up to {people_number(spread, scale)} here) and the table shows its "
            "average. In log units it is one value for every patient.")


def pairs_table(interactions: Interactions, top: int = TOP_PAIRS) -> pd.DataFrame:
    """The strongest pairs: mean size per part, and how often the pair widens the total."""
    strongest = interactions.strongest()
    names = interactions.pair_names
    totals = interactions.pair_values("total")
    widens = []
    for a, b in zip(strongest["feature_a"], strongest["feature_b"], strict=True):
        share = float(np.mean(totals[:, names.index((a, b))] > 0))
        widens.append(f"widen for {share:.0%} of patients" if share >= 0.5
                      else f"narrow for {1 - share:.0%} of patients")
    return pd.DataFrame({
        "Features": [f"{a} & {b}" for a, b in zip(strongest["feature_a"],
                                                   strongest["feature_b"], strict=True)],
        "Calibration-driven": strongest["calibration"],
        "Instance-driven": strongest["instance"],
        "Total": strongest["total"],
        "Together they": widens,
    }).head(top)


def heat_maps(interactions: Interactions) -> go.Figure:
    """Mean size of each pair's interaction, one map per part in the part's colour, on one
    shared scale; the diagonal (a feature with itself) is left blank."""
    players = list(interactions.players)
    labels = charts.tick_labels(players)
    d = len(players)
    sizes = {view: np.abs(getattr(interactions, view)).mean(axis=0) for view in VIEWS}
    for matrix in sizes.values():
        np.fill_diagonal(matrix, np.nan)
    top = max(float(np.nanmax(m)) if np.isfinite(m).any() else 0.0 for m in sizes.values())
    top = top if top > 0 else 1.0
    domains = ((0.0, 0.3), (0.35, 0.65), (0.7, 1.0))
    traces, layout = [], {}
    for column, (view, domain) in enumerate(zip(VIEWS, domains, strict=True), start=1):
        suffix = "" if column == 1 else str(column)
        names = [[f"{plotly_text(players[i])} & {plotly_text(players[j])}" for j in range(d)]
                 for i in range(d)]
        traces.append(dict(
            type="heatmap", z=sizes[view], x=labels, y=labels, zmin=0, zmax=top,
            colorscale=[[0, "#FFFFFF"], [1, charts.COLOURS[view]]], showscale=False,
            xaxis=f"x{suffix}", yaxis=f"y{suffix}", customdata=names, xgap=1, ygap=1,
            hovertemplate=f"%{{customdata}}: %{{z:.{decimals_for(top)}f}} on average<extra>"
                          + charts.PANEL_TITLES[view] + "</extra>",
        ))
        layout[f"xaxis{suffix}"] = {"domain": domain, "anchor": f"y{suffix}", "tickangle": -45,
                                    "showgrid": False, "automargin": True, "ticks": ""}
        layout[f"yaxis{suffix}"] = {"domain": (0.0, 1.0), "anchor": f"x{suffix}",
                                    "autorange": "reversed", "showgrid": False,
                                    "automargin": True, "showticklabels": column == 1,
                                    "ticks": "", "scaleanchor": f"x{suffix}"}
    titles = [{"text": charts.PANEL_TITLES[view], "x": sum(domain) / 2, "y": 1.0,
               "xref": "paper", "yref": "paper", "xanchor": "center", "yanchor": "bottom",
               "showarrow": False, "font": {"size": 15}}
              for view, domain in zip(VIEWS, domains, strict=True)]
    return go.Figure(data=traces, layout={
        "template": "none", "font": {**charts.FONT, "color": "#222222"},
        "height": HEAT_SIZE + 40 + 7 * max(len(str(p)) for p in labels),
        "plot_bgcolor": "white", "paper_bgcolor": "white", "annotations": titles,
        "margin": {"l": 10, "r": 10, "t": 40, "b": 10}, **layout,
        "title": None, "showlegend": False,
    })


def render(results: Results) -> None:
    """The folded section at the end of the Cohort page."""
    with st.expander("Features that act together", icon=":material/hub:"):
        st.markdown("Two features can widen or narrow the interval **together**, beyond what "
                    "each does on its own: a high value of one may matter only when the other "
                    "is high too. For each pair of features this shows the size of that joint "
                    "effect, averaged over the patients, for the calibration-driven part, the "
                    "instance-driven part and the total (the total is their sum, pair by "
                    "pair).")
        reason = unavailable_reason(results)
        if reason is not None:
            st.info(reason)
            return
        if not st.toggle("Show the pairs", key="interactions_on",
                         help="Needs the instance part for every combination of features and "
                              "every patient: a few seconds on the first look."):
            return
        interactions = computed(results)
        units = results.shown.units_label
        with st.container(key="interactions_panel"):
            table = pairs_table(interactions)
            parts = ("Calibration-driven", "Instance-driven", "Total")
            # The one rounding rule, on this table's own scale (its largest value): pairs are
            # smaller than the bars, and the bars' decimals would round most of them to 0.
            largest = float(np.nanmax(np.abs(table[list(parts)].to_numpy(dtype=float))))
            st.dataframe(table, hide_index=True, column_config={
                part: st.column_config.NumberColumn(format=table_format(largest))
                for part in parts})
            st.caption(f"The {TOP_PAIRS} strongest pairs by the total, in "
                       f"{markdown_text(units)} (the size of the joint effect, averaged over "
                       "the patients, whatever its direction). 'Together they' says whether "
                       "the pair's joint effect on the total widens or narrows most patients' "
                       "intervals. " + calibration_sentence(interactions))
            widgets.chart(heat_maps(interactions), key="interactions_heat")
            st.caption("Darker squares: pairs that act together more strongly. A feature with "
                       "itself is left blank; its own effect is in the bars above. For "
                       "analysts: the values are Shapley interaction indices of the two games "
                       "(SII), computed from all combinations of features.")

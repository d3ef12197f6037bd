"""Figures of the three experiments (plotly) and one self-contained HTML report.

The report inlines plotly.js once (≈ 4.8 MB) and every figure after it, so it opens offline.
Static PNG export would need kaleido and a Chromium build, neither of which installs offline;
the report says so rather than failing.
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from experiments.config import PRIMARY_ALPHA
from experiments.decision_task import DecisionResults
from experiments.identity_grid import GridResults
from experiments.sign_opposition import AGGREGATES, NULL_POOLED, POOLED, SignResults

METRIC_LABELS = {
    "opposite": "φ_C and φ_I opposite (settled signs)",
    "opposite_sizeable": "opposite, both ≥ 5 % of width",
    "reversed": "φ_T and φ_I opposite",
    "cancelled": "total cancels a sizeable φ_I",
}


def _at_alpha(frame: pd.DataFrame, alpha: float = PRIMARY_ALPHA) -> pd.DataFrame:
    return frame[np.isclose(frame["alpha"], alpha)]


def pooled_shares(results: SignResults, family: str = "normalized") -> go.Figure:
    """Pooled shares of real features and of null columns per data set, with intervals over
    resplits (alpha 0.1)."""
    s = _at_alpha(results.summary)
    s = s[s["feature"].isin([POOLED, NULL_POOLED]) & (s["family"] == family)]
    s = s[np.isfinite(s["opposite"])]
    labels = s["dataset"] + np.where(s["feature"] == POOLED, " · real", " · null")
    figure = go.Figure()
    for metric, label in METRIC_LABELS.items():
        figure.add_bar(
            name=label, x=labels, y=s[metric],
            error_y={"type": "data", "symmetric": False,
                     "array": s[f"{metric}_high"] - s[metric],
                     "arrayminus": s[metric] - s[f"{metric}_low"]},
        )
    figure.update_layout(barmode="group", yaxis_title="share of patient-feature pairs",
                         yaxis_tickformat=".0%", title=f"Claim 1: sign opposition ({family}, "
                         f"α = {PRIMARY_ALPHA}), 95% bootstrap intervals over resplits")
    return figure


def per_feature_shares(results: SignResults, family: str = "normalized") -> go.Figure:
    """Opposite and reversed shares per feature, one panel per data set."""
    s = _at_alpha(results.summary)
    s = s[(s["family"] == family) & ~s["feature"].isin(AGGREGATES)]
    datasets = list(dict.fromkeys(s["dataset"]))
    figure = make_subplots(rows=len(datasets), cols=1, subplot_titles=datasets,
                           vertical_spacing=0.35 / max(len(datasets), 1))
    for row, dataset in enumerate(datasets, start=1):
        part = s[s["dataset"] == dataset]
        for metric in ("opposite", "reversed"):
            figure.add_bar(
                x=part["feature"], y=part[metric], name=METRIC_LABELS[metric],
                marker_color="#1f77b4" if metric == "opposite" else "#d62728",
                showlegend=row == 1, row=row, col=1,
                error_y={"type": "data", "symmetric": False,
                         "array": part[f"{metric}_high"] - part[metric],
                         "arrayminus": part[metric] - part[f"{metric}_low"]},
            )
    figure.update_layout(barmode="group", height=260 * len(datasets),
                         title=f"Claim 1 per feature ({family}, α = {PRIMARY_ALPHA})")
    figure.update_yaxes(tickformat=".0%", range=[0, 1])
    return figure


def null_subtracted(results: SignResults, family: str = "normalized") -> go.Figure:
    """Each real feature's share minus the null columns', with its interval over resplits."""
    s = _at_alpha(results.null_subtracted)
    s = s[s["family"] == family]
    datasets = list(dict.fromkeys(s["dataset"]))
    figure = make_subplots(rows=max(len(datasets), 1), cols=1, subplot_titles=datasets,
                           vertical_spacing=0.35 / max(len(datasets), 1))
    for row, dataset in enumerate(datasets, start=1):
        part = s[s["dataset"] == dataset]
        for metric, color in (("opposite_sizeable", "#1f77b4"), ("reversed", "#d62728")):
            low = np.nan_to_num(part[f"{metric}_low"], neginf=-1.0)
            high = np.nan_to_num(part[f"{metric}_high"], posinf=1.0)
            figure.add_bar(
                x=part["feature"], y=part[metric], name=METRIC_LABELS[metric] + ", real − null",
                marker_color=color, showlegend=row == 1, row=row, col=1,
                error_y={"type": "data", "symmetric": False, "array": high - part[metric],
                         "arrayminus": part[metric] - low},
            )
    figure.update_layout(barmode="group", height=260 * max(len(datasets), 1),
                         title=f"Claim 1: real features minus null columns ({family}, "
                         f"α = {PRIMARY_ALPHA}); intervals over resplits, Bonferroni")
    figure.update_yaxes(tickformat=".0%")
    return figure


def reversal_scatter(results: SignResults, columns: int = 3) -> go.Figure:
    """φ_I against φ_T for the most reversed feature of each data set (one resplit)."""
    examples = results.examples
    if examples.empty:
        return go.Figure()
    s = _at_alpha(results.summary)
    s = s[(s["family"] == "normalized") & ~s["feature"].isin(AGGREGATES)
          & (s["kind"] == "real")]
    datasets = [d for d in dict.fromkeys(examples["dataset"]) if d in set(s["dataset"])]
    chosen = {d: s[s["dataset"] == d].sort_values("reversed").iloc[-1]["feature"]
              for d in datasets}
    rows = -(-len(datasets) // columns)
    figure = make_subplots(rows=rows, cols=columns, horizontal_spacing=0.08,
                           vertical_spacing=0.18,
                           subplot_titles=[f"{d}<br>{f}" for d, f in chosen.items()])
    for k, dataset in enumerate(datasets):
        row, col = k // columns + 1, k % columns + 1
        part = examples[(examples["dataset"] == dataset)
                        & (examples["feature"] == chosen[dataset])]
        agree = np.sign(part["total"]) == np.sign(part["instance"])
        for mask, name, color in ((agree, "same sign", "#7f7f7f"),
                                  (~agree, "total reverses instance", "#d62728")):
            figure.add_scatter(x=part["instance"][mask], y=part["total"][mask], mode="markers",
                               marker={"size": 5, "color": color, "opacity": 0.6}, name=name,
                               showlegend=k == 0, row=row, col=col)
        figure.update_xaxes(title_text="φ_I", row=row, col=col)
        figure.update_yaxes(title_text="φ_T", row=row, col=col)
    figure.update_layout(height=330 * rows, title="Total vs instance-driven attribution of the "
                         "most reversed feature (width units; normalized, α = 0.1, one resplit)")
    return figure


def decision_units(results: DecisionResults) -> go.Figure:
    """Per unit at α = 0.1, instance − total on both errors of the role: false reassurance
    (circles) and false alarms (crosses), coloured by φ_C's side. The symmetric rule judges
    the first where φ_C < 0 and the second where φ_C > 0."""
    units = results.units
    figure = go.Figure()
    if units.empty:
        return figure
    colors = {"negative": "#1f77b4", "positive": "#d62728", "near zero": "#7f7f7f"}
    for prefix, name, symbol in (("FR", "false reassurance", "circle"),
                                 ("FA", "false alarms", "x")):
        column = f"{prefix}_instance_minus_total"
        if column not in units:
            continue
        for side, part in units.groupby("side", sort=False):
            labels = [f"{r.model} n={int(r.n_cal)} {r.setting} {r.role}"
                      for r in part.itertuples()]
            figure.add_scatter(
                x=labels, y=part[column], mode="markers", name=f"{name}, φ_C {side}",
                marker={"color": colors.get(side, "#000000"), "size": 8, "symbol": symbol},
                error_y={"type": "data", "symmetric": False,
                         "array": part[f"{column}_high"] - part[column],
                         "arrayminus": part[column] - part[f"{column}_low"]})
    figure.add_hline(y=0, line_dash="dot")
    figure.update_layout(height=560, yaxis_tickformat=".0%", xaxis_tickangle=-60,
                         title="Claim 2: instance − total per unit (α = 0.1): false reassurance "
                               "(judged where φ_C < 0) and false alarms (judged where φ_C > 0)",
                         yaxis_title="below 0: the instance view errs less<br>(95 % paired "
                         "bootstrap over draws)")
    return figure


def identity_heatmap(results: GridResults) -> go.Figure:
    """log10 of the largest relative additivity error per family × method (width units)."""
    grid = results.grid
    grid = grid[(grid["units"] == "width") & (grid["status"] != "error")]
    datasets = list(dict.fromkeys(grid["dataset"]))
    figure = make_subplots(rows=1, cols=max(len(datasets), 1), subplot_titles=datasets)
    for col, dataset in enumerate(datasets, start=1):
        part = grid[grid["dataset"] == dataset].pivot_table(
            index="family", columns="method", values="additivity_relative", aggfunc="max")
        z = np.log10(np.maximum(part.to_numpy(dtype=float), 1e-18))
        figure.add_heatmap(z=z, x=list(part.columns), y=list(part.index), zmin=-18, zmax=0,
                           colorscale="Viridis", showscale=col == 1,
                           colorbar={"title": "log10 error"},
                           text=np.vectorize(lambda v: f"{v:.1e}")(part.to_numpy(dtype=float)),
                           texttemplate="%{text}", row=1, col=col)
    figure.update_layout(height=450,
                         title="Claim 3: max |φ_T − φ_C − φ_I| / width for every family × method")
    return figure


def negative_controls(results: GridResults) -> go.Figure:
    """Largest error of each negative control against the largest error of the grid."""
    controls = results.controls
    figure = go.Figure()
    if controls.empty:
        return figure
    labels = [f"{r.dataset} / {r.family}<br>{r.control.split(' (')[0]}"
              for r in controls.itertuples()]
    figure.add_bar(x=labels, y=controls["max_error"], name="negative control (max)",
                   marker_color="#d62728")
    figure.add_bar(x=labels, y=controls["median_error"], name="negative control (median)",
                   marker_color="#ff9896")
    ran = results.grid[results.grid["status"] != "error"]
    worst = float(ran["additivity_relative"].max()) if len(ran) else 1e-16
    floor = max(worst, 1e-18)
    figure.add_hline(y=floor, line_dash="dot", annotation_position="top left",
                     annotation_text=f"largest error of any linear method × separable family: "
                     f"{worst:.1e}")
    figure.update_yaxes(type="log", title_text="|φ_T − φ_C − φ_I| (relative)",
                        range=[np.log10(floor) - 1, 1.5])
    figure.update_layout(barmode="group", height=420,
                         title="Claim 3: negative controls fail visibly")
    return figure


def write_report(path: Path, title: str, sections: list[tuple[str, str, go.Figure | None]]
                 ) -> None:
    """One HTML file: plotly.js inlined once, then each section's text and figure."""
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}"
        "pre{white-space:pre-wrap;background:#f6f6f6;padding:.5em}</style>",
        f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    for heading, text, figure in sections:
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        if text:
            parts.append(f"<pre>{html.escape(text)}</pre>")
        if figure is not None:
            parts.append(figure.to_html(full_html=False, include_plotlyjs=False))
    parts.append("</body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")

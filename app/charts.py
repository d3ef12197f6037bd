"""Plotly figures for the dashboard: pure functions of arrays, no Streamlit.

One colour means one part in every chart: blue for calibration-driven, orange for
instance-driven, grey for the total. Widening or narrowing is never a colour: it is the bar's
direction from zero (and, in the waterfall, a dark or light grey step with a + or − label).
The parts are also told apart without colour: each has its own labelled panel (or chart
title), in Okabe-Ito colours, which stay distinct under the common colour-vision deficiencies.
No fill patterns on the parts' bars: drawing them was half of the browser's work on a patient
switch, and the panel titles already name the part; the sign-disagreement chart, whose two
series share a panel, keeps its patterns.

Every name from the user's data goes through `plotly_text`: plotly renders its HTML subset
(`<a href>`, `<b>`, `<br>`) in labels, hover text and titles.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from cpdecomp.app.text import people_number, plotly_labels, plotly_text

VIEWS = ("calibration", "instance", "total")
TITLES = {
    "calibration": "Calibration-driven",
    "instance": "Instance-driven",
    "total": "Total (= calibration + instance)",
}
"""Legend entries; the panels' titles are the short PANEL_TITLES."""
PANEL_TITLES = {"calibration": "Calibration-driven", "instance": "Instance-driven",
                "total": "Total"}
LABEL_CHARACTERS = 26
"""Longer feature names are cut with … on the axis (the hover shows them whole), so the three
panels keep their room at 1280 px."""
COLOURS = {"calibration": "#0072B2", "instance": "#E69F00", "total": "#555555",
           "fixed": "#CC79A7"}
""""fixed" is no part: the practitioners' comparator (the width's Shapley values at a fixed
conformal quantile), in a colour of its own so it is never read as one of the three."""
BACKGROUND_COLOUR = "#009E73"
"""The reference sample's (background's) error: Okabe-Ito's bluish green, no part's colour
and no direction; drawn as a translucent band with a tick at the part's value."""
BACKGROUND_BAND = "rgba(0, 158, 115, 0.45)"
BACKGROUND_LEGEND = "Green band: reference-sample error (90% range)"
WIDENS, NARROWS = "#444444", "#C8C8C8"
"""Waterfall steps: shades of the total's grey, so no part's colour means a direction."""
PART_WORDS = {"calibration": "calibration-driven part (set by the calibration set)",
              "instance": "instance-driven part (set by this patient's own values)",
              "total": "total (calibration + instance)"}
DISAGREE_MARK = "⇄"
"""Appended to a feature's label when its calibration and instance parts have opposite signs."""
UNSETTLED_MARK = "?"
"""Appended to a feature's label when its calibration-driven part's interval holds 0: whether
it widens or narrows the interval is not settled by this calibration set."""
UNSETTLED_OPACITY = 0.35

FONT = {"size": 13}
ROW_HEIGHT = 26


GRID = "#E5E5E5"


def _axis(**extra: object) -> dict:
    """Axis styling, written out rather than taken from a template: applying a named template
    deep-copies it, which made a patient switch several times slower.

    No automargin: plotly then measures every label and redraws the figure until the margins
    settle, which was a third of the browser's work on a patient switch. The margins are set
    from the labels' estimated widths instead (`label_margin`).

    Tick labels may overflow: by default plotly hides a numeric axis' labels that would pass the
    chart's edge, measuring each label's box in the page on every draw to find out (a forced
    layout, 15 ms of the browser's 130 ms of plotly work per patient switch in a CPU profile).
    The margins leave the labels room, so none is hidden either way."""
    return {"gridcolor": GRID, "linecolor": "#888888", "zerolinecolor": "#222222",
            "automargin": False, "ticklabeloverflow": "allow", **extra}


CHARACTER_WIDTHS = {**dict.fromkeys("ijlI.,:;'|!", 0.32), **dict.fromkeys("frt ()[]-", 0.42),
                    **dict.fromkeys("mwMW", 1.0), **dict.fromkeys("⇄…", 1.0)}
"""Widths in ems of the characters far from the average, generous for DejaVu Sans (the widest
common fallback of plotly's default font); lower case 0.62 em, upper case 0.74 em, others
0.66 em."""


def text_width(text: str, size: float = FONT["size"]) -> float:
    """Estimated pixels that `text` (plotly-escaped, one line) takes at font `size`."""
    shown = html.unescape(text)
    ems = sum(CHARACTER_WIDTHS.get(c, 0.62 if c.islower() else 0.74 if c.isupper() else 0.66)
              for c in shown)
    return ems * size


def label_margin(labels: Sequence[str], extra: float = 0.0) -> int:
    """A left margin that holds the longest category label beside the axis (plus `extra`
    pixels for an axis title), so nothing is cut without plotly's automargin."""
    widest = max((text_width(t) for t in labels), default=0.0)
    return int(np.ceil(widest + 6 + 12 + extra))  # the labels' standoff, and some air


def _layout(height: int, title: str | None = None, *, left: int = 60,
            **extra: object) -> dict:
    """The common layout, as a plain dict; `left` is the left margin in pixels.

    Figures are built in one go from dicts: every `update_layout` call runs plotly's
    validation and change-dispatch machinery again, which made up most of a patient switch.
    """
    return {
        # No template: plotly.js's own defaults under the styling below (the name "none"
        # is resolved only by the validation that _figure skips).
        "template": {}, "font": {**FONT, "color": "#222222"}, "height": height,
        "showlegend": False, "plot_bgcolor": "white", "paper_bgcolor": "white",
        "margin": {"l": left, "r": 30, "t": 70 if title else 50, "b": 60},
        "title": {"text": title, "x": 0, "xanchor": "left"} if title else None,
        "xaxis": _axis(), "yaxis": _axis(ticklabelstandoff=6, autorange="reversed"),
        **extra,
    }


def _figure(traces: list[dict], layout: dict) -> go.Figure:
    """The figure without plotly's property validation (`_validate=False`): validating set
    every property through plotly's validators and took three quarters of the time a patient's
    bars took to build. The charts' tests validate every figure these functions build."""
    return go.Figure(data=traces, layout=layout, _validate=False)


def feature_order(total: np.ndarray) -> np.ndarray:
    """Feature indices by |total|, largest first: the one order every chart of a page uses
    (a feature whose parts cancel sits low, and the ⇄ mark points it out)."""
    return np.argsort(-np.abs(np.asarray(total, dtype=float)), kind="stable")


def tick_labels(names: Sequence[object]) -> list[str]:
    """Axis labels for names from the data: escaped, long ones cut with … (unless cutting
    would make two labels the same)."""
    texts = [str(n) for n in names]
    cut = [t if len(t) <= LABEL_CHARACTERS else t[:LABEL_CHARACTERS - 1] + "…" for t in texts]
    if len(set(cut)) < len(set(texts)):
        cut = texts
    return plotly_labels(cut)


def _direction(value: float) -> str:
    return "widens the interval" if value > 0 else (
        "narrows the interval" if value < 0 else "no effect")


def _hover(feature: str, value_text: str | None, view: str, part: float,
           se: float | None, span: tuple[float, float] | None = None,
           scale: float | None = None,
           background: tuple[float, float] | None = None) -> str:
    """Plain words for one bar: the feature's value, the part and its direction, the SE, the
    calibration-driven part's likely range and the reference sample's error (`background`:
    the part's range over redrawn backgrounds)."""
    lines = [f"<b>{plotly_text(feature)}</b>"
             + (f" = {plotly_text(value_text)}" if value_text not in (None, "") else "")]
    unsettled = any(r is not None and r[0] <= 0 <= r[1] for r in (span, background))
    direction = "direction not settled" if unsettled else _direction(part)
    lines.append(f"{PART_WORDS[view]}: {people_number(part, scale, signed=True)} ({direction})")
    if span is not None:
        lines.append("likely range with another calibration set: "
                     f"{people_number(span[0], scale, signed=True)} to "
                     f"{people_number(span[1], scale, signed=True)}")
    if background is not None:
        b_low, b_high = (people_number(b, scale, signed=True) for b in background)
        half = people_number((background[1] - background[0]) / 2, scale)
        lines.append(f"reference-sample error: ±{half} "
                     f"(with another reference sample: {b_low} to {b_high})")
    if se is not None:
        lines.append(f"sampling error ± {people_number(abs(se), scale)} (one standard error)")
    return "<br>".join(lines)


def feature_label(name: str, disagree: bool, unsettled: bool) -> str:
    """A feature's axis label with its marks: ⇄ parts of opposite signs, ? sign not settled."""
    marks = (DISAGREE_MARK if disagree else "") + (UNSETTLED_MARK if unsettled else "")
    return f"{name} {marks}" if marks else name


def _padded_limit(values: np.ndarray, share: float = 0.6) -> float:
    """Room beyond the longest bar for its label, so the label never meets the tick labels."""
    biggest = float(np.max(np.abs(values))) if values.size else 0.0
    return biggest * (1 + share) if biggest > 0 else 1.0


def side_by_side_bars(features: Sequence[str], calibration: np.ndarray, instance: np.ndarray,
                      total: np.ndarray, *, units: str, disagree: np.ndarray | None = None,
                      title: str | None = None,
                      errors: Sequence[np.ndarray] | None = None,
                      values: Sequence[str] | None = None,
                      calibration_range: tuple[np.ndarray, np.ndarray] | None = None,
                      scale: float | None = None,
                      background_ranges: tuple[tuple[np.ndarray, np.ndarray],
                                               tuple[np.ndarray, np.ndarray]] | None = None
                      ) -> go.Figure:
    """Three labelled panels sharing the feature axis and one value scale, features by |total|.

    `scale`: the width scale the numbers are rounded at (`people_number`); by default the
    longest bar.

    `errors`: Monte Carlo standard errors of a sampled method, (calibration, instance, total);
    drawn as ±2 SE whiskers so a bar that may not differ from zero is visible as such.
    `values`: the patient's feature values as text, for the hover.
    `calibration_range`: (low, high) of each calibration-driven part over resampled calibration
    sets: drawn as whiskers; a part whose range holds 0 is pale and its feature marked ?.
    `background_ranges`: ((low, high) of the calibration-driven part, (low, high) of the
    instance-driven part) over redrawn backgrounds: drawn as a green band with a tick on the
    two panels (legend: BACKGROUND_LEGEND); a part whose band holds 0 is pale too, and a
    calibration-driven one marks its feature ?.
    """
    calibration, instance, total = (np.asarray(v, dtype=float) for v in
                                    (calibration, instance, total))
    disagree = np.zeros(len(features), bool) if disagree is None else np.asarray(disagree, bool)
    low = high = None
    holds_zero = {view: np.zeros(len(features), bool) for view in VIEWS}
    if calibration_range is not None:
        low, high = (np.asarray(v, dtype=float) for v in calibration_range)
        holds_zero["calibration"] = (low <= 0) & (high >= 0)
    bands: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if background_ranges is not None:
        for view, (b_low, b_high) in zip(("calibration", "instance"), background_ranges,
                                         strict=True):
            bands[view] = (np.asarray(b_low, dtype=float), np.asarray(b_high, dtype=float))
            holds_zero[view] |= (bands[view][0] <= 0) & (bands[view][1] >= 0)
    unsettled = holds_zero["calibration"]
    order = feature_order(total)
    labels = tick_labels([feature_label(features[j], bool(disagree[j]), bool(unsettled[j]))
                          for j in order])
    shown = [calibration, instance, total]
    if low is not None and high is not None:
        shown += [low, high]
    for ends in bands.values():
        shown += list(ends)
    limit = _padded_limit(np.concatenate(shown))
    if scale is None:
        scale = float(np.max(np.abs(np.concatenate(shown)), initial=0.0))
    # Three x axes side by side over one y axis (what make_subplots builds, at a fraction of
    # its cost): the panels share the features and one value scale.
    domains = ((0.0, 0.3), (0.35, 0.65), (0.7, 1.0))
    traces, axes, titles = [], {}, []
    for column, (view, part, domain) in enumerate(
            zip(VIEWS, (calibration, instance, total), domains, strict=True), start=1):
        suffix = "" if column == 1 else str(column)
        outline = [2.5 if disagree[j] and view != "total" else 0.5 for j in order]
        whiskers, se = None, None
        ranged = view == "calibration" and low is not None and high is not None
        if errors is not None:
            se = np.asarray(errors[column - 1], dtype=float)
            whiskers = {"type": "data", "array": 2 * se[order], "visible": True,
                        "color": "#111111", "thickness": 1.2, "width": 4}
        if ranged and low is not None and high is not None:
            # The bootstrap's percentile interval need not be symmetric about the part.
            whiskers = {"type": "data", "symmetric": False,
                        "array": np.maximum(high - part, 0)[order],
                        "arrayminus": np.maximum(part - low, 0)[order], "visible": True,
                        "color": "#111111", "thickness": 1.2, "width": 4}
        band = bands.get(view)
        hover = [_hover(features[j], None if values is None else values[j], view,
                        float(part[j]), None if se is None else float(se[j]),
                        (float(low[j]), float(high[j])) if ranged and low is not None
                        and high is not None else None, scale,
                        None if band is None else (float(band[0][j]), float(band[1][j])))
                 for j in order]
        opacity = [UNSETTLED_OPACITY if holds_zero[view][j] else 1.0 for j in order]
        traces.append(dict(
            type="bar", x=part[order], y=labels, orientation="h", name=TITLES[view],
            error_x=whiskers, legendrank=column,
            xaxis=f"x{suffix}", yaxis="y",
            marker={"color": COLOURS[view], "opacity": opacity,
                    "line": {"color": "#111111", "width": outline}},
            # Every bar has its number; app/html_charts.py puts it past the whisker's or the
            # band's far end, where there is one, so that it never sits on either.
            text=[people_number(v, scale, signed=True) for v in part[order]],
            textposition="outside", cliponaxis=False, textfont={"size": 12},
            customdata=hover, hovertemplate="%{customdata}<extra></extra>",
        ))
        if band is not None:
            traces.append(_background_band(part, band, order, labels, suffix,
                                           first=view == "calibration"))
        # One axis title under the middle panel: three would collide at 1280 px.
        axes[f"xaxis{suffix}"] = _axis(domain=domain, anchor="y", range=[-limit, limit],
                                       zeroline=True, zerolinewidth=1.5,
                                       title={"text": units if view == "instance" else ""})
        titles.append({"text": PANEL_TITLES[view], "x": sum(domain) / 2, "y": 1.0, "xref": "paper",
                       "yref": "paper", "xanchor": "center", "yanchor": "bottom",
                       "showarrow": False, "font": {"size": 15}})
    layout = _layout(150 + ROW_HEIGHT * len(features), title, left=label_margin(labels),
                     **axes, annotations=titles, showlegend=True,
                     legend={"orientation": "h", "x": 0, "y": 0, "yanchor": "bottom",
                             "xanchor": "left", "yref": "container"})
    layout["margin"]["b"] = 90
    return _figure(traces, layout)


def _background_band(part: np.ndarray, band: tuple[np.ndarray, np.ndarray],
                     order: np.ndarray, labels: list[str], suffix: str, first: bool) -> dict:
    """The reference sample's error on one panel: a translucent green band from the range's
    low to its high end (no caps, so it never reads as the calibration set's black whisker),
    with a green tick at the part's value; one legend entry for both panels. No hover of its
    own: the bar beneath says it in words."""
    b_low, b_high = band
    return dict(
        type="scatter", mode="markers", x=part[order], y=labels, xaxis=f"x{suffix}", yaxis="y",
        name=BACKGROUND_LEGEND, legendgroup="background", showlegend=first, legendrank=4,
        marker={"symbol": "line-ns", "size": 14, "color": BACKGROUND_COLOUR,
                "line": {"color": BACKGROUND_COLOUR, "width": 3}},
        error_x={"type": "data", "symmetric": False,
                 "array": np.maximum(b_high - part, 0)[order],
                 "arrayminus": np.maximum(part - b_low, 0)[order], "visible": True,
                 "color": BACKGROUND_BAND, "thickness": 8, "width": 0},
        hoverinfo="skip",
    )


def width_waterfall(features: Sequence[str], total: np.ndarray, start: float, end: float, *,
                    units: str, start_label: str = "featureless width",
                    end_label: str = "this patient", scale: float | None = None) -> go.Figure:
    """From the featureless width to the patient's, one step per feature (largest first);
    numbers rounded at `scale` (default: the featureless width).

    A step for what the attributions leave unexplained appears only for a method that is not
    efficient; exact and permutation Shapley are, so the steps end exactly at `end`.
    """
    total = np.asarray(total, dtype=float)
    order = feature_order(total)
    labels = [plotly_text(start_label), *tick_labels([features[j] for j in order])]
    steps = [float(start)] + [float(total[j]) for j in order]
    gap = float(end) - float(start) - float(total.sum())
    if abs(gap) > 1e-9 * max(abs(float(end)), 1.0):
        labels.append("not attributed")
        steps.append(gap)
    labels.append(plotly_text(end_label))
    measure = ["absolute"] + ["relative"] * (len(steps) - 1) + ["total"]
    path = float(start) + np.concatenate([[0.0], np.cumsum(steps[1:])])
    # The axis includes 0, so a bar's length is the width itself, not a difference from an
    # arbitrary start (widths are positive; log widths can be of either sign).
    low, high = float(min(path.min(), end, 0.0)), float(max(path.max(), end, 0.0))
    pad = 0.2 * (high - low) if high > low else 1.0
    scale = abs(float(start)) if scale is None else scale
    text = ([people_number(start, scale)] + [people_number(s, scale, signed=True)
                                              for s in steps[1:]] + [people_number(end, scale)])
    trace = dict(
        type="waterfall", orientation="h", y=labels, x=[*steps, 0.0], measure=measure, text=text,
        textposition="outside", cliponaxis=False,
        increasing={"marker": {"color": WIDENS, "line": {"color": "#111111", "width": 1}}},
        decreasing={"marker": {"color": NARROWS, "line": {"color": "#111111", "width": 1}}},
        # The two levels (featureless, this patient) are outlined boxes, unlike any step.
        totals={"marker": {"color": "#FFFFFF", "line": {"color": "#111111", "width": 2}}},
        connector={"line": {"color": "#999999", "dash": "dot"}},
        customdata=text, hovertemplate="%{y}: %{customdata}<extra></extra>",
    )
    layout = _layout(140 + ROW_HEIGHT * len(labels), left=label_margin(labels), title=(
                     "From the featureless width to this patient's: one step per feature<br>"
                     "<sup>dark step (+): widens · light step (−): narrows · "
                     "outlined: the two widths · axis from 0</sup>"))
    layout["xaxis"].update(range=[low - pad, high + pad], title={"text": units})
    return _figure([trace], layout)


def width_histogram(widths: np.ndarray, *, base_width: float, threshold: float | None = None,
                    marked: float | None = None, height: int = 340) -> go.Figure:
    """Distribution of interval widths, with the featureless width and the flag threshold."""
    trace = dict(type="histogram", x=np.asarray(widths, dtype=float), nbinsx=30,
                 marker={"color": "#999999", "line": {"color": "#333333", "width": 1}},
                 hovertemplate="width %{x}: %{y} patients<extra></extra>")
    lines = [(base_width, "featureless width", "dash")]
    if threshold is not None:
        lines.append((threshold, "flag threshold", "dot"))
    if marked is not None:
        lines.append((marked, "this patient", "solid"))
    # Vertical lines across the plot with a label on top (what add_vline draws).
    shapes = [{"type": "line", "x0": x, "x1": x, "xref": "x", "y0": 0, "y1": 1, "yref": "paper",
               "line": {"dash": dash, "color": "#111111", "width": 2}}
              for x, _, dash in lines]
    labels = [{"text": label, "x": x, "xref": "x", "y": 1, "yref": "paper",
               "xanchor": "center", "yanchor": "bottom", "showarrow": False}
              for x, label, _ in lines]
    # The y axis's numbers and its rotated title.
    layout = _layout(height, "Interval widths", left=70, shapes=shapes, annotations=labels)
    layout["xaxis"].update(title={"text": "interval width"})
    layout["yaxis"].update(title={"text": "patients"}, autorange=True)
    return _figure([trace], layout)


def outcome_histogram(values: np.ndarray, *, target: str, height: int = 260) -> go.Figure:
    """Distribution of the target in the data (the training file, if separate), to judge the
    range the outcome can take (grey: no part of a width)."""
    values = np.asarray(values, dtype=float)
    trace = dict(type="histogram", x=values[np.isfinite(values)], nbinsx=30,
                 marker={"color": "#999999", "line": {"color": "#333333", "width": 1}},
                 hovertemplate="%{x}: %{y} rows<extra></extra>")
    layout = _layout(height, "The outcome in the data", left=70)
    layout["xaxis"].update(title={"text": plotly_text(target)})
    layout["yaxis"].update(title={"text": "rows"}, autorange=True)
    return _figure([trace], layout)


def vector_bars(features: Sequence[str], values: np.ndarray, order: np.ndarray, *,
                view: str, units: str, title: str,
                span: tuple[np.ndarray, np.ndarray] | None = None,
                scale: float | None = None,
                band: tuple[np.ndarray, np.ndarray] | None = None) -> go.Figure:
    """One attribution vector as labelled horizontal bars in the view's colour, its numbers
    rounded at `scale` (default: the longest bar).

    `title` is the dashboard's own text (it may use plotly markup); names go in as labels.
    `span`: (low, high) per feature, drawn as whiskers; a bar whose span holds 0 is pale and
    its feature marked ? (the calibration-driven part's bootstrap interval).
    `band`: (low, high) per feature over redrawn backgrounds, drawn as the green band
    (BACKGROUND_LEGEND); a bar whose band holds 0 is pale and marked ? too."""
    values = np.asarray(values, dtype=float)
    unsettled = np.zeros(len(features), bool)
    whiskers = None
    if band is not None:
        band = (np.asarray(band[0], dtype=float), np.asarray(band[1], dtype=float))
        unsettled = (band[0] <= 0) & (band[1] >= 0)
    if span is not None:
        low, high = (np.asarray(v, dtype=float) for v in span)
        unsettled = unsettled | ((low <= 0) & (high >= 0))
        whiskers = {"type": "data", "symmetric": False,
                    "array": np.maximum(high - values, 0)[order],
                    "arrayminus": np.maximum(values - low, 0)[order], "visible": True,
                    "color": "#111111", "thickness": 1.2, "width": 4}
    labels = tick_labels([feature_label(features[j], False, bool(unsettled[j])) for j in order])
    shown = values if span is None else np.concatenate([values, low, high])
    if band is not None:
        shown = np.concatenate([shown, *band])
    scale = float(np.max(np.abs(shown), initial=0.0)) if scale is None else scale
    hover = [f"{labels[k]}: {people_number(values[j], scale, signed=True)}"
             + ("" if span is None else
                f" (likely range {people_number(low[j], scale, signed=True)} to "
                f"{people_number(high[j], scale, signed=True)})")
             + ("" if band is None else
                f"<br>reference-sample error: "
                f"±{people_number((band[1][j] - band[0][j]) / 2, scale)}")
             for k, j in enumerate(order)]
    trace = dict(
        type="bar", x=values[order], y=labels,
        orientation="h", error_x=whiskers,
        marker={"color": COLOURS[view],
                "opacity": [UNSETTLED_OPACITY if unsettled[j] else 1.0 for j in order],
                "line": {"color": "#111111", "width": 0.5}},
        # Every bar has its number (past a whisker or band: app/html_charts.py).
        text=[people_number(v, scale, signed=True) for v in values[order]],
        textposition="outside", cliponaxis=False, showlegend=False,
        customdata=hover, hovertemplate="%{customdata}<extra></extra>",
    )
    traces = [trace] if band is None else [trace, _background_band(values, band, order,
                                                                   labels, "", first=True)]
    limit = _padded_limit(shown)
    # Taller by what the extra title lines and the legend take, so the bars keep their rows.
    extra = 20 * max(title.count("<br>") - 1, 0) + (40 if band is not None else 0)
    layout = _layout(140 + ROW_HEIGHT * len(features) + extra, title,
                     left=label_margin(labels), showlegend=band is not None,
                     legend={"orientation": "h", "x": 0, "y": 0, "yanchor": "bottom",
                             "xanchor": "left", "yref": "container"})
    if band is not None:
        layout["margin"]["b"] = 90
    layout["margin"]["t"] = 50 + 20 * max(title.count("<br>"), 1)  # room for each title line
    layout["xaxis"].update(range=[-limit, limit], zeroline=True, zerolinewidth=1.5,
                           title={"text": units})
    return _figure(traces, layout)


def instance_distribution(features: Sequence[str], instance: np.ndarray, order: np.ndarray, *,
                          units: str) -> go.Figure:
    """Instance-driven attributions across patients: one box per feature."""
    instance = np.asarray(instance, dtype=float)
    names = tick_labels([features[j] for j in order])
    traces = [dict(type="box", x=instance[:, j], name=name, orientation="h",
                   boxpoints="outliers", marker={"color": COLOURS["instance"], "size": 4},
                   line={"color": "#8a5a00"}, fillcolor="rgba(230,159,0,0.35)")
              for j, name in zip(order, names, strict=True)]
    layout = _layout(140 + ROW_HEIGHT * len(features),
                     "Instance-driven attributions across patients", left=label_margin(names))
    layout["xaxis"].update(zeroline=True, zerolinewidth=1.5, title={"text": units})
    return _figure(traces, layout)


def sign_disagreement_bars(features: Sequence[str], calibration_vs_instance: np.ndarray,
                           total_vs_instance: np.ndarray) -> go.Figure:
    """Share of patients whose views have opposite signs, per feature, in percent."""
    names = tick_labels(list(features))
    traces = []
    series = (
        ("calibration vs instance", calibration_vs_instance, COLOURS["calibration"], "/"),
        ("total vs instance", total_vs_instance, COLOURS["total"], "x"),
    )
    for label, shares, colour, shape in series:
        percent = 100 * np.asarray(shares, dtype=float)
        traces.append(dict(
            type="bar", x=percent, y=names, orientation="h", name=label,
            marker={"color": colour, "pattern": {"shape": shape, "fgcolor": "white",
                                                 "fillmode": "overlay", "solidity": 0.35}},
            text=[f"{p:.0f}%" for p in percent], textposition="outside", cliponaxis=False,
            hovertemplate="%{y}: %{x:.1f}% of patients<extra>" + label + "</extra>",
        ))
    layout = _layout(160 + 44 * len(names), "How often the views disagree in sign",
                     left=label_margin(names),
                     barmode="group", showlegend=True,
                     legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0})
    layout["margin"]["t"] = 90
    layout["xaxis"].update(range=[0, 115], title={"text": "% of patients with opposite signs"})
    return _figure(traces, layout)


WIDTH_COLOUR = "#555555"
"""A width is no part: the total's grey, as the widths' histogram draws it."""


def set_width_boxes(widths: dict[str, np.ndarray], *, units: str, title: str) -> go.Figure:
    """The patients' interval widths under each calibration set: one grey box per set (the
    Recalibration page), on an axis from 0 so a box's place is the width itself."""
    names = tick_labels(list(widths))
    traces = [dict(type="box", x=np.asarray(values, dtype=float), name=name, orientation="h",
                   boxpoints="outliers", marker={"color": WIDTH_COLOUR, "size": 4},
                   line={"color": "#333333"}, fillcolor="rgba(85,85,85,0.25)")
              for name, values in zip(names, widths.values(), strict=True)]
    layout = _layout(140 + 2 * ROW_HEIGHT * len(names), title, left=label_margin(names))
    layout["xaxis"].update(zeroline=True, zerolinewidth=1.5, title={"text": units})
    return _figure(traces, layout)


def set_bars(features: Sequence[str], values: dict[str, np.ndarray], *, view: str, units: str,
             title: str, order: np.ndarray,
             ranges: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
             scale: float | None = None) -> go.Figure:
    """One patient's part (`view`) under each calibration set: a panel per set side by side,
    the features in `order` and one value scale, in the part's colour (the Recalibration
    page). `ranges`: each set's (low, high) of the part, drawn as whiskers; a bar whose range
    holds 0 is pale and its feature marked ? on the axis when it does so under every set."""
    names = list(values)
    arrays = {name: np.asarray(v, dtype=float) for name, v in values.items()}
    spans = {name: tuple(np.asarray(e, dtype=float) for e in r)
             for name, r in (ranges or {}).items()}
    holds = {name: (spans[name][0] <= 0) & (spans[name][1] >= 0) if name in spans
             else np.zeros(len(features), bool) for name in names}
    everywhere = np.logical_and.reduce([holds[n] for n in names]) if spans else np.zeros(
        len(features), bool)
    labels = tick_labels([feature_label(features[j], False, bool(everywhere[j])) for j in order])
    shown = np.concatenate([*arrays.values(), *(e for s in spans.values() for e in s)])
    limit = _padded_limit(shown)
    if scale is None:
        scale = float(np.max(np.abs(shown), initial=0.0))
    gap = 0.05
    width = (1 - gap * (len(names) - 1)) / len(names)
    traces, axes, titles = [], {}, []
    for k, name in enumerate(names):
        suffix = "" if k == 0 else str(k + 1)
        domain = (k * (width + gap), k * (width + gap) + width)
        part = arrays[name]
        whiskers, span = None, spans.get(name)
        if span is not None:
            whiskers = {"type": "data", "symmetric": False,
                        "array": np.maximum(span[1] - part, 0)[order],
                        "arrayminus": np.maximum(part - span[0], 0)[order], "visible": True,
                        "color": "#111111", "thickness": 1.2, "width": 4}
        hover = [f"<b>{plotly_text(features[j])}</b> under {plotly_text(name)}: "
                 f"{people_number(part[j], scale, signed=True)}"
                 + ("" if span is None else
                    f" (likely range {people_number(span[0][j], scale, signed=True)} to "
                    f"{people_number(span[1][j], scale, signed=True)})") for j in order]
        traces.append(dict(
            type="bar", x=part[order], y=labels, orientation="h", name=plotly_text(name),
            error_x=whiskers, xaxis=f"x{suffix}", yaxis="y", showlegend=False,
            marker={"color": COLOURS[view],
                    "opacity": [UNSETTLED_OPACITY if holds[name][j] else 1.0 for j in order],
                    "line": {"color": "#111111", "width": 0.5}},
            text=[people_number(v, scale, signed=True) for v in part[order]],
            textposition="outside", cliponaxis=False, textfont={"size": 12},
            customdata=hover, hovertemplate="%{customdata}<extra></extra>"))
        axes[f"xaxis{suffix}"] = _axis(domain=domain, anchor="y", range=[-limit, limit],
                                       zeroline=True, zerolinewidth=1.5,
                                       title={"text": units if k == len(names) // 2 else ""})
        titles.append({"text": f"under {plotly_text(name)}", "x": sum(domain) / 2, "y": 1.0,
                       "xref": "paper", "yref": "paper", "xanchor": "center",
                       "yanchor": "bottom", "showarrow": False, "font": {"size": 15}})
    layout = _layout(150 + ROW_HEIGHT * len(features), title, left=label_margin(labels),
                     **axes, annotations=titles)
    return _figure(traces, layout)

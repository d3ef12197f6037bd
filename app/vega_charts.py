"""PROTOTYPE for the chart trial of issue 30: the Patient page's two charts as Vega-Lite (altair,
drawn by Streamlit's own st.altair_chart), read from the same figures app/charts.py builds as
app/html_charts.py draws them: same order, labels, colours, opacities, outlines, whiskers,
bands, numbers and hover words. Chosen by CPDECOMP_CHARTS=vega; html is the default.
"""

from __future__ import annotations

import html
import re

import altair as alt
import pandas as pd
import plotly.graph_objects as go

PANEL_WIDTH = 250
ROW = 26


def _plain(text: object) -> str:
    """A figure's text (plotly markup, entities) as plain text."""
    shown = re.sub(r"<br>", " · ", str(text))
    return html.unescape(re.sub(r"<[^>]+>", "", shown))


def _ranges(error) -> tuple[list[float], list[float]] | None:
    if not error or error.visible is False or error.array is None:
        return None
    plus = [float(v) for v in error.array]
    minus = plus if error.symmetric is not False else [float(v) for v in error.arrayminus]
    return plus, minus


def three_panels(figure: go.Figure) -> alt.HConcatChart:
    """charts.side_by_side_bars as three Vega-Lite panels sharing the feature axis."""
    layout = figure.layout
    bars = [trace for trace in figure.data if trace.type == "bar"]
    bands = {trace.xaxis or "x": trace for trace in figure.data if trace.type == "scatter"}
    labels = [_plain(label) for label in bars[0].y]
    titles = [_plain(a.text) for a in layout.annotations][:len(bars)]
    rows = []
    limit = 1.0
    for panel, trace in enumerate(bars):
        axis = layout[(trace.xaxis or "x").replace("x", "xaxis", 1)]
        low, high = (float(v) for v in axis.range)
        limit = max(abs(low), abs(high))
        opacity, outline = trace.marker.opacity, trace.marker.line.width
        whiskers = _ranges(trace.error_x)
        band = bands.get(trace.xaxis or "x")
        band_ranges = None if band is None else _ranges(band.error_x)
        for i, value in enumerate(float(v) for v in trace.x):
            row = {"panel": panel, "part": _plain(trace.name), "feature": labels[i],
                   "rank": i, "value": value,
                   "zero": 0.0,
                   "opacity": opacity[i] if isinstance(opacity, (list, tuple)) else 1.0,
                   "outline": outline[i] if isinstance(outline, (list, tuple)) else 0.5,
                   "text": None if trace.text is None else _plain(trace.text[i]),
                   "words": _plain(trace.customdata[i]) if trace.customdata is not None
                   else "",
                   "low": None, "high": None, "band_low": None, "band_high": None}
            if whiskers is not None:
                row["low"], row["high"] = value - whiskers[1][i], value + whiskers[0][i]
            if band_ranges is not None:
                row["band_low"] = value - band_ranges[1][i]
                row["band_high"] = value + band_ranges[0][i]
            ends = [value] + [v for v in (row["high"], row["band_high"]) if v is not None]
            row["text_at"] = max(ends) if value >= 0 else min(
                [value] + [v for v in (row["low"], row["band_low"]) if v is not None])
            row["right"] = value >= 0
            rows.append(row)
    data = pd.DataFrame(rows)
    data["edge_low"], data["edge_high"] = -limit, limit  # the x domain, from the data
    colours = [trace.marker.color for trace in bars]
    names = [_plain(trace.name) for trace in bars]
    keyed = [*names, *([_plain(next(iter(bands.values())).name)] if bands else [])]
    key_colours = [*colours, *([next(iter(bands.values())).error_x.color] if bands else [])]
    data["band"] = keyed[-1] if bands else ""
    legend = alt.Color("part:N", scale=alt.Scale(domain=keyed, range=key_colours),
                       legend=alt.Legend(orient="bottom", title=None, direction="horizontal"))
    # The domain from the data (edge_low, edge_high), so that the spec is the same for every
    # patient of a run and only the data changes (the vega-data trial).
    domain = alt.Scale(nice=False, zero=False)
    y = alt.Y("feature:N", sort=alt.EncodingSortField("rank"), title=None)
    panels = []
    for panel, trace in enumerate(bars):
        axis = layout[(trace.xaxis or "x").replace("x", "xaxis", 1)]
        units = _plain(axis.title.text) if axis.title and axis.title.text else None
        base = alt.Chart().transform_filter(alt.datum.panel == panel)
        x = alt.X("value:Q", scale=domain, title=units)
        shown_y = y if panel == 0 else alt.Y("feature:N", sort=alt.EncodingSortField("rank"),
                                              axis=None)
        layers = [
            base.mark_bar(height=16, stroke="#111111").encode(
                x=x, x2="zero:Q", y=shown_y,
                color=legend,
                opacity=alt.Opacity("opacity:Q", scale=None),
                strokeWidth=alt.StrokeWidth("outline:Q", scale=None),
                tooltip=alt.Tooltip("words:N", title=names[panel])),
            base.mark_rule(color="#222222", strokeWidth=1.5).encode(x=alt.datum(0)),
            base.mark_rule(opacity=0).encode(x="edge_low:Q", x2="edge_high:Q"),
        ]
        band = bands.get(trace.xaxis or "x")
        if band is not None:
            layers.insert(0, base.mark_rule(strokeWidth=8).encode(
                x="band_low:Q", x2="band_high:Q", y=shown_y,
                color=alt.Color("band:N", scale=alt.Scale(domain=keyed, range=key_colours),
                                legend=None)))
            layers.append(base.mark_tick(color=band.marker.color, thickness=3, size=16)
                          .encode(x="value:Q", y=shown_y))
        if trace.error_x and trace.error_x.visible:
            layers.append(base.mark_rule(color="#111111", strokeWidth=1.2).encode(
                x="low:Q", x2="high:Q", y=shown_y))
            for end in ("low", "high"):
                layers.append(base.mark_tick(color="#111111", thickness=1.2, size=8).encode(
                    x=f"{end}:Q", y=shown_y))
        layers.append(base.mark_text(align="left", dx=4, fontSize=12).encode(
            x="text_at:Q", y=shown_y, text="text:N").transform_filter(
                alt.datum.right & (alt.datum.text != None)))  # noqa: E711
        layers.append(base.mark_text(align="right", dx=-4, fontSize=12).encode(
            x="text_at:Q", y=shown_y, text="text:N").transform_filter(
                ~alt.datum.right & (alt.datum.text != None)))  # noqa: E711
        panels.append(alt.layer(*layers).properties(
            width=PANEL_WIDTH, height=ROW * len(labels),
            title=alt.TitleParams(titles[panel] if titles else "", fontSize=14,
                                  fontWeight="normal")))
    chart = alt.hconcat(*panels, data=data, spacing=14).resolve_scale(y="shared")
    title = _plain(layout.title.text) if layout.title and layout.title.text else None
    if title:
        chart = chart.properties(title=title)
    return chart.configure_view(stroke=None).configure_axis(labelFontSize=13,
                                                            gridColor="#E5E5E5")


def waterfall(figure: go.Figure) -> alt.LayerChart:
    """charts.width_waterfall as Vega-Lite: outlined boxes for the two widths, steps between."""
    trace, layout = figure.data[0], figure.layout
    low, high = (float(v) for v in layout.xaxis.range)
    looks = {kind: (part.marker.color, part.marker.line.width, part.marker.line.color)
             for kind, part in (("total", trace.totals), ("up", trace.increasing),
                                ("down", trace.decreasing))}
    steps = [float(v) for v in trace.x]
    level = 0.0
    rows = []
    names = [_plain(n) for n in trace.y]
    for i, (label, measure) in enumerate(zip(names, trace.measure, strict=True)):
        if measure == "absolute":
            start, end = 0.0, steps[i]
        elif measure == "total":
            start, end = 0.0, level
        else:
            start, end = level, level + steps[i]
        fill, width, edge = looks["total" if measure in ("absolute", "total") else
                                  "up" if end >= start else "down"]
        level = end
        text = _plain(trace.text[i])
        rows.append({"label": label, "rank": i, "start": start, "end": end, "fill": fill,
                     "edge": edge, "outline": width, "text": text,
                     "right": max(start, end), "words": f"{label}: {text}",
                     "next": names[i + 1] if i < len(names) - 1 else None})
    data = pd.DataFrame(rows)
    data["edge_low"], data["edge_high"] = low, high
    y = alt.Y("label:N", sort=alt.EncodingSortField("rank"), title=None)
    scale = alt.Scale(nice=False, zero=False)
    units = _plain(layout.xaxis.title.text) if layout.xaxis.title else None
    base = alt.Chart(data)
    title = _plain(layout.title.text).split(" · ", 1)
    chart = alt.layer(
        base.mark_bar(height=16).encode(
            x=alt.X("start:Q", scale=scale, title=units), x2="end:Q", y=y,
            color=alt.Color("fill:N", scale=None), stroke=alt.Stroke("edge:N", scale=None),
            strokeWidth=alt.StrokeWidth("outline:Q", scale=None),
            tooltip=alt.Tooltip("words:N", title=" ")),
        base.mark_rule(color="#222222", strokeWidth=1.5).encode(x=alt.datum(0)),
        base.mark_rule(opacity=0).encode(x="edge_low:Q", x2="edge_high:Q"),
        base.mark_text(align="left", dx=4, fontSize=12).encode(x="right:Q", y=y, text="text:N"),
        base.mark_rule(color="#999999", strokeDash=[2, 2]).encode(
            x="end:Q", y=y, y2="next:N").transform_filter(alt.datum.next != None),  # noqa: E711
    ).properties(width=3 * PANEL_WIDTH + 28, height=ROW * len(rows),
                 title=alt.TitleParams(title[0], subtitle=title[1:] or alt.Undefined,
                                       anchor="start"))
    return chart.configure_view(stroke=None).configure_axis(labelFontSize=13,
                                                            gridColor="#E5E5E5")


def split(chart: alt.TopLevelMixin) -> tuple[dict, pd.DataFrame]:
    """(the chart's Vega-Lite spec without its data, the data): the spec is the same for every
    patient of a run, so Streamlit's element can keep its view and change only the data."""
    spec = chart.to_dict()
    spec.pop("datasets", None)
    spec.pop("data", None)
    for view in spec.get("layer", []):
        view.pop("data", None)
    return spec, chart.data

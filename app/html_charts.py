"""The dashboard's charts as plain HTML and CSS, drawn from the figures app/charts.py builds.

app/charts.py is the one home of what a chart shows (order, labels, colours, whiskers, bands,
hover words); this module draws the Patient and Cohort pages' figures (the side-by-side
panels, one vector's bars, the waterfall, the widths' histogram, the instance-driven parts'
box plots, the sign-disagreement bars) without plotly: positioned boxes whose left edge and
width are percentages of the panel, so they follow the page's width with no script. The pages
draw them with widgets.html_view: plotly drawing them was about half of the browser's work per
patient switch, and on the Cohort page its first drawing in a browser session made the first
visit slower than the next ones (docs/benchmarks/dashboard.md). The case summary a clinician
downloads uses it too: a page of about 25 KB with no JavaScript (with plotly.js inlined it was
4.8 MB), which opens anywhere.

Every text comes from the figure, which escaped text from users for plotly; it is read back and
escaped again for HTML, keeping only the figures' own markup (line breaks, subtitles). A bar's
hover words are a box its row shows while the pointer is on the row (CSS only): the whole row
answers, so a bar too short to point at still has its words.

Why not a chart library (issue 30: "charts by a library where it serves as well", measured on
2026-12-04, docs/benchmarks/dashboard.md, "Issue 30: Vega-Lite against these charts"): the
Patient page's two charts as faithful Vega-Lite (same order, labels, colours, whiskers, bands,
numbers, legend; commit 98e606d, `python benchmarks/dashboard.py --models "" --charts
html,vega-data,vega-spec,vega`), one server per kind, one chromium, 60 Next clicks each in
alternating rounds, until the page settled: drawn by Streamlit's `st.altair_chart` a switch took
452 ms against these charts' 194 ms (**2.33×**, the browser's work 2.06×; altair's conversion
and validation of the spec alone is 0.1-0.7 s of the server per chart and switch); with the
spec converted once per patient and drawn by `st.vega_lite_chart` 1.29× (work 1.43×); with one
spec per run and only the data sent, 1.16× (work 1.24×). The target was ≤ 1.2×: `st.altair_chart`
is far from it, and the one form near it is at the edge on the time and over it on the browser's
work, which is what N browsers on one machine share. The case summary's download also needs
charts with no script, which no Vega-Lite form gives. So these charts stay.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from cpdecomp.app.summaries import WIDTH_TIE
from cpdecomp.app.text import MINUS, people_number

CSS = """
.cp-chart { font: 13px/1.25 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222;
            margin: 0.5rem 0 1.5rem; }
.cp-chart .cp-title { font-size: 15px; margin-bottom: 0.4rem; }
.cp-chart .cp-title small { display: block; font-size: 12px; color: #555; }
.cp-chart .cp-grid { display: grid; column-gap: 14px; align-items: end; }
.cp-chart .cp-head { text-align: center; font-size: 14px; padding-bottom: 4px; }
.cp-chart .cp-labels div, .cp-chart .cp-row { height: 26px; }
.cp-chart .cp-labels div { text-align: right; white-space: nowrap; line-height: 26px; }
.cp-chart .cp-panel { position: relative; border-bottom: 1px solid #888; }
.cp-chart .cp-row { position: relative; border-top: 1px solid #e5e5e5; }
.cp-chart .cp-zero { position: absolute; top: 0; bottom: 0; border-left: 1.5px solid #222; }
.cp-chart .cp-bar { position: absolute; top: 5px; height: 16px; box-sizing: border-box; }
.cp-chart .cp-row:hover { background: rgba(0, 0, 0, 0.05); }
.cp-chart .cp-tip { display: none; position: absolute; top: 24px; z-index: 30; width: max-content;
                    max-width: 340px; padding: 4px 8px; background: #fff; color: #222;
                    border: 1px solid #999; border-radius: 4px; font-size: 12px;
                    box-shadow: 0 2px 6px rgba(0, 0, 0, 0.2); pointer-events: none; }
.cp-chart .cp-row:hover .cp-tip { display: block; }
.cp-chart .cp-whisker { position: absolute; top: 12px; height: 0; border-top: 1.2px solid #111; }
.cp-chart .cp-whisker::before, .cp-chart .cp-whisker::after { content: ""; position: absolute;
    top: -5px; height: 8px; border-left: 1.2px solid #111; }
.cp-chart .cp-whisker::before { left: 0; }
.cp-chart .cp-whisker::after { right: 0; }
.cp-chart .cp-band { position: absolute; top: 9px; height: 8px; }
.cp-chart .cp-tick { position: absolute; top: 5px; height: 16px; border-left: 3px solid; }
.cp-chart .cp-value { position: absolute; top: 5px; font-size: 12px; white-space: nowrap; }
.cp-chart .cp-axis { position: relative; height: 18px; font-size: 12px; color: #444; }
.cp-chart .cp-axis span { position: absolute; transform: translateX(-50%); white-space: nowrap; }
.cp-chart .cp-units { text-align: center; font-size: 12px; color: #444; }
.cp-chart .cp-legend { margin-top: 6px; font-size: 12px; }
.cp-chart .cp-legend span { display: inline-block; margin-right: 1rem; }
.cp-chart .cp-legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px;
                         vertical-align: -2px; }
.cp-chart .cp-connector { position: absolute; top: 21px; height: 10px;
                          border-left: 1px dotted #999; }
.cp-chart .cp-plot { display: grid; grid-template-columns: max-content 1fr; column-gap: 8px; }
.cp-chart .cp-yaxis { position: relative; font-size: 12px; color: #444; min-width: 2.2em; }
.cp-chart .cp-yaxis span { position: absolute; right: 0; transform: translateY(50%); }
.cp-chart .cp-ytitle { font-size: 12px; color: #444; text-align: right; }
.cp-chart .cp-area { position: relative; height: 220px; border-bottom: 1px solid #888; }
.cp-chart .cp-hline { position: absolute; left: 0; right: 0; border-top: 1px solid #e5e5e5; }
.cp-chart .cp-col { position: absolute; top: 0; bottom: 0; }
.cp-chart .cp-col:hover { background: rgba(0, 0, 0, 0.05); }
.cp-chart .cp-col:hover .cp-tip { display: block; }
.cp-chart .cp-col .cp-tip { top: 4px; }
.cp-chart .cp-col .cp-bar { top: auto; bottom: 0; left: 0; right: 0; height: auto; }
.cp-chart .cp-mark { position: absolute; top: 0; bottom: 0; border-left: 2px #111; z-index: 2;
                     pointer-events: none; }
.cp-chart .cp-marks { position: relative; font-size: 12px; }
.cp-chart .cp-marks span { position: absolute; white-space: nowrap; }
.cp-chart .cp-reach { position: absolute; top: 12px; height: 0; border-top: 1px solid; }
.cp-chart .cp-quart { position: absolute; top: 4px; height: 18px; box-sizing: border-box; }
.cp-chart .cp-median { position: absolute; top: 4px; height: 18px; border-left: 2px solid; }
.cp-chart .cp-dot { position: absolute; top: 10px; width: 5px; height: 5px; margin-left: -2.5px;
                    border-radius: 50%; }
.cp-chart.cp-pairs .cp-labels div, .cp-chart.cp-pairs .cp-row { height: 40px; }
.cp-chart.cp-pairs .cp-labels div { line-height: 40px; }
.cp-chart.cp-pairs .cp-bar { height: 14px; }
.cp-chart.cp-pairs .cp-value { line-height: 14px; }
.cp-chart.cp-pairs .cp-tip { top: 38px; }
.cp-table-wrap { overflow-x: auto; margin: 0.25rem 0 1rem; }
.cp-table { border-collapse: collapse; width: 100%;
            font: 14px/1.3 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; }
.cp-table th, .cp-table td { padding: 5px 8px; border-bottom: 1px solid #e5e5e5;
                             text-align: right; font-variant-numeric: tabular-nums; }
.cp-table th { font-weight: 600; color: #444; border-bottom: 1px solid #999;
               vertical-align: bottom; }
.cp-table th[title] { text-decoration: underline dotted #999; cursor: help; }
.cp-table .cp-text { text-align: left; }
.cp-table tbody tr:hover { background: rgba(0, 0, 0, 0.04); }
"""
"""The charts' (and the table's) style sheet, once per page (widgets.chart_styles)."""

_MARKUP = re.compile(r"(</?(?:br|sup|b|i)>)")
"""The markup the figures' own texts use (titles' line breaks and subtitles); anything else in
a text, such as a tag typed into a feature name, is shown as text."""
_TAG_FOR = {"<sup>": "<small>", "</sup>": "</small>"}


def _text(plotly_text: object) -> str:
    """A figure's text as HTML: the figures' own markup kept, every other piece read as plotly
    text (entities) and escaped again, so no text from a user can become markup."""
    shown = "".join(_TAG_FOR.get(piece, piece) if _MARKUP.fullmatch(piece)
                    else html.escape(html.unescape(piece))
                    for piece in _MARKUP.split(str(plotly_text)))
    # A title's second line is plotly's <br><sup>: a line of smaller print of its own here.
    return shown.replace("<br><small>", "<small>")


def _tip(words: str, at: float) -> str:
    """A row's hover box (HTML words) under the bar's far end at `at` % of the panel: to its
    right, or to its left past the panel's middle, so that it stays on the page."""
    side = f"left:{at:.3f}%" if at <= 55 else f"right:{100 - at:.3f}%"
    return f'<span class="cp-tip" style="{side}">{words}</span>'


def _round_step(raw: float, multiples: Sequence[float] = (1, 2, 5, 10)) -> float:
    """The smallest round number (a multiple of a power of ten) at least `raw` (> 0)."""
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in multiples if m * power >= raw)


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values inside [low, high], about `count` of them (1, 2 or 5 times a power of
    ten apart, as an axis a person reads)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    step = _round_step((high - low) / count)
    first = math.ceil(low / step) * step
    return [round(first + i * step, 12) for i in range(int((high - first) / step) + 1)]


def _tick_text(value: float) -> str:
    return f"{value:g}".replace("-", MINUS)


class _Scale:
    """Data values to percentages of a panel's width."""

    def __init__(self, low: float, high: float) -> None:
        self.low, self.span = low, (high - low) or 1.0

    def __call__(self, value: float) -> float:
        return 100 * (value - self.low) / self.span


def _box(left: float, right: float) -> str:
    return f"left:{min(left, right):.3f}%;width:{abs(right - left):.3f}%"


AXIS_EDGE = 0.06
"""No axis number within this share of a panel's width from either end: the next panel's first
number would run into it."""


def axis_ticks(low: float, high: float) -> list[float]:
    """The numbers an axis from `low` to `high` shows: round ones away from the panel's ends
    (AXIS_EDGE), chosen among those, so that an edge never takes the round numbers an axis
    has (nice_ticks(-5.6, 5.6) is −5, 0, 5, and ±5 are at the edges: the axis showed only 0),
    and always 0 when it is inside, where the bars start."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    room = (high - low) * AXIS_EDGE
    ticks = nice_ticks(low + room, high - room)
    if low <= 0 <= high and 0 not in ticks:
        ticks = sorted([*ticks, 0.0])
    return ticks


def _axis(scale: _Scale, low: float, high: float) -> str:
    return ('<div class="cp-axis">' + "".join(
        f'<span style="left:{scale(t):.3f}%">{_tick_text(t)}</span>'
        for t in axis_ticks(low, high)) + "</div>")


def _ranges(error) -> tuple[list[float], list[float]] | None:
    """(plus, minus) of a figure's error bar (a whisker, or a band's range) at each point, or
    None where the trace has none. Read once per trace: plotly's property access is slow
    enough that reading it per bar was two thirds of drawing a chart."""
    if not error or error.visible is False or error.array is None:
        return None
    plus = [float(v) for v in error.array]
    minus = plus if error.symmetric is not False else [float(v) for v in error.arrayminus]
    return plus, minus


def _span(scale: _Scale, centre: float, ranges: tuple[list[float], list[float]] | None,
          index: int) -> str | None:
    """The box of an error bar about `centre` at point `index`, or None without one."""
    if ranges is None:
        return None
    return _box(scale(centre - ranges[1][index]), scale(centre + ranges[0][index]))


def _reach(value: float, index: int,
           *ranges: tuple[list[float], list[float]] | None) -> float:
    """How far a bar of `value` reaches on its own side of 0 with its error bars (whisker,
    band) at point `index`: where its number goes, so that it sits on neither."""
    if value >= 0:
        return max([value, *(value + r[0][index] for r in ranges if r is not None)])
    return min([value, *(value - r[1][index] for r in ranges if r is not None)])


def _title(layout) -> str:
    return (f'<div class="cp-title">{_text(layout.title.text)}</div>'
            if layout.title and layout.title.text else "")


def _units(axis) -> str:
    return (f'<div class="cp-units">{_text(axis.title.text)}</div>'
            if axis.title and axis.title.text else "")


def _one_panel(labels: str, rows: Sequence[str], scale: _Scale, low: float, high: float,
               axis) -> str:
    """A panel of rows beside their labels (HTML), with the axis and its units under it."""
    return ('<div class="cp-grid" style="grid-template-columns:max-content 1fr">'
            f'<div class="cp-labels">{labels}</div>'
            f'<div class="cp-panel">{"".join(rows)}</div>'
            f"<div></div><div>{_axis(scale, low, high)}{_units(axis)}</div></div>")


def three_panels(figure: go.Figure) -> str:
    """The side-by-side panels of charts.side_by_side_bars, or the one panel of
    charts.vector_bars, as HTML."""
    layout = figure.layout
    bars = [trace for trace in figure.data if trace.type == "bar"]
    bands = {trace.xaxis or "x": trace for trace in figure.data if trace.type == "scatter"}
    labels = list(bars[0].y)
    panels, axes = [], []
    for trace in bars:
        axis = layout[(trace.xaxis or "x").replace("x", "xaxis", 1)]
        low, high = (float(v) for v in axis.range)
        scale = _Scale(low, high)
        zero = scale(0.0)
        opacity = trace.marker.opacity
        outline = trace.marker.line.width
        colour = trace.marker.color
        texts, words = trace.text, trace.customdata
        whiskers = _ranges(trace.error_x)
        band = bands.get(trace.xaxis or "x")
        band_ranges = None if band is None else _ranges(band.error_x)
        band_colour, tick_colour = ((band.error_x.color, band.marker.color) if band is not None
                                    else (None, None))
        rows = []
        for i, value in enumerate(float(v) for v in trace.x):
            pale = opacity[i] if isinstance(opacity, Sequence) else (opacity or 1.0)
            line = outline[i] if isinstance(outline, Sequence) else (outline or 0.5)
            cells = [f'<div class="cp-zero" style="left:{zero:.3f}%"></div>']
            band_box = _span(scale, value, band_ranges, i)
            if band_box:  # the reference sample's range, under the bar
                cells.append(f'<div class="cp-band" style="background:{band_colour};'
                             f'{band_box}"></div>')
            cells.append(
                f'<div class="cp-bar" style="{_box(zero, scale(value))};'
                f'background:{colour};opacity:{pale:g};border:{line:g}px solid #111">'
                "</div>")
            whisker = _span(scale, value, whiskers, i)
            if whisker:
                cells.append(f'<div class="cp-whisker" style="{whisker}"></div>')
            if band is not None:
                cells.append(f'<div class="cp-tick" style="left:{scale(value):.3f}%;'
                             f'border-color:{tick_colour}"></div>')
            if texts is not None:  # past the bar, its whisker and its band
                reach = _reach(value, i, whiskers, band_ranges)
                side = (f"left:calc({scale(reach):.3f}% + 4px)" if value >= 0 else
                        f"right:calc({100 - scale(reach):.3f}% + 4px)")
                cells.append(f'<span class="cp-value" style="{side}">'
                             f"{_text(texts[i])}</span>")
            if words is not None:
                cells.append(_tip(_text(words[i]), scale(value)))
            rows.append(f'<div class="cp-row">{"".join(cells)}</div>')
        panels.append(f'<div class="cp-panel">{"".join(rows)}</div>')
        axes.append(_axis(scale, low, high) + _units(axis))
    titles = [_text(a.text) for a in layout.annotations][:len(bars)]
    columns = "max-content " + " ".join(["1fr"] * len(bars))
    label_cells = "".join(f"<div>{_text(label)}</div>" for label in labels)
    heads = ("<div></div>" + "".join(f'<div class="cp-head">{t}</div>' for t in titles)
             if titles else "")  # a one-panel figure has its title only
    grid = (f'<div class="cp-grid" style="grid-template-columns:{columns}">' + heads
            + f'<div class="cp-labels">{label_cells}</div>' + "".join(panels)
            + "<div></div>" + "".join(f"<div>{a}</div>" for a in axes) + "</div>")
    # One entry per part, and one for the reference sample's bands of both panels.
    keyed = [trace for trace in [*bars, *list(bands.values())[:1]]
             if trace.showlegend is not False]
    legend = "".join(
        f'<span><i style="background:{trace.marker.color}"></i>{_text(trace.name)}</span>'
        for trace in keyed)
    legend = f'<div class="cp-legend">{legend}</div>' if legend else ""
    return f'<div class="cp-chart" role="figure">{_title(layout)}{grid}{legend}</div>'


def waterfall(figure: go.Figure) -> str:
    """The waterfall of charts.width_waterfall, as HTML: the featureless width and the
    patient's as outlined boxes from 0, each feature a step from where the last one ended."""
    trace = figure.data[0]
    layout = figure.layout
    low, high = (float(v) for v in layout.xaxis.range)
    scale = _Scale(low, high)
    zero = scale(0.0)
    steps = [float(v) for v in trace.x]
    texts, names = list(trace.text), list(trace.y)
    # Each look read once (plotly's property access is slow): fill, outline width and colour.
    looks = {kind: (part.marker.color, part.marker.line.width, part.marker.line.color)
             for kind, part in (("total", trace.totals), ("up", trace.increasing),
                                ("down", trace.decreasing))}
    level = 0.0
    rows, labels = [], []
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
        right = max(start, end)
        cells = [f'<div class="cp-zero" style="left:{zero:.3f}%"></div>',
                 f'<div class="cp-bar" style="{_box(scale(start), scale(end))};'
                 f'background:{fill};border:{width:g}px solid {edge}"></div>',
                 f'<span class="cp-value" style="left:calc({scale(right):.3f}% + 4px)">'
                 f'{_text(texts[i])}</span>',
                 _tip(f"{_text(label)}: {_text(texts[i])}", scale(right))]
        if i < len(names) - 1:
            cells.append(f'<div class="cp-connector" style="left:{scale(end):.3f}%"></div>')
        rows.append(f'<div class="cp-row">{"".join(cells)}</div>')
        labels.append(f"<div>{_text(label)}</div>")
    grid = _one_panel("".join(labels), rows, scale, low, high, layout.xaxis)
    return f'<div class="cp-chart" role="figure">{_title(layout)}{grid}</div>'


def _padded(low: float, high: float, share: float = 0.04) -> tuple[float, float]:
    pad = (high - low) * share or max(abs(low), abs(high), 1.0) * share
    return low - pad, high + pad


def _bins(values: np.ndarray, low: float, high: float, count: int) -> np.ndarray:
    """Bin edges about `count` bins over the values, a round width apart (as plotly's own
    binning): tied values (a family whose widths are all equal) make one bin of the display's
    1/count, centred on them."""
    vmin, vmax = float(values.min()), float(values.max())
    if vmax - vmin <= WIDTH_TIE * max(abs(vmin), abs(vmax)):
        half = (high - low) / count / 2
        return np.array([vmin - half, vmin + half])
    step = _round_step((vmax - vmin) / count, (1, 2, 2.5, 5, 10))
    first = math.floor(vmin / step) * step
    edges = first + step * np.arange(math.ceil((vmax - first) / step) + 2)
    return edges[: int(np.searchsorted(edges, vmax, side="right")) + 1]


def histogram(figure: go.Figure) -> str:
    """charts.width_histogram as HTML: the patients per width bin, with its vertical lines
    (the featureless width, the flag threshold, this patient) and their labels above."""
    trace, layout = figure.data[0], figure.layout
    values = np.asarray(trace.x, dtype=float)
    values = values[np.isfinite(values)]
    lines = [(float(shape.x0), _text(note.text), shape.line.dash or "solid")
             for shape, note in zip(layout.shapes or (), layout.annotations or (), strict=True)]
    if values.size == 0:
        return f'<div class="cp-chart" role="figure">{_title(layout)}</div>'
    spots = [*values, *(x for x, _, _ in lines)]
    low, high = _padded(min(spots), max(spots))
    edges = _bins(values, low, high, 30)
    low, high = min(low, float(edges[0])), max(high, float(edges[-1]))
    counts = np.histogram(values, edges)[0]
    scale = _Scale(low, high)
    # Whole numbers of patients, up to the first tick at or above the tallest bar.
    most = int(counts.max())
    step = max(_round_step(most / 4), 1.0)
    ceiling = step * math.ceil(most / step)
    top = [step * k for k in range(int(ceiling / step) + 1)]
    scale_of_values = float(np.max(np.abs(values)))
    columns = []
    for left, right, count in zip(edges[:-1], edges[1:], counts, strict=True):
        if not count:
            continue
        at = scale((left + right) / 2)
        inside = values[(values >= left) & (values <= right)]
        patients = f"{count} patient" + ("s" if count != 1 else "")
        # A bin of one value (tied widths) names the value, not the bin's made-up edges.
        words = (f"width {people_number(float(inside[0]), scale_of_values)}: {patients}"
                 if inside.size and inside.min() == inside.max() else
                 f"widths {people_number(left, scale_of_values)} to "
                 f"{people_number(right, scale_of_values)}: {patients}")
        columns.append(
            f'<div class="cp-col" style="{_box(scale(left), scale(right))}">'
            f'<div class="cp-bar" style="height:{100 * count / ceiling:.3f}%;'
            f'background:{trace.marker.color};border:1px solid {trace.marker.line.color}">'
            f"</div>{_tip(words, at)}</div>")
    dash = {"dash": "dashed", "dot": "dotted"}
    marks = "".join(f'<div class="cp-mark" style="left:{scale(x):.3f}%;border-left-style:'
                    f'{dash.get(style, "solid")}"></div>' for x, _, style in lines)
    # Each line's label above the plot; a label close to the one before goes a line higher,
    # so that two lines close together (the featureless width and the threshold) stay legible.
    placed: list[tuple[float, int]] = []
    labels = []
    for x, label, _ in sorted(lines):
        at = scale(x)
        level = 1 if placed and placed[-1][1] == 0 and at - placed[-1][0] < 18 else 0
        placed.append((at, level))
        anchor = "0" if at < 12 else "-100%" if at > 88 else "-50%"
        labels.append(f'<span style="left:{at:.3f}%;bottom:{16 * level}px;'
                      f'transform:translateX({anchor})">{label}</span>')
    levels = 1 + max((level for _, level in placed), default=0)
    y_title = layout.yaxis.title.text if layout.yaxis.title else ""
    y_ticks = "".join(f'<span style="bottom:{100 * t / ceiling:.3f}%">{t:g}</span>'
                      for t in top)
    grid_lines = "".join(f'<div class="cp-hline" style="bottom:{100 * t / ceiling:.3f}%"></div>'
                         for t in top[1:])
    plot = ('<div class="cp-plot">'
            f'<div class="cp-ytitle">{_text(y_title)}</div>'
            f'<div class="cp-marks" style="height:{16 * levels + 10}px">{"".join(labels)}</div>'
            f'<div class="cp-yaxis">{y_ticks}</div>'
            f'<div class="cp-area">{grid_lines}{"".join(columns)}{marks}</div>'
            f"<div></div><div>{_axis(scale, low, high)}{_units(layout.xaxis)}</div></div>")
    return f'<div class="cp-chart" role="figure">{_title(layout)}{plot}</div>'


def boxes(figure: go.Figure) -> str:
    """charts.instance_distribution as HTML: per feature, a box over the middle half of the
    patients' values with its median, whiskers to the farthest values within 1.5 box lengths,
    and a dot per value past them (plotly's rules, quartiles by linear interpolation)."""
    layout = figure.layout
    traces = list(figure.data)
    data = [np.asarray(trace.x, dtype=float) for trace in traces]
    data = [x[np.isfinite(x)] for x in data]
    spots = [0.0, *(float(v) for x in data if x.size for v in (x.min(), x.max()))]
    low, high = _padded(min(spots), max(spots))
    scale = _Scale(low, high)
    zero = scale(0.0)
    size = max(abs(low), abs(high))
    rows, labels = [], []
    for trace, x in zip(traces, data, strict=True):
        labels.append(f"<div>{_text(trace.name)}</div>")
        cells = [f'<div class="cp-zero" style="left:{zero:.3f}%"></div>']
        if x.size:
            q1, median, q3 = (float(v) for v in np.percentile(x, [25, 50, 75]))
            reach = 1.5 * (q3 - q1)
            inside = x[(x >= q1 - reach) & (x <= q3 + reach)]
            first, last = float(inside.min()), float(inside.max())
            line, fill = trace.line.color, trace.fillcolor
            dot = trace.marker.color
            cells.append(f'<div class="cp-reach" style="{_box(scale(first), scale(last))};'
                         f'border-color:{line}"></div>')
            cells.append(f'<div class="cp-quart" style="{_box(scale(q1), scale(q3))};'
                         f'background:{fill};border:1px solid {line}"></div>')
            cells.append(f'<div class="cp-median" style="left:{scale(median):.3f}%;'
                         f'border-color:{line}"></div>')
            # One dot per place on the panel (many patients can share one).
            outside = np.unique(np.round([scale(v) for v in x[(x < first) | (x > last)]], 1))
            cells.extend(f'<div class="cp-dot" style="left:{at:.1f}%;background:{dot}"></div>'
                         for at in outside)

            def number(value: float) -> str:
                return people_number(value, size, signed=True)

            words = (f"{_text(trace.name)}: median {number(median)}; middle half of the "
                     f"patients {number(q1)} to {number(q3)}; all {x.size} from "
                     f"{number(float(x.min()))} to {number(float(x.max()))}")
            cells.append(_tip(words, scale(q3)))
        rows.append(f'<div class="cp-row">{"".join(cells)}</div>')
    grid = _one_panel("".join(labels), rows, scale, low, high, layout.xaxis)
    return f'<div class="cp-chart" role="figure">{_title(layout)}{grid}</div>'


def _pattern(colour: str, shape: str) -> str:
    """A bar's fill with plotly's pattern (white stripes over the colour): the pattern, not
    the colour alone, tells the two series apart."""
    stripes = "rgba(255, 255, 255, 0.55) 0 2px, transparent 2px 6px"
    if shape == "x":
        return (f"repeating-linear-gradient(45deg, {stripes}), "
                f"repeating-linear-gradient(-45deg, {stripes}), {colour}")
    return f"repeating-linear-gradient(45deg, {stripes}), {colour}"


def grouped_bars(figure: go.Figure) -> str:
    """charts.sign_disagreement_bars as HTML: per feature one bar per series (the first on
    top), each with its pattern and its number, and a legend."""
    layout = figure.layout
    traces = list(figure.data)
    low, high = (float(v) for v in layout.xaxis.range)
    scale = _Scale(low, high)
    zero = scale(0.0)
    looks = [_pattern(trace.marker.color, trace.marker.pattern.shape or "") for trace in traces]
    series = [([float(v) for v in trace.x], list(trace.text or ())) for trace in traces]
    names = list(traces[0].y)
    rows = []
    for i, name in enumerate(names):
        cells = [f'<div class="cp-zero" style="left:{zero:.3f}%"></div>']
        words = []
        for k, (trace, look, (values, texts)) in enumerate(
                zip(traces, looks, series, strict=True)):
            top = 5 + 16 * k
            cells.append(f'<div class="cp-bar" style="{_box(zero, scale(values[i]))};top:{top}px;'
                         f'background:{look};border:0.5px solid #111"></div>')
            if texts:
                cells.append(f'<span class="cp-value" style="top:{top}px;left:calc('
                             f'{scale(values[i]):.3f}% + 4px)">{_text(texts[i])}</span>')
            words.append(f"{_text(trace.name)}: {values[i]:.1f}% of patients")
        cells.append(_tip(f"{_text(name)}<br>" + "<br>".join(words),
                          max(scale(v[0][i]) for v in series)))
        rows.append(f'<div class="cp-row">{"".join(cells)}</div>')
    labels = "".join(f"<div>{_text(name)}</div>" for name in names)
    legend = "".join(f'<span><i style="background:{look}"></i>{_text(trace.name)}</span>'
                     for trace, look in zip(traces, looks, strict=True))
    grid = _one_panel(labels, rows, scale, low, high, layout.xaxis)
    return (f'<div class="cp-chart cp-pairs" role="figure">{_title(layout)}'
            f'<div class="cp-legend">{legend}</div>{grid}</div>')


def chart(figure: go.Figure) -> str:
    """The figure as HTML, by its traces: a waterfall, a histogram, box plots, grouped bars
    (more than one bar trace on one axis), or side-by-side panels and one vector's bars."""
    kind = figure.data[0].type if figure.data else None
    if kind == "waterfall":
        return waterfall(figure)
    if kind == "histogram":
        return histogram(figure)
    if kind == "box":
        return boxes(figure)
    if figure.layout.barmode == "group":
        return grouped_bars(figure)
    return three_panels(figure)


@dataclass(frozen=True)
class Column:
    """How table() shows a frame's column: its header, the words its header shows when
    pointed at, and for a number column its decimals (None: text)."""

    header: str
    help: str | None = None
    decimals: int | None = None


def _cell(value: object, decimals: int | None) -> str:
    if decimals is None:
        return html.escape("" if value is None else str(value))
    number = float(value)  # type: ignore[arg-type]
    if not np.isfinite(number):
        return ""
    return f"{number:.{decimals}f}".replace("-", MINUS)


def table(frame: pd.DataFrame, columns: Mapping[str, Column]) -> str:
    """A frame as a plain HTML table, every column in `columns` (by the frame's column name),
    in the frame's order; text escaped. Drawn like the charts: on the Patient page the data
    grid (a canvas) was the largest part of the browser's work per switch once the charts
    were HTML."""
    shown = [(name, columns[name]) for name in frame.columns]
    head = "".join(
        f'<th class="{"cp-text" if column.decimals is None else "cp-number"}"'
        + (f' title="{html.escape(column.help, quote=True)}"' if column.help else "")
        + f">{html.escape(column.header)}</th>" for _, column in shown)
    body = "".join(
        "<tr>" + "".join(
            f'<td class="{"cp-text" if column.decimals is None else "cp-number"}">'
            f"{_cell(value, column.decimals)}</td>"
            for (_, column), value in zip(shown, row, strict=True)) + "</tr>"
        for row in frame.itertuples(index=False, name=None))
    return (f'<div class="cp-table-wrap"><table class="cp-table"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")

"""app/html_charts.py draws what app/charts.py's figures hold: checked against the figures (and
the numbers they were built from), with the HTML read back by Python's own parser."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from cpdecomp.app import html_charts
from cpdecomp.app.charts import (
    BACKGROUND_LEGEND,
    COLOURS,
    UNSETTLED_OPACITY,
    side_by_side_bars,
    width_waterfall,
)


class Boxes(HTMLParser):
    """Every element's class, style (as a dict) and text, in document order."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.items: list[dict] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        style = dict(part.split(":", 1) for part in (found.get("style") or "").split(";")
                     if ":" in part)
        self.items.append({"tag": tag, "class": found.get("class") or "", "style": style,
                           "text": ""})

    def handle_data(self, data: str) -> None:
        if self.items:
            self.items[-1]["text"] += data

    def of(self, name: str) -> list[dict]:
        return [item for item in self.items if name in item["class"].split()]


def hover_boxes(page: str) -> list[str]:
    """The HTML inside each row's hover box, in document order."""
    return re.findall(r'<span class="cp-tip"[^>]*>(.*?)</span>', page)


def words(text: str) -> str:
    """A text's words as a reader sees them: line breaks as spaces, tags dropped, entities
    read."""
    return " ".join(html.unescape(re.sub("<[^>]+>", "", text.replace("<br>", " "))).split())


def percent(item: dict, key: str) -> float:
    return float(item["style"][key].rstrip("%"))


def span(item: dict) -> tuple[float, float]:
    left = percent(item, "left")
    return left, left + percent(item, "width")


FEATURES = ["age", "bmi", "bp <b>x</b>"]
CALIBRATION = np.array([1.0, -2.0, 0.5])
INSTANCE = np.array([-0.5, 3.0, 0.25])
TOTAL = CALIBRATION + INSTANCE


def at(value: float, low: float, high: float) -> float:
    return 100 * (value - low) / (high - low)


def test_each_bar_spans_zero_to_its_value_in_the_figures_order_colours_and_range() -> None:
    figure = side_by_side_bars(FEATURES, CALIBRATION, INSTANCE, TOTAL, units="days",
                               disagree=np.array([False, True, False]))
    page = html_charts.three_panels(figure)
    boxes = Boxes(page)
    bars = boxes.of("cp-bar")
    tips = hover_boxes(page)
    n = len(FEATURES)
    assert len(bars) == len(tips) == 3 * n
    traces = [t for t in figure.data if t.type == "bar"]
    for panel, trace in enumerate(traces):
        axis = figure.layout[trace.xaxis.replace("x", "xaxis", 1)]
        low, high = axis.range
        for i, value in enumerate(trace.x):
            left, right = span(bars[panel * n + i])
            assert sorted([left, right]) == pytest.approx(
                sorted([at(0.0, low, high), at(value, low, high)]), abs=1e-3)
            assert trace.marker.color in bars[panel * n + i]["style"]["background"]
            # The hover's words, shown on the bar's row: the same words plotly's hover shows.
            assert words(tips[panel * n + i]) == words(trace.customdata[i])
    # The figure's order (by |total|), its marks, and a name's markup shown as text.
    labels = [item["text"] for item in boxes.items
              if item["tag"] == "div" and not item["class"] and item["text"]]
    assert labels[:n] == [re.sub("&lt;", "<", re.sub("&gt;", ">", str(y)))
                          for y in traces[0].y]
    assert labels[0].startswith("bmi") and "⇄" in labels[0]
    assert "bp <b>x</b>" in labels  # the tags are text, not bold type
    assert [colour in html_charts.three_panels(figure) for colour in
            (COLOURS["calibration"], COLOURS["instance"], COLOURS["total"])] == [True] * 3
    # Heavy outline on a ⇄ feature's two parts, not on its total.
    assert bars[0]["style"]["border"].startswith("2.5px")
    assert bars[n]["style"]["border"].startswith("2.5px")
    assert bars[2 * n]["style"]["border"].startswith("0.5px")


def number_at(item: dict) -> float:
    """Where a bar's number starts (left of it) or ends (right of it), in % of the panel."""
    side = "left" if "left" in item["style"] else "right"
    found = float(re.match(r"calc\(([\d.]+)% \+ 4px\)", item["style"][side]).group(1))
    return found if side == "left" else 100 - found


def test_whiskers_pale_bars_and_every_bar_has_its_number_past_its_whisker() -> None:
    low = CALIBRATION - np.array([0.5, 0.2, 1.0])
    high = CALIBRATION + np.array([0.3, 0.4, 0.2])  # the third range holds 0: pale
    figure = side_by_side_bars(FEATURES, CALIBRATION, INSTANCE, TOTAL, units="days",
                               calibration_range=(low, high))
    boxes = Boxes(html_charts.three_panels(figure))
    trace = figure.data[0]
    axis_low, axis_high = figure.layout.xaxis.range
    order = [FEATURES.index(str(y).split(" ?")[0].replace("&lt;", "<").replace("&gt;", ">"))
             for y in trace.y]
    whiskers = boxes.of("cp-whisker")
    assert len(whiskers) == len(FEATURES)
    for whisker, j in zip(whiskers, order, strict=True):
        assert span(whisker) == pytest.approx(
            (at(low[j], axis_low, axis_high), at(high[j], axis_low, axis_high)), abs=1e-3)
    bars = boxes.of("cp-bar")[:len(FEATURES)]
    pale = [float(bar["style"]["opacity"]) for bar in bars]
    assert pale[order.index(2)] == UNSETTLED_OPACITY and pale[order.index(0)] == 1.0
    # Every bar has its number (issue 35 item 6: the calibration-driven panel had none), the
    # calibration-driven ones past the whisker's far end, so that none sits on a whisker.
    values = boxes.of("cp-value")
    assert len(values) == 3 * len(FEATURES)
    assert [v["text"] for v in values[:len(FEATURES)]] == list(trace.text)
    for value, j in zip(values[:len(FEATURES)], order, strict=True):
        far = high[j] if CALIBRATION[j] >= 0 else low[j]
        assert number_at(value) == pytest.approx(at(far, axis_low, axis_high), abs=1e-3)


def test_standard_error_whiskers_and_the_reference_samples_bands() -> None:
    se = np.array([0.1, 0.2, 0.3])
    low, high = np.array([0.5, -2.5, 0.1]), np.array([1.5, -1.5, 0.9])
    figure = side_by_side_bars(FEATURES, CALIBRATION, INSTANCE, TOTAL, units="days",
                               errors=(se, se, se),
                               background_ranges=((low, high), (INSTANCE - 1, INSTANCE + 1)))
    page = html_charts.three_panels(figure)
    boxes = Boxes(page)
    n = len(FEATURES)
    assert len(boxes.of("cp-whisker")) == 3 * n  # ±2 SE on every panel
    trace = figure.data[0]
    axis_low, axis_high = figure.layout.xaxis.range
    first = boxes.of("cp-whisker")[0]
    value, two_se = float(trace.x[0]), float(trace.error_x.array[0])
    assert span(first) == pytest.approx((at(value - two_se, axis_low, axis_high),
                                         at(value + two_se, axis_low, axis_high)), abs=1e-3)
    bands = boxes.of("cp-band")
    assert len(bands) == 2 * n  # the calibration-driven and instance-driven panels
    j = FEATURES.index("bmi")
    assert str(trace.y[0]).startswith("bmi")  # the largest |total| first
    assert span(bands[0]) == pytest.approx((at(low[j], axis_low, axis_high),
                                            at(high[j], axis_low, axis_high)), abs=1e-3)
    assert page.count(BACKGROUND_LEGEND) == 1  # one legend entry for both panels' bands
    # A sampled method's bars have their numbers too (issue 35 item 6), past the whisker's and
    # the band's far end.
    values = boxes.of("cp-value")
    assert len(values) == 3 * n
    assert values[0]["text"] == trace.text[0]
    far = max(value + two_se, high[j]) if value >= 0 else min(value - two_se, low[j])
    assert number_at(values[0]) == pytest.approx(at(far, axis_low, axis_high), abs=1e-3)


def test_the_waterfall_chains_its_steps_from_zero_and_ends_at_the_patients_width() -> None:
    total = np.array([3.0, -1.0, 0.5])
    figure = width_waterfall(["a", "b", "c"], total, 10.0, 12.5, units="days")
    boxes = Boxes(html_charts.waterfall(figure))
    bars = boxes.of("cp-bar")
    low, high = figure.layout.xaxis.range
    assert low <= 0  # the axis starts at 0 or before: a box's length is the width itself
    ends = [span(bar) for bar in bars]
    assert ends[0] == pytest.approx((at(0, low, high), at(10.0, low, high)), abs=1e-3)
    level = 10.0
    for step, (left, right) in zip([3.0, -1.0, 0.5], ends[1:-1], strict=True):
        assert sorted([left, right]) == pytest.approx(
            sorted([at(level, low, high), at(level + step, low, high)]), abs=1e-3)
        level += step
    assert ends[-1] == pytest.approx((at(0, low, high), at(12.5, low, high)), abs=1e-3)
    assert level == pytest.approx(12.5)
    assert [words(tip) for tip in hover_boxes(html_charts.waterfall(figure))] == [
        f"{label}: {text}" for label, text in zip(figure.data[0].y, figure.data[0].text,
                                                  strict=True)]
    assert [words(tip).split(": ")[0] for tip in hover_boxes(html_charts.waterfall(figure))] \
        == ["featureless width", "a", "b", "c", "this patient"]
    # Widening steps dark, narrowing light, the two widths outlined white boxes.
    assert "#444444" in bars[1]["style"]["background"]
    assert "#C8C8C8" in bars[2]["style"]["background"]
    assert "#FFFFFF" in bars[0]["style"]["background"]
    title = html_charts.waterfall(figure).split('class="cp-title">')[1]
    assert "<small>" in title and "<sup>" not in title


def test_a_name_with_markup_stays_text_in_every_place() -> None:
    name = '<img src=x onerror="alert(1)">'
    figure = side_by_side_bars([name, "b"], np.array([1.0, 2.0]), np.array([0.5, -1.0]),
                               np.array([1.5, 1.0]), units="days")
    page = html_charts.three_panels(figure) + html_charts.waterfall(
        width_waterfall([name, "b"], np.array([1.5, 1.0]), 5.0, 7.5, units="days"))
    assert "<img" not in page
    assert any(name in item["text"] for item in Boxes(page).items)
    assert all(name in words(hover_boxes(page)[k]) for k in (0, 2, 4))  # its row, each panel
    from cpdecomp.app.charts import instance_distribution, sign_disagreement_bars

    for cohort in (html_charts.boxes(instance_distribution(
            [name, "b"], np.ones((3, 2)), np.array([0, 1]), units="days")),
            html_charts.grouped_bars(sign_disagreement_bars([name, "b"], np.array([0.1, 0.2]),
                                                            np.array([0.0, 0.3])))):
        assert "<img" not in cohort
        # As plotly showed them: a long name shortened with "…" (its start is the text).
        assert any(name[:20] in item["text"] for item in Boxes(cohort).items)
        assert name[:20] in words(hover_boxes(cohort)[0])


@pytest.mark.parametrize(("low", "high", "ticks"), [
    (-57.0, 57.0, [-50.0, 0.0, 50.0]),
    (0.0, 330.0, [0.0, 100.0, 200.0, 300.0]),
    (-0.3, 0.3, [-0.2, 0.0, 0.2]),
    (2.0, 2.0, [2.0]),
])
def test_axis_ticks_are_round_numbers_inside_the_range(low: float, high: float,
                                                       ticks: list[float]) -> None:
    assert html_charts.nice_ticks(low, high) == pytest.approx(ticks)


def axis_numbers(page: str) -> list[list[str]]:
    """Each axis's numbers as shown, axis by axis."""
    return [re.findall(r"<span[^>]*>([^<]*)</span>", axis)
            for axis in re.findall(r'<div class="cp-axis">(.*?)</div>', page)]


@pytest.mark.parametrize("largest", [3.5, 0.35, 35.0, 7.0, 1.0, 2.2, 0.012])
def test_every_panels_axis_shows_numbers_besides_zero(largest: float) -> None:
    """Issue 35 item 6: a panel from −5.6 to 5.6 (its longest bar 3.5) showed only "0": its
    round numbers ±5 were within the 6 % kept clear at each end. An axis now chooses its
    numbers away from the ends, so it always has some on both sides of 0."""
    calibration = np.array([largest, -largest / 2, largest / 4])
    figure = side_by_side_bars(FEATURES, calibration, -calibration / 3, calibration * 2 / 3,
                               units="days")
    low, high = figure.layout.xaxis.range
    assert (low, high) == pytest.approx((-1.6 * largest, 1.6 * largest))
    page = html_charts.three_panels(figure)
    axes = axis_numbers(page)
    assert len(axes) == 3
    for numbers in axes:
        assert "0" in numbers
        assert any(n.startswith("−") for n in numbers), numbers
        assert any(n not in ("0",) and not n.startswith("−") for n in numbers), numbers
    # None of them at a panel's very ends.
    for item in Boxes(page).items:
        if item["tag"] == "span" and "left" in item["style"] and not item["class"]:
            assert 6 <= percent(item, "left") <= 94 or item["text"] == "0"


def test_the_axis_of_a_panel_from_minus_to_plus_5_6() -> None:
    assert html_charts.axis_ticks(-5.6, 5.6) == pytest.approx([-4, -2, 0, 2, 4])
    assert html_charts.axis_ticks(0.0, 330.0) == pytest.approx([0, 100, 200, 300])
    assert html_charts.axis_ticks(-57.0, 57.0) == pytest.approx([-50, 0, 50])


def test_a_table_shows_short_headers_their_help_rounded_numbers_and_text_as_text() -> None:
    import pandas as pd

    frame = pd.DataFrame({"feature": ["<b>age</b>", "bmi"], "value": ["61", "(missing)"],
                          "total": [-1.23456, float("nan")]})
    page = html_charts.table(frame, {
        "feature": html_charts.Column("feature"),
        "value": html_charts.Column("value", 'the "value"'),
        "total": html_charts.Column("sum", "calibration + instance", decimals=2)})
    assert re.findall(r"<th\b[^>]*>(.*?)</th>", page) == ["feature", "value", "sum"]
    assert 'title="the &quot;value&quot;"' in page and 'title="calibration + instance"' in page
    cells = re.findall(r"<td[^>]*>(.*?)</td>", page)
    assert cells == ["&lt;b&gt;age&lt;/b&gt;", "61", "−1.23", "bmi", "(missing)", ""]
    assert "<b>" not in page
    with pytest.raises(KeyError):  # every column needs its header: none shown by accident
        html_charts.table(frame.assign(extra=1), {})


def axis_scale(page: str, index: int = 0):
    """Value -> percent of the panel, read off the `index`-th axis's tick numbers."""
    axes = re.findall(r'<div class="cp-axis">(.*?)</div>', page)
    ticks = [(float(html.unescape(text).replace("\u2212", "-")), float(left))
             for left, text in re.findall(r'left:([\d.\-]+)%">([^<]+)</span>', axes[index])]
    (v0, p0), (v1, p1) = ticks[0], ticks[-1]
    return lambda value: p0 + (value - v0) * (p1 - p0) / (v1 - v0)


def test_a_histogram_counts_every_width_once_in_the_bar_that_holds_it() -> None:
    from cpdecomp.app.charts import width_histogram

    widths = np.random.default_rng(3).gamma(4.0, 2.0, 400)
    page = html_charts.histogram(width_histogram(widths, base_width=9.0, threshold=12.0))
    scale = axis_scale(page)
    where = np.array([scale(w) for w in widths])
    columns = Boxes(page).of("cp-col")
    counts = [int(re.search(r": (\d+) patients?", words(tip)).group(1))
              for tip in hover_boxes(page)]
    assert sum(counts) == len(widths)
    heights = [percent(item, "height") for item in Boxes(page).of("cp-bar")]
    for column, count, height in zip(columns, counts, heights, strict=True):
        left, right = span(column)
        inside = ((where >= left - 1e-6) & (where < right - 1e-6)).sum()
        assert inside == count or (right == max(span(c)[1] for c in columns)
                                   and (where >= left - 1e-6).sum() == count)
        assert height == pytest.approx(100 * count / max(counts) * max(heights) / 100,
                                       rel=1e-3)
    # The two lines where their values are, each with its label.
    marks = [percent(item, "left") for item in Boxes(page).of("cp-mark")]
    assert marks == pytest.approx([scale(9.0), scale(12.0)], abs=0.01)
    assert "featureless width" in page and "flag threshold" in page


def test_tied_widths_make_one_bar_of_every_patient() -> None:
    from cpdecomp.app.charts import width_histogram

    page = html_charts.histogram(width_histogram(np.full(125, 10.5), base_width=16.4))
    assert len(Boxes(page).of("cp-col")) == 1
    assert words(hover_boxes(page)[0]) == "width 10.5: 125 patients"


def test_box_plots_follow_tukeys_rule() -> None:
    from cpdecomp.app.charts import instance_distribution

    # Quartiles by linear interpolation: 3.25, 5.5 and 7.75; the fences 3.25 - 6.75 and
    # 7.75 + 6.75 leave 100 (and -20) outside, the whiskers end at 1 and 9.
    values = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 100.0])
    second = np.array([-20, 0, 0, 1, 1, 1, 2, 2, 3, 3.0])
    page = html_charts.boxes(instance_distribution(
        ["a", "b"], np.column_stack([values, second]), np.array([0, 1]), units="days"))
    scale = axis_scale(page)
    boxes = Boxes(page)
    quart, reach = boxes.of("cp-quart"), boxes.of("cp-reach")
    assert span(quart[0]) == pytest.approx((scale(3.25), scale(7.75)), abs=0.01)
    assert span(reach[0]) == pytest.approx((scale(1), scale(9)), abs=0.01)
    assert percent(boxes.of("cp-median")[0], "left") == pytest.approx(scale(5.5), abs=0.01)
    dots = [percent(d, "left") for d in boxes.of("cp-dot")]
    assert dots == pytest.approx([scale(100.0), scale(-20.0)], abs=0.06)
    assert span(reach[1]) == pytest.approx((scale(0), scale(3)), abs=0.01)
    # Rounded at the panel's scale (up to 100): whole numbers.
    assert words(hover_boxes(page)[0]) == ("a: median +6; middle half of the patients +3 to +8; "
                                           "all 10 from +1 to +100")


def test_grouped_bars_span_zero_to_their_percent_with_their_number() -> None:
    from cpdecomp.app.charts import sign_disagreement_bars

    first, second = np.array([0.1, 0.25, 0.0]), np.array([0.05, 1.0, 0.0])
    page = html_charts.grouped_bars(sign_disagreement_bars(FEATURES, first, second))
    scale = axis_scale(page)
    bars = Boxes(page).of("cp-bar")
    expected = [p for pair in zip(100 * first, 100 * second, strict=True) for p in pair]
    assert [end for bar in bars for end in span(bar)] == pytest.approx(
        [end for p in expected for end in (scale(0), scale(p))], abs=0.01)
    assert [v["text"] for v in Boxes(page).of("cp-value")] == [f"{p:.0f}%" for p in expected]
    legend = re.search(r'<div class="cp-legend">(.*?)</div>', page).group(1)
    assert re.findall(r"</i>([^<]+)</span>", legend) == ["calibration vs instance",
                                                         "total vs instance"]
    assert "<b>x" not in page.replace("&lt;b&gt;x", "")

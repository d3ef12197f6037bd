"""What the pages read off a report, and the figures they draw, checked on known arrays."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from dashboard_helpers import SAMPLE

from cpdecomp import StudyOptions, load_table, prepare_study
from cpdecomp.app import charts, sources, summaries
from cpdecomp.app.reviews import ReviewEvent
from cpdecomp.core.errors import CpdecompError


@pytest.fixture(scope="module")
def report():
    table = load_table(SAMPLE)
    study = prepare_study(table, StudyOptions(target="progression", id_column="patient_id",
                                              model="linear", background=16))
    return study.explain(method="exact", alpha=0.1)


def test_coverage_counts_rows_inside_their_interval(report) -> None:
    e = report.explanation
    cover = summaries.coverage(report)
    inside = (report.targets >= e.lower) & (report.targets <= e.upper)
    assert (cover.covered, cover.n) == (int(inside.sum()), len(inside))
    assert cover.target == pytest.approx(0.9)


def test_sign_disagreement_is_a_share_of_patients(report) -> None:
    d = report.explanation.decomposition
    frame = summaries.sign_disagreement(report)
    j = 2
    # Parts under SIGN_CUT of the patient's largest attribution have no sign.
    scale = np.abs(np.stack([d.calibration, d.instance, d.total])).max(axis=(0, 2))
    cut = summaries.SIGN_CUT * scale
    c = np.where(np.abs(d.calibration[:, j]) <= cut, 0, np.sign(d.calibration[:, j]))
    i = np.where(np.abs(d.instance[:, j]) <= cut, 0, np.sign(d.instance[:, j]))
    expected = np.mean(c * i < 0)
    assert frame.loc[j, "calibration_vs_instance"] == pytest.approx(expected)
    assert frame[["calibration_vs_instance", "total_vs_instance"]].stack().between(0, 1).all()


def test_percentile_ranks() -> None:
    np.testing.assert_allclose(summaries.percentile_ranks(np.array([3.0, 1.0, 2.0, 2.0])),
                               [100, 25, 75, 75])


FEATURES = ("a", "b", "c", "d", "e")


@pytest.mark.parametrize(("part", "total", "feature", "effect"), [
    # the total gives the instance driver a negative sign: it reads as reassuring
    ([3.0, 0.1, 0, 0, 0], [-1.0, 0.5, 0.2, 0.1, 0], "a", "flips"),
    # positive in the total but outranked by three other features
    ([3.0, 0.1, 0, 0, 0], [0.05, 0.5, 0.4, 0.3, 0], "a", "hides"),
    ([3.0, 0.1, 0, 0, 0], [2.0, 0.5, 0.4, 0.3, 0], "a", "shows"),
    ([-1.0, -0.1, 0, 0, 0], [2.0, 0.5, 0.4, 0.3, 0], None, "none"),
])
def test_top_driver_and_what_the_total_does_to_it(part, total, feature, effect) -> None:
    driver = summaries.top_driver("instance", FEATURES, np.array(part), np.array(total))
    assert (driver.feature, driver.effect) == (feature, effect)
    if effect in ("flips", "hides"):
        assert effect in driver.describe() and "a" in driver.describe()


def test_queue_frame_carries_drivers_and_the_latest_review(report) -> None:
    e = report.explanation
    flagged = np.flatnonzero(e.width > np.percentile(e.width, 90))
    first = str(report.patient_ids[flagged[0]])
    review = ReviewEvent("k", first, "reviewed", "ok", "A", "2025-01-01T00:00:00+00:00")
    frame = summaries.queue_frame(report, flagged, {first: review})
    assert len(frame) == len(flagged)
    row = frame.set_index("patient_id").loc[first]
    assert bool(row["reviewed"]) and row["note"] == "ok" and row["reviewer"] == "A"
    assert frame["top_instance_driver"].isin(report.explanation.features).all()
    for order in summaries.SORTS:
        assert len(summaries.sort_queue(frame, order)) == len(frame)


def test_one_order_for_every_chart_by_the_patients_absolute_total() -> None:
    calibration = np.array([0.1, 5.0, -1.0])
    instance = np.array([0.2, -4.9, 0.5])
    total = calibration + instance
    assert total[1] == pytest.approx(0.1)  # small total, large opposite parts: marked ⇄
    assert list(charts.feature_order(total)) == [2, 0, 1]
    bars = charts.side_by_side_bars(["a", "b", "c"], calibration, instance, total,
                                    units="width")
    waterfall = charts.width_waterfall(["a", "b", "c"], total, 10.0, 10.0 + total.sum(),
                                       units="width")
    assert list(bars.data[0].y) == ["c", "a", "b"] == list(waterfall.data[0].y[1:4])
    assert waterfall.layout.xaxis.range[0] <= 0  # the waterfall's axis starts at 0


def test_side_by_side_bars_are_three_labelled_panels() -> None:
    fig = charts.side_by_side_bars(["age", "bmi", "bp"], np.array([1.0, -2.0, 0.5]),
                                   np.array([-0.5, 3.0, 0.1]), np.array([0.5, 1.0, 0.6]),
                                   units="width", disagree=np.array([True, True, False]))
    assert [t.name for t in fig.data] == [charts.TITLES[v] for v in charts.VIEWS]
    assert [t.marker.color for t in fig.data] == [charts.COLOURS[v] for v in charts.VIEWS]
    assert {a.text for a in fig.layout.annotations} == set(charts.PANEL_TITLES.values())
    assert fig.layout.showlegend  # the legend names each part in full
    assert "age ⇄" in fig.data[0].y and "bp" in fig.data[0].y
    ranges = {tuple(fig.layout[f"xaxis{s}"].range) for s in ("", "2", "3")}
    assert len(ranges) == 1  # one scale, so bars compare across panels


def test_waterfall_steps_end_at_the_patients_width() -> None:
    fig = charts.width_waterfall(["a", "b"], np.array([2.0, -0.5]), 10.0, 11.5, units="width")
    trace = fig.data[0]
    assert list(trace.measure) == ["absolute", "relative", "relative", "total"]
    assert trace.x[0] + sum(trace.x[1:-1]) == pytest.approx(11.5)
    gap = charts.width_waterfall(["a"], np.array([1.0]), 10.0, 12.0, units="width")
    assert "not attributed" in gap.data[0].y


def test_dataset_key_depends_on_content_and_target() -> None:
    one = sources.content_digest([b"a,b\n1,2\n"])
    assert one == sources.content_digest([b"a,b\n1,2\n"])
    assert sources.content_digest([b"ab", b"c"]) != sources.content_digest([b"a", b"bc"])
    assert sources.dataset_key(one, "a") != sources.dataset_key(one, "b")


def test_uploads_are_read_by_core_with_its_messages(tmp_path) -> None:
    frame = pd.DataFrame({"x": [1.0, 2.0], "y": [3.0, 4.0]})
    frame.to_parquet(tmp_path / "t.parquet")
    table = sources.read_upload("t.parquet", (tmp_path / "t.parquet").read_bytes())
    assert list(table.columns) == ["x", "y"]
    assert len(sources.read_upload("..", b"x,y\n1,2\n")) == 1  # stays in its own folder
    with pytest.raises(CpdecompError, match=r"bad\.parquet is not a readable Parquet file"):
        sources.read_upload("../../bad.parquet", b"not parquet at all")
    with pytest.raises(CpdecompError, match=r"calibration file: c\.csv is empty"):
        sources.separate_uploads([("t.csv", b"x,y\n1,2\n"), ("c.csv", b""), ("p.csv", b"x\n1\n")])


def test_mixed_columns_are_shown_as_text() -> None:
    from cpdecomp.app.cases import display_value

    assert [display_value(v) for v in (1.23456789, 3, "arm B", float("nan"), None, True)] == [
        "1.23457", "3", "arm B", "", "", "True"]
    table = pd.DataFrame({"mixed": [1, "two", None], "number": [1.0, 2.0, 3.0]})
    shown = sources.preview(table)
    assert list(shown["mixed"][:2]) == ["1", "two"] and pd.isna(shown["mixed"][2])
    assert shown["number"].dtype == float


def test_rounding_noise_has_no_sign() -> None:
    values = np.array([[1e-13, 2.0, -0.5], [0.0, -3.0, 4.0]])
    np.testing.assert_array_equal(summaries.signs(values, np.array([2.0, 4.0])),
                                  [[0, 1, -1], [0, -1, 1]])


def test_every_chart_passes_plotlys_validation() -> None:
    """The charts are built without plotly's validation (it made a patient switch slow); a
    misspelt property or a bad value must still be caught, here."""
    import plotly.graph_objects as go

    names = ["age", "bmi <b>", "a very long feature name that is cut on the axis"]
    part = np.array([1.0, -2.0, 0.5])
    figures = [
        charts.side_by_side_bars(names, part, -part / 2, part / 2, units="width",
                                 disagree=np.array([True, False, False]), values=["1", "x", ""],
                                 calibration_range=(part - 1, part + 1)),
        charts.side_by_side_bars(names, part, part, 2 * part, units="width",
                                 errors=(part / 10, part / 10, part / 10)),
        charts.width_waterfall(names, part, 10.0, 9.0, units="width"),
        charts.width_histogram(np.array([1.0, 2.0, 2.5]), base_width=2.0, threshold=2.2,
                               marked=1.0),
        charts.vector_bars(names, part, np.array([1, 0, 2]), view="calibration", units="width",
                           title="t", span=(part - 1, part + 1)),
        charts.vector_bars(names, part, np.array([1, 0, 2]), view="fixed", units="width",
                           title="t"),
        charts.instance_distribution(names, np.vstack([part, -part]), np.array([0, 1, 2]),
                                     units="width"),
        charts.sign_disagreement_bars(names, np.array([0.1, 0.2, 0.0]), np.zeros(3)),
        charts.outcome_histogram(np.array([1.0, np.nan, 3.0]), target="days <b>"),
        charts.set_width_boxes({"site A": np.array([1.0, 2.0]), "site <b>": np.array([3.0])},
                               units="width", title="t"),
        charts.set_bars(names, {"A": part, "B <b>": -part}, view="calibration", units="width",
                        title="t", order=np.array([1, 0, 2]),
                        ranges={"A": (part - 1, part + 1), "B <b>": (-part - 1, -part + 1)}),
        charts.set_bars(names, {"A": part, "B": part, "C": part}, view="instance",
                        units="width", title="t", order=np.array([0, 1, 2])),
    ]
    for figure in figures:
        validated = go.Figure(figure.to_dict())  # raises on an unknown property or bad value
        assert len(validated.data) == len(figure.data)
        assert validated.layout.margin.l == figure.layout.margin.l >= 40


def test_label_margin_holds_the_longest_label() -> None:
    short, long = charts.label_margin(["bp"]), charts.label_margin(["bp", "x" * 26 + " ⇄"])
    assert long > short
    # 26 characters at 13 px, at least 0.55 em each: the margin is never the cause of a cut.
    assert long >= 26 * 13 * 0.55

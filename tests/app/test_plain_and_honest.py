"""What the pages compute before drawing: tied widths, the default target, the outcome's range,
the families that can run, the masking plan, the plain reading and the escaping of names."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from dashboard_helpers import SAMPLE

from cpdecomp import StudyOptions, load_table, prepare_study
from cpdecomp.app import charts, planning, reading, summaries, text


@pytest.fixture(scope="module")
def absolute_report():
    """The absolute family: every width is 2q, up to rounding."""
    study = prepare_study(load_table(SAMPLE), StudyOptions(
        target="progression", id_column="patient_id", model="linear", family="absolute",
        background=16))
    return study.explain(method="exact", alpha=0.1)


def test_tied_widths_flag_nobody_and_share_one_percentile(absolute_report) -> None:
    widths = absolute_report.explanation.width
    assert summaries.widths_tied(widths)
    comparable = summaries.comparable_widths(widths)
    assert np.ptp(comparable) == 0
    np.testing.assert_allclose(comparable, widths, rtol=1e-9)
    np.testing.assert_array_equal(summaries.percentile_ranks(widths), 100.0)
    threshold = summaries.flag_threshold(widths, "percentile", 90)
    assert summaries.flagged_positions(widths, threshold).size == 0


def test_rounding_noise_is_a_tie_but_a_real_difference_is_not() -> None:
    noisy = 10.0 + np.array([0.0, 4e-15, -3e-15, 2e-15])
    assert summaries.widths_tied(noisy)
    np.testing.assert_array_equal(summaries.percentile_ranks(noisy), 100.0)
    spread = np.array([10.0, 10.0 + 4e-15, 10.5, 9.0])
    assert not summaries.widths_tied(spread)
    np.testing.assert_allclose(summaries.percentile_ranks(spread), [75, 75, 100, 25])
    assert list(summaries.flagged_positions(spread, 10.0)) == [2]


def test_the_default_target_is_never_an_id_a_flag_or_a_constant() -> None:
    rng = np.random.default_rng(0)
    n = 50
    table = pd.DataFrame({"pid": np.arange(100, 100 + n), "age": rng.normal(60, 9, n),
                          "nodes": rng.integers(0, 20, n), "grade": rng.integers(1, 4, n),
                          "site": ["a"] * n, "flat": np.ones(n), "cens": rng.integers(0, 2, n)})
    assert planning.looks_like_id("pid", table["pid"])
    assert planning.choose_target(table) == "age"  # the most distinct values
    assert planning.choose_target(table, used_before=["nodes"]) == "nodes"
    assert planning.choose_target(table.rename(columns={"nodes": "length_of_stay"})) == (
        "length_of_stay")
    assert planning.choose_target(table[["pid", "site", "flat", "cens"]]) is None


def test_a_yes_no_or_few_valued_target_is_warned_about() -> None:
    assert "two values" in planning.target_note(np.array([0.0, 1, 1, 0, np.nan]), "cens")
    assert "4 distinct values" in planning.target_note(np.arange(40.0) % 4, "grade")
    assert planning.target_note(np.linspace(0, 1, 40), "score") is None


def test_the_outcome_range_is_inferred_and_clips_the_display_only() -> None:
    assert planning.inferred_lower_bound(np.array([0.0, 3, 12])) == 0.0
    assert planning.inferred_lower_bound(np.array([-1.0, 3])) is None
    outcome = planning.OutcomeRange(low=0.0)
    lower, upper, clipped = outcome.clip(np.array([-1.35, 2.0]), np.array([26.4, 5.0]))
    np.testing.assert_array_equal(lower, [0.0, 2.0])
    np.testing.assert_array_equal(upper, [26.4, 5.0])
    np.testing.assert_array_equal(clipped, [True, False])


def test_gamma_is_offered_only_for_a_positive_target() -> None:
    offered, note = planning.families_that_run(np.array([0.0, 1, 2, -1, 5]))
    assert "gamma" not in offered and "2 of 5 rows" in note
    offered, note = planning.families_that_run(np.array([0.5, 1, 2]))
    assert "gamma" in offered and note is None


@pytest.mark.parametrize(("model", "family"), [
    ("gbm", "normalized"), ("gbm", "gamma"), ("linear", "gamma"), ("rf", "gamma"),
    ("linear", "cqr"),
])
def test_the_masking_plan_asks_core_of_a_fitted_probe(model, family) -> None:
    """Every built-in pair has an exact fast path (the gamma family's log-link models on their
    log scale), so none is planned as brute force."""
    assert planning.masking_plan(model, family).fast


def test_brute_force_seconds_follow_the_measured_speed() -> None:
    plan = planning.MaskingPlan(False, rows_per_second=2.5e5, slow_components=1)
    seconds = planning.brute_force_seconds(
        plan, planning.coalition_count("exact", 10, None, 0), 200, 64)
    # 2**10 coalitions x 200 rows x 64 background rows at the measured speed
    np.testing.assert_allclose(seconds, 1024 * 200 * 64 / 2.5e5, rtol=1e-12)


def test_the_background_shown_is_the_one_used() -> None:
    options = StudyOptions(target="y")
    assert planning.background_size(options, 221, fast=True) == 221
    assert planning.background_size(options, 5000, fast=True) == 1000
    assert planning.background_size(options, 5000, fast=False) == 64
    assert planning.background_size(StudyOptions(target="y", background=30), 221, True) == 30


def test_numbers_are_rounded_for_people() -> None:
    # On their own: three significant figures, never e-notation, thousands grouped.
    assert [text.people_number(v) for v in (26.43, 7.94, 0.3412, 0.002671, 1234.6, 0)] == [
        "26.4", "7.94", "0.341", "0.00267", "1,235", "0"]
    assert text.people_number(-2.9, signed=True) == "−2.90"
    assert text.people_number(3.9, 26.4, signed=True) == "+3.9"
    assert "e" not in text.people_number(1e-7)
    # At a view's width scale, one number of decimals for all: three figures of the scale.
    assert [text.people_number(v, 262.0, signed=True) for v in (20.55, 0.681, -17.46)] == [
        "+21", "+1", "−17"]
    assert [text.people_number(v, 26.4, signed=True) for v in (20.55, 0.681, -0.04)] == [
        "+20.6", "+0.7", "≈0"]  # a part that rounds to nothing is not shown as zero
    assert [text.decimals_for(s) for s in (262.0, 26.4, 2.64, 0.053, 1e5)] == [0, 1, 2, 4, 0]
    assert text.table_format(26.4) == "%.1f"


def test_one_rounding_rule_across_labels_hovers_and_the_reading() -> None:
    features = ("chf", "bmi", "age")
    calibration, instance = np.array([0.5, 1.4, 0.1]), np.array([20.3, -4.3, 0.681])
    total = calibration + instance
    bars = charts.side_by_side_bars(features, calibration, instance, total, units="days",
                                    scale=262.0)
    labels = [label for trace in bars.data for label in trace.text]
    assert labels and all("." not in label for label in labels)  # 262: no decimals for any
    assert "+1" in bars.data[1].text and "+21" in bars.data[2].text  # 0.681 and 20.8
    assert "+21" in bars.data[2].customdata[0]  # the hover says what the label says
    waterfall = charts.width_waterfall(features, total, 262.0, 262.0 + total.sum(),
                                       units="days")
    assert list(waterfall.data[0].text[:2]) == ["262", "+21"]
    paragraph = reading.patient_reading(features, calibration, instance, total,
                                        width=262.0 + total.sum(), base_width=262.0)
    assert "chf (+21: instance-driven +20; calibration-driven ≈0)" in paragraph
    assert "(281 vs 262)" in paragraph


def test_the_reading_names_the_main_driver_and_a_feature_whose_parts_disagree() -> None:
    features = ("chf", "bmi", "age")
    calibration = np.array([0.5, 1.4, 0.1])
    instance = np.array([3.4, -4.3, 0.2])
    total = calibration + instance
    text_ = reading.patient_reading(features, calibration, instance, total,
                                    width=26.4, base_width=25.0, unit="days")
    assert text_.startswith("The interval is 1.4 days wider than for a patient about whom "
                            "nothing is known (26.4 vs 25.0 days).")
    assert ("Most of that comes from this patient's chf (+3.9 days: instance-driven +3.4; "
            "calibration-driven +0.5).") in text_
    assert ("bmi narrows it for this patient (−4.3) but widens it through the calibration set "
            "(+1.4): the total shows only −2.9.") in text_
    fixed = reading.patient_reading(features, calibration, 0 * instance, calibration,
                                    width=20.0, base_width=22.0, has_instance_part=False)
    # Every patient has this width: no other patient to compare with, but the model without
    # features.
    assert fixed == ("Under this conformal family the width is the same for every patient "
                     "(20.0): it is set by the calibration set alone, and this patient's own "
                     "values do not change it. It is 2.0 narrower than it would be if the "
                     "model used none of the features (22.0); the bars show which features "
                     "make that difference, all of it through the calibration set.")


def test_names_are_plain_text_in_markdown_and_plotly() -> None:
    name = '![x](http://198.51.100.7/p.png) <a href="http://x.org">l</a> :red[a] www.x.org'
    escaped = text.markdown_text(name)
    for fragment in ("![", "](", ":red[", "www.", "http:"):
        assert fragment not in escaped
    assert escaped.count("\\<") == name.count("<")  # every tag opener escaped
    assert text.markdown_text("two\nlines") == "two lines"
    assert text.plotly_text("<b>bold</b> & <br>") == "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;br&gt;"
    figure = charts.side_by_side_bars([name, "<b>b</b>"], np.array([1.0, -1.0]),
                                      np.array([0.5, 0.2]), np.array([1.5, -0.8]), units="width")
    labels = list(figure.data[0].y)
    assert all("<" not in label for label in labels)
    assert all("<a" not in hover and "<b>b</b>" not in hover
               for hover in figure.data[0].customdata)
    assert text.file_name_part("../![x](y) 7") == "x_y_7"

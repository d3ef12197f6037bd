"""A calibration-driven part whose bootstrap interval holds 0 has no settled direction: it is
not counted as ⇄ on the Cohort page nor as a hidden or flipped driver in the review queue."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from dashboard_helpers import SAMPLE

from cpdecomp import StudyOptions, load_table, prepare_study
from cpdecomp.app import summaries


@pytest.fixture(scope="module")
def report():
    table = load_table(SAMPLE)
    study = prepare_study(table, StudyOptions(target="progression", id_column="patient_id",
                                              model="linear", background=16))
    return study.explain(method="exact", alpha=0.1)


def with_interval(report, low, high):
    """The report with φ_C's interval set to (low, high) for every patient."""
    e = report.explanation
    d = replace(e.decomposition, calibration_low=low, calibration_high=high)
    return replace(report, explanation=replace(e, decomposition=d))


def test_unsettled_calibration_parts_are_not_counted_as_opposite_signs(report) -> None:
    d = report.explanation.decomposition
    plain = summaries.sign_disagreement(report)["calibration_vs_instance"].to_numpy()
    opposed = int(np.argmax(plain))
    assert plain[opposed] > 0  # the sample has a feature whose parts disagree somewhere
    # Tight intervals around φ_C (never holding 0 where φ_C is not 0): the same counts.
    tight = with_interval(report, d.calibration - 1e-9 * np.abs(d.calibration),
                          d.calibration + 1e-9 * np.abs(d.calibration))
    np.testing.assert_allclose(
        summaries.sign_disagreement(tight)["calibration_vs_instance"], plain, atol=0)
    # The opposed feature's interval holds 0 for every patient: it is counted for nobody,
    # and the other features keep their counts.
    low, high = d.calibration.copy(), d.calibration.copy()
    low[:, opposed], high[:, opposed] = -1.0, 1.0
    counted = summaries.sign_disagreement(with_interval(report, low, high))
    expected = plain.copy()
    expected[opposed] = 0.0
    np.testing.assert_allclose(counted["calibration_vs_instance"], expected, atol=0)
    # Total vs instance does not involve φ_C's sign: unchanged.
    np.testing.assert_allclose(counted["total_vs_instance"],
                               summaries.sign_disagreement(report)["total_vs_instance"], atol=0)


def test_a_driver_whose_calibration_direction_is_unsettled_raises_no_warning() -> None:
    features = ("bmi", "age", "bp", "s1")
    instance = np.array([3.0, 0.5, 0.4, 0.3])
    calibration = np.array([-4.0, 0.1, 0.1, 0.1])  # the total flips bmi: 3 - 4 < 0
    total = instance + calibration
    flipped = summaries.top_driver("instance", features, instance, total)
    assert flipped.effect == "flips" and flipped.short() == "total flips bmi"
    unsettled = np.array([True, False, False, False])
    quiet = summaries.top_driver("instance", features, instance, total, unsettled)
    assert quiet.effect == "unsettled" and quiet.short() == "" and quiet.describe() == ""
    # A settled feature keeps its warning when another feature is unsettled.
    other = summaries.top_driver("instance", features, instance, total, ~unsettled)
    assert other.effect == "flips"


def test_the_queue_counts_no_warning_for_unsettled_drivers(report) -> None:
    d = report.explanation.decomposition
    positions = np.arange(len(report.patient_ids))
    plain = summaries.queue_frame(report, positions, {})
    warned = plain["total_view"] != "agrees"
    assert warned.any()  # the sample has warnings to remove
    everything_unsettled = with_interval(report, np.full_like(d.calibration, -1.0),
                                         np.full_like(d.calibration, 1.0))
    quiet = summaries.queue_frame(everything_unsettled, positions, {})
    assert (quiet["total_view"] == "agrees").all() and (quiet["warnings"] == "").all()
    assert quiet["unsettled_driver"].to_numpy()[warned.to_numpy()].all()

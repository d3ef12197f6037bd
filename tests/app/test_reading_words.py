"""The plain reading says what its numbers are (issue 35, item 7): a part it names comes with
that part's own number, not the total's; and the width it compares with is the featureless one,
said as such (a patient about whom nothing is known), never "a typical patient", which reads as
the cohort's median."""

from __future__ import annotations

import numpy as np

from cpdecomp.app import reading


def test_the_named_part_gets_its_own_number_not_the_total() -> None:
    # The case: tsize −3.1 in all, of which −2.0 instance-driven.
    features = ("tsize", "age")
    calibration, instance = np.array([-1.1, 0.1]), np.array([-2.0, 0.05])
    total = calibration + instance
    text = reading.patient_reading(features, calibration, instance, total, width=14.0,
                                   base_width=18.0, unit="days")
    assert "tsize (−3.1 days: instance-driven −2.0; calibration-driven −1.1)" in text, text
    assert "(−3.1, instance-driven)" not in text


def test_the_larger_part_comes_first_and_an_unsettled_direction_is_said() -> None:
    features = ("chf", "bmi")
    calibration, instance = np.array([2.5, 0.1]), np.array([0.8, 0.05])
    total = calibration + instance
    text = reading.patient_reading(features, calibration, instance, total, width=21.5,
                                   base_width=18.0, calibration_unsettled=np.array([True, False]))
    assert ("chf (+3.3: calibration-driven +2.5, direction not settled; instance-driven +0.8)"
            in text), text


def test_the_comparison_is_with_a_patient_about_whom_nothing_is_known() -> None:
    features = ("chf", "bmi")
    calibration, instance = np.array([0.5, 0.1]), np.array([3.4, 0.2])
    total = calibration + instance
    wider = reading.patient_reading(features, calibration, instance, total, width=26.4,
                                    base_width=25.0, unit="days")
    assert wider.startswith("The interval is 1.4 days wider than for a patient about whom "
                            "nothing is known (26.4 vs 25.0 days).")
    same = reading.patient_reading(features, 0 * calibration, 0 * instance, 0 * total,
                                   width=25.0, base_width=25.0)
    assert same.startswith("The interval is about as wide as for a patient about whom nothing "
                           "is known (25.0).")
    assert "typical" not in wider + same

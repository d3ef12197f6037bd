"""experiments/link_definitions.py on a few features: the two ways of removing a feature from a
log-link model give the same intervals and differ in the attributions; without a link they are
the same function (every difference exactly 0)."""

from __future__ import annotations

import pytest

from experiments.link_definitions import Case, compare

FEATURES = ("age", "bmi", "bp", "s5 ltg")


@pytest.mark.parametrize("poisson", [False, True])
def test_a_log_link_model_is_shared_out_differently_on_the_two_scales(poisson):
    case = Case("diabetes", "diabetes.csv", "progression", "gamma" if not poisson else
                "normalized", 8, poisson=poisson, features=FEATURES)
    found = compare(case)  # asserts the widths agree to 1e-12
    assert found["f masked by"] == "tables / brute"
    for part in ("calibration", "instance", "total"):
        assert 0 < found[f"{part}: median"] <= found[f"{part}: worst"] < 1, (part, found)
    assert found["base width (link)"] != found["base width (response)"]


def test_without_a_link_the_two_definitions_are_the_same_function():
    found = compare(Case("control", "diabetes.csv", "progression", "normalized", 8,
                         features=FEATURES))
    assert found["f masked by"] == "tables / tables"
    for part in ("calibration", "instance", "total"):
        assert found[f"{part}: worst"] == 0.0
        assert found[f"{part}: sign differs"].startswith("0 of ")
    assert found["base width (link)"] == found["base width (response)"]

"""The command line with every attribution method, feature groups and standard errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cpdecomp.core.attribution import METHODS, NOT_DECOMPOSABLE, build_design
from cpdecomp.core.cli import main

COMMON = ["explain", "sample_data/diabetes.csv", "--target", "progression", "--id-column",
          "patient_id", "--features", "age,bmi,bp,s1 tc,s5 ltg", "--background", "30"]


@pytest.mark.parametrize("method", list(METHODS))
def test_every_registered_method_runs_and_splits_exactly(method, tmp_path):
    out = tmp_path / "o.csv"
    assert main([*COMMON, "--method", method, "--budget", "64", "--out", str(out)]) == 0
    tidy = pd.read_csv(out)
    width = tidy["width"].to_numpy()
    np.testing.assert_allclose(tidy["total"], tidy["calibration"] + tidy["instance"],
                               rtol=0, atol=1e-10 * width.max())
    sampled = {"calibration_se", "instance_se", "total_se"} <= set(tidy.columns)
    # KernelSHAP at a budget covering all 2^5 coalitions is exact: no sampling error then.
    assert sampled == build_design(method, 5, budget=64).sampled


@pytest.mark.parametrize("method", list(NOT_DECOMPOSABLE))
def test_non_decomposable_methods_are_refused_with_the_reason(method, tmp_path, capsys):
    assert main([*COMMON, "--method", method, "--out", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err
    assert "cannot be decomposed" in err and err.count("\n") == 1


def test_feature_groups_are_single_players_and_stay_efficient(tmp_path):
    out = tmp_path / "o.json"
    assert main([*COMMON, "--group", "bmi,bp", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["meta"]["features"] == ["bmi + bp", "age", "s1 tc", "s5 ltg"]
    for patient in report["patients"]:
        total = sum(f["total"] for f in patient["features"])
        np.testing.assert_allclose(total, patient["width"] - patient["base_width"],
                                   atol=1e-9 * patient["width"])
        assert " | " in patient["features"][0]["feature_value"]


def test_unknown_group_member_is_one_clear_line(tmp_path, capsys):
    assert main([*COMMON, "--group", "bmi,nope", "--out", str(tmp_path / "o.csv")]) == 2
    assert "'nope'" in capsys.readouterr().err

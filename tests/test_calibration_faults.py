"""The calibration-faults setting: its faults are the ones it names, its rule can fail, and one
replicate gives the exact zeros that hold by construction."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from experiments import calibration_faults as cf


def test_faults_are_the_ones_named():
    shifted, _ = cf.calibration_set("covariate shift", np.random.default_rng(0))
    assert abs(shifted["site_b"].mean() - cf.SHIFTED_SITE_B_SHARE) < 0.05
    clean_table, clean_y = cf.population(np.random.default_rng(1), cf.N_CAL)
    noisy_table, noisy_y = cf.calibration_set("label noise", np.random.default_rng(1))
    pd.testing.assert_frame_equal(clean_table, noisy_table)  # the covariates are untouched
    changed = clean_y != noisy_y
    site_b = clean_table["site_b"].to_numpy() == 1
    assert not changed[~site_b].any()  # only site-B rows get label noise
    assert changed[site_b].sum() == site_b.sum() // 2
    small, _ = cf.calibration_set("small n_cal", np.random.default_rng(2))
    assert len(small) == cf.N_SMALL


def raw_frame(control_fires: bool = False, named_fires: bool = True,
              misrecord_share: float = 0.9, small_ratio: float = 4.0) -> pd.DataFrame:
    rows = []
    for replicate in range(10):
        for cell in cf.CALIBRATION_CELLS:
            for feature in cf.FEATURES:
                fires = ((cell in cf.CALIBRATION_NAMED and feature == "site_b" and named_fires)
                         or (cell == "representative" and feature == "x_mean"
                             and control_fires))
                rows.append({"replicate": replicate, "kind": "calibration", "cell": cell,
                             "feature": feature, "fires": fires, "interval_width": small_ratio,
                             "reference_interval_width": 1.0})
        for cell in cf.PATIENT_CELLS:
            for feature in cf.FEATURES:
                share = misrecord_share if cf.PATIENT_NAMED.get(cell) == feature else 0.05
                rows.append({"replicate": replicate, "kind": "patients", "cell": cell,
                             "feature": feature, "fire_share": share,
                             "any_real_fire_share": 0.14})
    return pd.DataFrame(rows)


def test_rule_holds_only_when_every_part_does():
    assert cf.rules(raw_frame())[1] == "reproduced"
    # A control that fires breaks the rule outright: the readings then say nothing.
    assert cf.rules(raw_frame(control_fires=True))[1] == "not reproduced"
    assert cf.rules(raw_frame(misrecord_share=0.5))[1] == "not reproduced"
    # The calibration faults unseen, the patient side and the controls fine: partly.
    assert cf.rules(raw_frame(named_fires=False))[1] == "partly reproduced"
    table, status = cf.rules(raw_frame(named_fires=False, small_ratio=1.5))
    assert status == "not reproduced" and not table["held"].iloc[:2].any()


@pytest.mark.slow
def test_one_replicate_keeps_the_parts_apart_exactly():
    raw = pd.DataFrame(cf.one_replicate(0, seed=3, bootstrap=40, alpha=0.1))
    patients = raw[raw["kind"] == "patients"]
    assert (patients["delta_phi_c"] == 0).all()  # a patient's values never move φ_C
    calibration = raw[raw["kind"] == "calibration"]
    assert set(calibration["cell"]) == set(cf.CALIBRATION_CELLS)
    # Null columns never fire "recalibrate" (the rule compares against them).
    assert not calibration[calibration["feature"].isin(cf.NULLS)]["fires"].any()
    assert (calibration["delta_low"] <= calibration["delta_high"]).all()
    small = calibration[(calibration["cell"] == "small n_cal")
                        & calibration["feature"].isin(cf.REAL)]
    assert (small["interval_width"] > small["reference_interval_width"]).all()


def test_share_interval_is_wilsons():
    from experiments.resampling import share_interval

    none = share_interval([False] * 20)
    assert none.estimate == 0 and none.low == 0
    np.testing.assert_allclose(none.high, 1.959964**2 / (20 + 1.959964**2), rtol=1e-6)
    half = share_interval([True, False] * 10)
    np.testing.assert_allclose([half.low, half.high], [0.2993, 0.7007], atol=1e-4)

"""Claim 2's pre-registered decision task: scores, Holm, the rule, and that the rule can fail.

The constructed cases feed hand-made attributions through the same scoring, inference and
verdict code as the real run; the null case runs real fits on homoscedastic outcomes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from experiments import decision_task as dt
from experiments.config import TINY
from experiments.verdicts import decision_verdict

ROLES = ["dual", "noise-only", "mean-only", ""]
N = 200


def test_holm_matches_the_step_down_by_hand():
    p = np.array([0.01, 0.04, 0.03, 0.005, np.nan])
    # sorted 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 → max(0.04, 0.06) = 0.06
    np.testing.assert_allclose(dt.holm(p)[:4], [0.03, 0.06, 0.06, 0.02], rtol=1e-12)
    assert np.isnan(dt.holm(p)[4])
    np.testing.assert_allclose(dt.holm(np.array([0.5, 0.9])), [1.0, 1.0])  # capped, monotone


def test_high_uncertainty_ties_are_broken_at_random_with_the_stated_size():
    sigma = np.ones(100)
    a = dt.ranked_first(sigma, 0.15, np.random.default_rng(1))
    b = dt.ranked_first(sigma, 0.15, np.random.default_rng(2))
    assert a.sum() == b.sum() == 15 and (a != b).any()
    distinct = dt.ranked_first(np.arange(100.0), 0.15, np.random.default_rng(1))
    assert distinct[85:].all() and distinct.sum() == 15
    assert dt.top_share(np.arange(100.0), 0.30).sum() == 30


def test_fixed_quantile_view_keeps_signs_and_sums_to_the_log_width_gap():
    rng = np.random.default_rng(3)
    fixed = rng.normal(scale=0.3, size=(20, 4))
    width = 3.0 + rng.random(20)
    on_log = dt.fixed_quantile_on_log_scale(fixed, width)
    np.testing.assert_array_equal(np.sign(on_log), np.sign(fixed))
    masked = width - fixed.sum(axis=1)
    np.testing.assert_allclose(on_log.sum(axis=1), np.log(width) - np.log(masked), rtol=1e-10)


def test_score_draw_counts_by_hand():
    # 4 patients, features [dual, noise-only, mean-only, none]; patient 0 has the largest σ.
    truth = np.array([[True, True, False, False]] + [[False] * 4] * 3)
    phi = np.array([[-0.1, 0.5, 0.3, -0.2],
                    [0.0, 0.0, 0.4, -0.1],
                    [0.0, 0.0, -0.1, -0.1],
                    [0.0, 0.0, -0.2, 0.1]])
    sigma = np.array([4.0, 3.0, 2.0, 1.0])
    config = TINY.with_changes(high_uncertainty_share=0.25, budgets=(0.25,))
    rows = dt.score_draw({"instance": phi}, np.array([1.0, 2.0, 3.0, 4.0]), truth, ROLES,
                         sigma, config, np.random.default_rng(0))
    got = {(v, s): (num, den) for v, s, num, den in rows}
    assert got["instance", "false_reassurance"] == (1.0, 2.0)        # the dual driver < 0
    assert got["instance", "false_reassurance[dual]"] == (1.0, 1.0)
    assert got["instance", "false_reassurance[noise-only]"] == (0.0, 1.0)
    assert got["instance", "false_alarm_pairs"] == (3.0, 8.0)         # 0.3, 0.4, 0.1 > 0
    # The mirror of false reassurance: a driver-role feature shown raising the width for a
    # patient it does not drive (every patient; patient 0's drivers are not counted).
    assert got["instance", "false_alarm[dual]"] == (0.0, 3.0)
    assert got["instance", "false_alarm[noise-only]"] == (0.0, 3.0)
    assert got["instance", "low_flagged"] == (0.0, 2.0)               # patients 2, 3: < ln 1.25
    assert got["instance", "precision@1"] == (1.0, 1.0)               # top is noise-only 0.5
    assert got["instance", "precision@3"] == (1.0, 2.0)               # 0.5 true, 0.3 not
    assert got["instance", "recall@0.25"] == (1.0, 1.0)               # largest push: patient 0
    assert got[dt.WIDTH, "recall@0.25"] == (0.0, 1.0)                 # widest: patient 3
    phi[1:, 1] = [0.2, 0.0, 0.3]
    rows = dt.score_draw({"instance": phi}, np.array([1.0, 2.0, 3.0, 4.0]), truth, ROLES,
                         sigma, config, np.random.default_rng(0))
    got = {(v, s): (num, den) for v, s, num, den in rows}
    assert got["instance", "false_alarm[noise-only]"] == (2.0, 3.0)


def constructed(setting: str, views_of, draws: int = 10, phi_c=(-0.3, 0.3)) -> pd.DataFrame:
    """Per-draw records of one cell from hand-made attributions (views_of(truth, rng))."""
    records = []
    for draw in range(draws):
        rng = np.random.default_rng(draw)
        sigma = np.linspace(2.0, 1.0, N)  # patients 0..29 are the high-uncertainty 15 %
        high = np.arange(N) < 30
        null = dt.SETTING_BY_NAME[setting].null
        truth = np.zeros((N, 4), dtype=bool) if null else np.outer(high, [1, 1, 0, 0]) > 0
        roles = [""] * 4 if null else ROLES
        views = views_of(truth, high, rng)
        cell = {"setting": setting, "model": "gbm", "n_cal": 500, "alpha": 0.1, "draw": draw}
        for view, score, num, den in dt.score_draw(views, sigma[::-1].copy(), truth, roles,
                                                   sigma, TINY, rng):
            records.append({**cell, "view": view, "score": score, "num": num, "den": den})
        if not null:
            for role, value in zip(dt.DRIVER_ROLES, phi_c, strict=True):
                records.append({**cell, "view": "calibration", "score": f"phi_C[{role}]",
                                "num": value + rng.normal(scale=0.01), "den": 1.0})
    return pd.DataFrame(records)


def judged(*frames: pd.DataFrame) -> tuple[pd.DataFrame, object]:
    frame = pd.concat(frames, ignore_index=True)
    scores, tests = dt.infer(frame, 400, np.random.default_rng(0))
    units = dt.rule_units(scores, tests)
    results = dt.DecisionResults(scores, tests, units, pd.DataFrame(), 10)
    return units, decision_verdict(results)


def base(truth: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """True drivers shown raising the width, everything else shown lowering it."""
    return np.where(truth, 1.0, -1.0) + rng.normal(scale=0.05, size=truth.shape)


def views(instance: np.ndarray, total: np.ndarray) -> dict[str, np.ndarray]:
    return {"instance": instance, "total": total, "joint": np.minimum(instance, total),
            "fixed-q̂": instance}


def test_a_constructed_case_where_the_total_wins_is_reported_as_the_total_winning():
    def total_wins(truth, high, rng):
        total = base(truth, rng)
        instance = total.copy()
        instance[:, 0] = np.where(truth[:, 0], -0.5, instance[:, 0])  # dual drivers shown < 0
        return views(instance, total)

    units, verdict = judged(constructed("|β|=0.8 same", total_wins))
    dual = units[units["role"] == "dual"].iloc[0]
    assert dual["winner"] == "total" and not dual["holds_instance"]
    assert verdict.status == "not reproduced"
    assert any("the total view wins in 1 units: gbm, n_cal=500, |β|=0.8 same, dual drivers"
               in line for line in verdict.evidence)
    assert any(line.startswith("the claim loses in 2 units") for line in verdict.evidence)


def test_one_way_gains_of_the_instance_view_off_the_rule_are_not_called_mixed():
    def fewer_alarms(truth, high, rng):
        total = base(truth, rng)
        instance = total.copy()
        total[:, 2] = 0.5  # the total shows a mean-only feature raising every width
        return views(instance, total)

    units, verdict = judged(constructed("|β|=0.8 same", fewer_alarms))
    assert set(units["winner"]) == {dt.INSTANCE_NOT_RULE}
    assert not units["holds_instance"].any() and verdict.status == "not reproduced"


def offset(instance: np.ndarray, phi_c=(-0.3, 0.3)) -> np.ndarray:
    """The total as the algebra makes it: φ_T = φ_I + φ_C, one constant per feature (the dual
    and noise-only columns get the cell's φ_C, the others 0)."""
    return instance + np.array([*phi_c, 0.0, 0.0])


def test_the_rule_passes_only_when_the_instance_view_wins_on_both_sides_of_phi_c():
    # Dual drivers: φ_C = −0.3 pushes the total to hide them (false reassurance); noise-only:
    # φ_C = +0.3 pushes the total to raise them where they are no driver (false alarms).
    def instance_wins(near_zero_where):
        def make(truth, high, rng):
            instance = base(truth, rng)
            for j in near_zero_where:  # instance values the offset moves across zero
                instance[:, j] = np.where(truth[:, j], 0.15, -0.15) + rng.normal(
                    scale=0.01, size=len(truth))
            return views(instance, offset(instance))
        return make

    units, verdict = judged(constructed("|β|=0.8 same", instance_wins([0, 1])))
    assert set(units["side"]) == {"negative", "positive"}
    assert list(units["primary_score"]) == ["false_reassurance[dual]",
                                            "false_alarm[noise-only]"]
    assert units["holds_instance"].all() and verdict.status == "reproduced"
    # The first amendment's rule (false reassurance on both sides) cannot hold where φ_C > 0.
    assert list(units["old_rule_instance"]) == [True, False]
    # Only the dual drivers are moved across zero: the positive side has no gain, partly.
    units, verdict = judged(constructed("|β|=0.8 same", instance_wins([0])))
    assert list(units["holds_instance"]) == [True, False]
    assert verdict.status == "partly reproduced"


def test_the_symmetric_rule_can_say_the_claim_loses_on_either_side():
    """φ_C's sign does not decide it: where the offset moves both a role's drivers and its
    non-driver pairs across zero, the instance view's gain on one error is paid on the other,
    and the rule says "loses" on both sides."""
    def trade_off(truth, high, rng):
        # Dual (φ_C < 0): instance +0.15 everywhere → the total hides the drivers (the instance
        # view wins on false reassurance) but the instance view raises every non-driver pair.
        # Noise-only (φ_C > 0): instance −0.15 everywhere → the instance view spares the
        # non-driver pairs but hides the drivers.
        instance = base(truth, rng)
        noise = rng.normal(scale=0.01, size=len(truth))
        instance[:, 0] = 0.15 + noise
        instance[:, 1] = -0.15 + noise
        return views(instance, offset(instance))

    units, verdict = judged(constructed("|β|=0.8 same", trade_off))
    assert set(units["side"]) == {"negative", "positive"}
    assert not (units["holds_instance"] | units["holds_joint"]).any()
    assert verdict.status == "not reproduced"
    assert any(line.startswith("the claim loses in 2 units") for line in verdict.evidence)
    fr = units.set_index("role")["FR_instance_minus_total"]
    fa = units.set_index("role")["FA_instance_minus_total"]
    assert fr["dual"] < -0.9 and fa["dual"] > 0.9            # better on FR, worse on FA
    assert fa["noise-only"] < -0.9 and fr["noise-only"] > 0.9


def test_the_null_false_alarms_are_reported():
    def more_alarms(truth, high, rng):
        instance = base(truth, rng)
        instance[:, 0] = 0.1  # the instance view raises one feature for every patient
        total = instance.copy()
        total[:, 0] = -0.2    # a negative φ_C pulls it below zero in the total
        return views(instance, total)

    _, verdict = judged(constructed("null (homoscedastic)", more_alarms))
    line = next(e for e in verdict.evidence if e.startswith("homoscedastic null, false alarms"))
    assert "more in 1 of 1 cells, Holm-significantly in 1" in line
    assert "gbm, n_cal=500: +25.0 pp" in line


def test_a_null_where_one_view_finds_more_high_uncertainty_patients_breaks_the_rule():
    def recall_gap(truth, high, rng):
        instance = base(truth, rng)
        instance[high, 1] = 1.0  # "finds" patients that no driver makes uncertain
        return views(instance, base(truth, rng))

    _, verdict = judged(constructed("null (homoscedastic)", recall_gap))
    assert verdict.status.startswith("rule broken")


@pytest.mark.slow
def test_on_homoscedastic_outcomes_the_rule_does_not_pass():
    """Real fits: with no true driver, no view may beat another on recall, nor pass the rule."""
    config = TINY.with_changes(decision_settings=("null (homoscedastic)",), decision_draws=5,
                               alphas=(0.1,), bootstrap=300)
    results = dt.run(config, seed=4)
    verdict = decision_verdict(results)
    assert dt.null_passes(results.comparisons).empty
    assert verdict.status == "not reproduced"
    recall = results.comparisons[results.comparisons["score"].str.startswith("recall")]
    assert len(recall) == 20 and recall["p"].notna().all()
    # No true driver anywhere: false reassurance has nothing to count.
    fr = results.scores[results.scores["score"] == "false_reassurance"]
    assert fr["estimate"].isna().all()

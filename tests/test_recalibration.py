"""Recalibration explained (core.recalibration): two or more calibration sets of one fitted system.

The science checks can fail:
(1) B drawn from A's population: Δφ_C's interval holds 0 for ≥ 85 % of (patient, feature) pairs
    and the flag (the interval excludes 0) fires no more often than its nominal 10 % plus a
    binomial allowance; a comparison that resamples only one of the sets fails the same rule;
(2) B with a known shift: Δφ_C concentrates on the shifted feature, and the engine's φ_C of
    both sets equals a brute force over all coalitions written here from the method page;
(3) the identities Σ_j Δφ_T,j = Δ(width − base width), and in the separating units the same
    for Σ_j Δφ_C,j alone, to 1e-10 of the width for every family and every linear method;
    φ_I identical bit for bit there; in width units φ_I scales by L_B/L_A;
(4) the interval's coverage of the population Δφ_C over fresh sets (the fast version of
    experiments/recalibration.py; the full run is docs/results/recalibration.md).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from cpdecomp import FAMILIES, Explainer, fit_system, load_table, split_rows, target_values
from cpdecomp.core.attribution import METHOD_BUDGETS, METHODS
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.games import CalibrationGame
from cpdecomp.core.games.cache import GameCache
from cpdecomp.core.recalibration import compare_calibrations, split_calibration
from cpdecomp.core.system import system_from_functions
from experiments import recalibration as experiment

FEATURES = ("x0", "x1", "x2", "x3")
ALPHA = 0.1
NOMINAL_FLAG_RATE = 0.10
FLAG_ALLOWANCE = 0.99
"""The flag rate may exceed 10 % by what a binomial count over the (repetition, feature) units
reaches with probability 1 %: binom.ppf(0.99, units, 0.10) / units (0.158 at 120 units)."""


def mean(x):
    return x[:, 0] + 0.5 * x[:, 1]


def sigma(x):
    return np.exp(0.3 * x[:, 0] + 0.4 * x[:, 2])


def draw(rng, n, x0_shift=0.0, x2_scale=0.0):
    """A's population, or B's with x0 moved or the residual scale growing with x2 (divided
    by NOISE_LEVEL[x2_scale] so that the overall level of the scores stays A's)."""
    x = rng.normal(size=(n, 4))
    x[:, 0] += x0_shift
    growth = np.exp(x2_scale * x[:, 2]) / NOISE_LEVEL.get(x2_scale, 1.0)
    y = mean(x) + sigma(x) * growth * rng.normal(size=n)
    return pd.DataFrame(x, columns=list(FEATURES)), y


def _level(scale: float) -> float:
    """The factor that keeps the 90 % quantile of |ε|·exp(scale·x2) at that of |ε|."""
    rng = np.random.default_rng(99)
    eps, x2 = rng.normal(size=400_000), rng.normal(size=400_000)
    return float(np.quantile(np.abs(eps) * np.exp(scale * x2), 0.9)
                 / np.quantile(np.abs(eps), 0.9))


NOISE_LEVEL = {0.7: _level(0.7)}


@pytest.fixture(scope="module")
def world():
    """The oracle normalized system, an explainer (32 background rows) and patients."""
    training, _ = draw(np.random.default_rng(0), 1000)
    fitted = system_from_functions("normalized", {"f": mean, "sigma": sigma}, training)
    first = fitted.conformalize(*draw(np.random.default_rng(1), 200))
    explainer = Explainer(first, background_size=32, seed=0, cache=GameCache())
    patients, _ = draw(np.random.default_rng(2), 10)
    return fitted, explainer, patients


# ----------------------------------------------------------------- (1) the same population


def null_rule(fitted, explainer, patients, repetitions=40, n=300):
    """(share of (repetition, patient, used feature) whose Δ interval holds 0, flag rate over
    (repetition, used feature), units) for B drawn like A."""
    rng = np.random.default_rng(7)
    holds, flags = [], []
    for _ in range(repetitions):
        result = compare_calibrations(fitted, {"A": draw(rng, n), "B": draw(rng, n)}, patients,
                                      explainer=explainer, calibration_bootstrap=200).set("B")
        zero = result.change_holds_zero[:, :3]  # x3 is a null player: Δ ≡ 0
        holds.append(zero)
        flags.append(~zero[0])
    return float(np.mean(holds)), float(np.mean(flags)), repetitions * 3


def test_same_population_changes_are_within_the_noise(world):
    share, flag_rate, units = null_rule(*world)
    allowed = binom.ppf(FLAG_ALLOWANCE, units, NOMINAL_FLAG_RATE) / units
    assert share >= 0.85, share
    assert flag_rate <= allowed, (flag_rate, allowed)


def test_resampling_only_one_set_fails_the_same_rule(world, monkeypatch):
    """The rule has power: with the reference's resamples frozen at its estimate (only B
    resampled), the interval is about 1/√2 too narrow and the flag fires too often."""
    original = CalibrationGame.bootstrap_values

    def frozen_reference(self, alpha, n_replicates, seed=0, stream=0):
        if stream == 0:
            return np.tile(self.values(alpha), (n_replicates, 1))
        return original(self, alpha, n_replicates, seed, stream)

    monkeypatch.setattr(CalibrationGame, "bootstrap_values", frozen_reference)
    _, flag_rate, units = null_rule(*world)
    assert flag_rate > binom.ppf(FLAG_ALLOWANCE, units, NOMINAL_FLAG_RATE) / units, flag_rate


# ---------------------------------------------------- (2) a known shift, against brute force


def brute_force(background, table, y, alpha=ALPHA):
    """φ_C and v_C(∅) in log units, from the method page alone: every coalition S, the
    components masked by averaging over the background, the scores recomputed, the k-th
    smallest with k = ⌈(n + 1)(1 − α)⌉, and Shapley weights |S|!(d − |S| − 1)!/d!."""
    x = table[list(FEATURES)].to_numpy(dtype=float)
    n, d = x.shape
    k = math.ceil((n + 1) * (1 - Fraction(str(alpha))))
    value = {}
    for members in itertools.product((False, True), repeat=d):
        keep = np.array(members)
        hybrid = np.where(keep[None, None, :], x[:, None, :], background[None, :, :])
        flat = hybrid.reshape(-1, d)
        f_s = mean(flat).reshape(n, -1).mean(axis=1)
        sigma_s = sigma(flat).reshape(n, -1).mean(axis=1)
        value[members] = math.log(2 * np.sort(np.abs(y - f_s) / sigma_s)[k - 1])
    phi = np.zeros(d)
    for j in range(d):
        for members, v in value.items():
            if members[j]:
                continue
            size = sum(members)
            weight = math.factorial(size) * math.factorial(d - size - 1) / math.factorial(d)
            joined = tuple(True if i == j else m for i, m in enumerate(members))
            phi[j] += weight * (value[joined] - v)
    return phi, value[(False,) * d], value[(True,) * d]


@pytest.mark.parametrize(("shift", "named", "ratio"), [
    ({"x2_scale": 0.7}, "x2", 2.5),
    ({"x0_shift": 1.0}, "x0", 3.0),
])
def test_a_known_shift_moves_its_own_feature_as_brute_force_says(world, shift, named, ratio):
    fitted, explainer, patients = world
    rng = np.random.default_rng(11)
    sets = {"A": draw(rng, 1000), "B": draw(rng, 1000, **shift)}
    comparison = compare_calibrations(fitted, sets, patients, explainer=explainer, units="log")
    brute = {name: brute_force(explainer.background, *rows) for name, rows in sets.items()}
    for name in sets:
        np.testing.assert_allclose(comparison.set(name).decomposition.calibration,
                                   np.tile(brute[name][0], (len(patients), 1)), rtol=0,
                                   atol=1e-10)
    change = brute["B"][0] - brute["A"][0]
    result = comparison.set("B")
    np.testing.assert_allclose(result.change[0], change, rtol=0, atol=1e-10)
    j = FEATURES.index(named)
    others = np.delete(np.abs(change), j)
    assert np.argmax(np.abs(change)) == j
    assert abs(change[j]) >= ratio * others.max(), change
    assert not result.change_holds_zero[0, j]  # the shifted feature's change is beyond noise
    # Width units: Δφ_C = L_B·φ_C(B) − L_A·φ_C(A), L of each set's width and featureless
    # width, from the brute force's own widths (U = 2q̂σ(x), U_∅ = 2 q̂_∅ mean_b σ(b)).
    in_width = compare_calibrations(fitted, sets, patients, explainer=explainer, units="width",
                                    calibration_bootstrap=0)
    x = patients[list(FEATURES)].to_numpy(dtype=float)
    sigma_empty = sigma(explainer.background).mean()

    def factor(name):
        _, empty, full = brute[name]
        width = np.exp(full) * sigma(x)
        base = np.exp(empty) * sigma_empty
        return (width - base) / (np.log(width) - np.log(base))

    expected = factor("B")[:, None] * brute["B"][0] - factor("A")[:, None] * brute["A"][0]
    np.testing.assert_allclose(in_width.set("B").change, expected, rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------- (3) identities, every method


@pytest.fixture(scope="module")
def diabetes():
    table = load_table("sample_data/diabetes.csv")
    y = target_values(table, "progression")
    return table, y, split_rows(len(table), (0.5, 0.25, 0.25), seed=0)


IDENTITY_FEATURES = ["age", "bmi", "bp", "s1 tc", "s5 ltg", "s6 glu"]


@pytest.fixture(scope="module")
def fitted_families(diabetes):
    table, y, (train, _, _) = diabetes
    return {family: fit_system(table.iloc[train], y[train], IDENTITY_FEATURES, family=family,
                               seed=0) for family in FAMILIES}


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_change_identities_hold_for_every_family_and_method(diabetes, fitted_families, family,
                                                            method):
    table, y, (_, cal, test) = diabetes
    fitted = fitted_families[family]
    spec = METHOD_BUDGETS[method]
    budget = None if spec is None else max(10, 2 * spec.minimum(len(IDENTITY_FEATURES)))
    sets = {"A": (table.iloc[cal], y[cal]), "B": (table.iloc[test[20:]], y[test[20:]])}
    patients = table.iloc[test[:20]]
    explainer = Explainer(fitted.conformalize(*sets["A"]), background_size=12, seed=0)
    separating = "log" if FAMILIES[family].scale == "log" else "width"
    frames = {}
    for units in {"width", separating}:
        comparison = compare_calibrations(fitted, sets, patients, method=method, budget=budget,
                                          units=units, explainer=explainer,
                                          calibration_bootstrap=0)
        frames[units] = (comparison, comparison.to_frame())
    comparison, frame = frames["width"]
    a, b = (frame[frame["set"] == name].reset_index(drop=True) for name in ("A", "B"))
    width = float(frame["width"].max())
    per_patient = lambda rows, column: rows.groupby("patient_id", sort=False)[column]  # noqa: E731
    change_total = per_patient(b, "total").sum() - per_patient(a, "total").sum()
    gap = ((per_patient(b, "width").first() - per_patient(b, "base_width").first())
           - (per_patient(a, "width").first() - per_patient(a, "base_width").first()))
    total_gap = float(np.max(np.abs(change_total - gap)))
    separated, sep_frame = frames[separating]
    sa, sb = (sep_frame[sep_frame["set"] == name].reset_index(drop=True) for name in ("A", "B"))
    np.testing.assert_array_equal(sa["instance"].to_numpy(), sb["instance"].to_numpy())
    assert separated.identity["instance_identical"] and separated.identity["instance_change"] == 0
    # Every linear method: the total's change is the calibration part's change, where φ_I is
    # the same array.
    np.testing.assert_allclose(sb["total"] - sa["total"],
                               sb["calibration_change"], rtol=0, atol=1e-12 * width)
    if separating == "log":
        t_gap = lambda rows: np.log(rows["width"]) - np.log(rows["base_width"])  # noqa: E731
    else:
        t_gap = lambda rows: rows["width"] - rows["base_width"]  # noqa: E731
    sep_gap = (per_patient(sb.assign(g=t_gap(sb)), "g").first()
               - per_patient(sa.assign(g=t_gap(sa)), "g").first())
    calibration_gap = float(np.max(np.abs(per_patient(sb, "calibration_change").sum()
                                          - sep_gap)))
    if METHODS[method].efficient:
        assert total_gap <= 1e-10 * width, total_gap
        assert calibration_gap <= 1e-10 * width, calibration_gap
        assert comparison.identity["total_change_gap"] <= 1e-10 * width
        assert separated.identity["calibration_change_gap"] <= 1e-10 * width
    else:  # reported, not asserted: the engine's gap is the one the file shows
        assert not comparison.identity["efficient"]
        assert abs(comparison.identity["total_change_gap"] - total_gap) <= 1e-10 * width
    if separating == "log":  # width units: φ_I scales by L_B/L_A, not by q̂_B/q̂_A
        ratio = b["instance"] / a["instance"]
        factors = b["log_mean_factor"] / a["log_mean_factor"]
        used = np.abs(a["instance"]) > 1e-9 * width
        np.testing.assert_allclose(ratio[used], factors[used], rtol=1e-9)
        q_ratio = comparison.set("B").q_hat / comparison.set("A").q_hat
        assert np.max(np.abs(factors - q_ratio)) > 1e-3


# ------------------------------------------------------------------------- (4) coverage


def test_interval_covers_the_population_change_over_fresh_sets():
    """The fast version of experiments/recalibration.py: 30 pairs of fresh sets per cell,
    the population change from sets of 40,000 rows; pooled coverage at least what a binomial
    count at 90 % reaches with probability 99 %."""
    results = experiment.run(repetitions=30, population_rows=40_000, sizes=(500,),
                             families=("normalized",),
                             cells=("same population", "x0 moves"), bootstrap=200)
    used = experiment.used_rows(results.raw)
    units = len(used)
    assert units == 30 * 2 * 3
    floor = binom.ppf(1 - FLAG_ALLOWANCE, units, 0.9) / units
    assert used["covers"].mean() >= floor, used["covers"].mean()
    moved = results.summary[(results.summary["cell"] == "x0 moves")
                            & (results.summary["feature"] == "x0")]
    assert float(moved["holds_zero"].iloc[0]) < 0.2  # a real shift is seen
    page = experiment.section(results)
    assert "coverage" in page and "x0 moves" in page


# ---------------------------------------------------------------- the engine's own contract


def test_stream_zero_is_the_bootstrap_explain_always_used(world):
    _, explainer, _ = world
    game = explainer.calibration_game("exact", keep_order=True)
    np.testing.assert_array_equal(game.bootstrap_values(ALPHA, 20, seed=3),
                                  game.bootstrap_values(ALPHA, 20, seed=3, stream=0))
    assert not np.array_equal(game.bootstrap_values(ALPHA, 20, seed=3),
                              game.bootstrap_values(ALPHA, 20, seed=3, stream=1))
    with pytest.raises(ValueError, match="stream"):
        game.bootstrap_values(ALPHA, 20, stream=-1)


def test_the_reference_keeps_explains_interval_and_reads_zero(world):
    fitted, explainer, patients = world
    rng = np.random.default_rng(5)
    b = draw(rng, 300)
    comparison = compare_calibrations(fitted, {"A": explainer.system, "B": b}, patients,
                                      explainer=explainer, calibration_bootstrap=50)
    own = explainer.explain(patients, calibration_bootstrap=50).decomposition
    reference = comparison.set("A")
    np.testing.assert_array_equal(reference.decomposition.calibration_low, own.calibration_low)
    np.testing.assert_array_equal(reference.decomposition.calibration_high,
                                  own.calibration_high)
    np.testing.assert_array_equal(reference.change, 0.0)
    assert np.isnan(reference.change_low).all() and np.isnan(reference.change_high).all()
    assert not reference.change_holds_zero.any()
    frame = comparison.to_frame()
    assert list(frame.columns[:4]) == ["patient_id", "feature", "feature_value", "set"]
    assert len(frame) == len(patients) * len(FEATURES) * 2
    rows = frame[frame["set"] == "A"]
    assert (rows["calibration_change"] == 0).all() and rows["calibration_change_low"].isna().all()
    assert not rows["calibration_change_holds_zero"].any()


def test_sets_share_the_background_tables_and_designs(world):
    fitted, explainer, _ = world
    other = explainer.with_calibration(fitted.conformalize(*draw(np.random.default_rng(4), 50)))
    assert other.evaluator is explainer.evaluator and other.background is explainer.background
    assert other.design("exact") is explainer.design("exact")
    assert other._games is not explainer._games
    refit = system_from_functions("normalized", {"f": mean, "sigma": sigma},
                                  draw(np.random.default_rng(0), 50)[0])
    with pytest.raises(ValueError, match="same fitted system"):
        explainer.with_calibration(refit.conformalize(*draw(np.random.default_rng(4), 50)))


def test_coverage_is_each_sets_intervals_on_the_others_rows(world):
    fitted, explainer, patients = world
    rng = np.random.default_rng(6)
    sets = {"A": draw(rng, 200), "B": draw(rng, 200, x2_scale=0.7), "C": draw(rng, 150)}
    y_patients = rng.normal(size=len(patients))
    comparison = compare_calibrations(fitted, sets, patients, explainer=explainer,
                                      reference="C", patient_targets=y_patients,
                                      calibration_bootstrap=0)
    assert comparison.reference == "C" and comparison.names == ("A", "B", "C")
    table = comparison.coverage.set_index(["intervals", "rows"])
    assert len(table) == 3 * 2 + 3  # every other set, and the patients
    system_a = fitted.conformalize(*sets["A"])
    lower, upper = system_a.predict_interval(sets["B"][0], ALPHA)
    y_b = sets["B"][1]
    assert table.loc[("A", "B"), "covered"] == np.sum((y_b >= lower) & (y_b <= upper))
    assert table.loc[("A", "B"), "n"] == 200
    result_b = comparison.set("B")
    assert table.loc[("B", "patients"), "covered"] == np.sum(
        (y_patients >= result_b.lower) & (y_patients <= result_b.upper))


@pytest.mark.parametrize(("sets", "reference", "needle"), [
    (1, None, "at least two calibration sets"),
    (2, "b", "did you mean 'B'"),
    (2, "zzz", "the sets are 'A', 'B'"),
])
def test_bad_comparisons_are_refused_by_name(world, sets, reference, needle):
    fitted, explainer, patients = world
    rng = np.random.default_rng(8)
    given = dict(list({"A": draw(rng, 50), "B": draw(rng, 50)}.items())[:sets])
    with pytest.raises(CpdecompError, match=needle):
        compare_calibrations(fitted, given, patients, reference=reference, explainer=explainer)


def test_a_set_too_small_or_without_a_feature_is_named(world):
    fitted, explainer, patients = world
    rng = np.random.default_rng(9)
    with pytest.raises(CpdecompError, match=r"calibration set 'site B' has 5 rows; alpha = "
                                            r"0.1 needs at least 9"):
        compare_calibrations(fitted, {"A": draw(rng, 50), "site B": draw(rng, 5)}, patients,
                             explainer=explainer)
    table, y = draw(rng, 50)
    with pytest.raises(CpdecompError, match="calibration set 'B' has no feature column 'x2'"):
        compare_calibrations(fitted, {"A": draw(rng, 50), "B": (table.drop(columns="x2"), y)},
                             patients, explainer=explainer)


def test_split_calibration_orders_its_values_and_says_what_it_left_out():
    rng = np.random.default_rng(10)
    table, y = draw(rng, 60)
    table = table.assign(y=y, period=np.repeat([10.0, 2.0, np.nan], 20))
    table.loc[0, "y"] = np.nan
    sets, notes = split_calibration(table, "period", "y")
    assert list(sets) == ["2", "10"]  # numbers as numbers, 2.0 read as 2
    assert len(sets["10"][0]) == 19 and len(sets["2"][0]) == 20
    assert any("20 calibration rows have no value of 'period'" in n for n in notes)
    assert any("1 calibration rows have no target value" in n for n in notes)
    with pytest.raises(CpdecompError, match="nothing to compare"):
        split_calibration(table.assign(period=1), "period", "y")
    with pytest.raises(CpdecompError, match="distinct values"):
        split_calibration(table, "x0", "y")
    with pytest.raises(CpdecompError, match="did you mean 'period'"):
        split_calibration(table, "perod", "y")

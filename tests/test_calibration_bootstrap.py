"""φ_C's bootstrap interval: the weighted order statistics it walks to, its coverage of a known
answer over seeds, and that it costs no model call once the game is kept."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from cpdecomp import Explainer, system_from_functions
from cpdecomp.core.conformal import conformal_rank
from cpdecomp.core.games.calibration import _weighted_order_statistics


def test_weighted_order_statistic_is_the_kth_of_the_resampled_multiset():
    rng = np.random.default_rng(0)
    n, n_coalitions, n_replicates = 57, 9, 40
    scores = rng.exponential(size=(n_coalitions, n)).round(1)  # ties on purpose
    order = np.argsort(scores, axis=1, kind="stable").astype(np.int32)
    sorted_scores = np.take_along_axis(scores, order, axis=1)
    counts = rng.multinomial(n, np.full(n, 1 / n), size=n_replicates).astype(np.int32)
    for alpha in (0.05, 0.1, 0.3):
        k = conformal_rank(n, alpha)
        got = _weighted_order_statistics(sorted_scores, order, counts, k)
        for r in range(n_replicates):
            for c in range(n_coalitions):
                resampled = np.sort(np.repeat(scores[c], counts[r]))
                assert got[r, c] == resampled[k - 1]


def cf_abs_system(seed: int, n_calibration: int, n_train: int = 2000):
    """CF-abs (method page §8): y = x + ε, oracle f = x, absolute family, one feature."""
    rng = np.random.default_rng(seed)
    x_train = rng.normal(size=n_train)
    x_cal = rng.normal(size=n_calibration)
    y_cal = x_cal + rng.normal(size=n_calibration)
    system = system_from_functions("absolute", {"f": lambda z: z[:, 0]},
                                   pd.DataFrame({"x": x_train}))
    return system.conformalize(pd.DataFrame({"x": x_cal}), y_cal), x_train


def abs_normal_quantile(mean: float, sd: float, level: float) -> float:
    """q with P(|N(mean, sd²)| ≤ q) = level."""
    def covered(q: float) -> float:
        return norm.cdf((q - mean) / sd) - norm.cdf((-q - mean) / sd) - level
    return brentq(covered, 0.0, abs(mean) + 10 * sd)


@pytest.mark.slow
def test_interval_covers_the_population_calibration_part_at_its_nominal_rate():
    """Over 200 calibration draws, the 90 % interval holds the population φ_C about 90 % of the
    time. The population value is conditional on the background (the training rows): masking x
    leaves f_∅ = mean(x_train), so φ_C = 2(q(|ε|) − q(|x − mean + ε|)) at level 1 − α."""
    alpha, n_calibration, covered, widths = 0.1, 400, 0, []
    for seed in range(200):
        system, x_train = cf_abs_system(seed, n_calibration)
        explainer = Explainer(system, background_size=len(x_train), seed=seed)
        low, high, level = explainer.calibration_bootstrap("exact", alpha, 300)
        truth = 2 * (abs_normal_quantile(0.0, 1.0, 1 - alpha)
                     - abs_normal_quantile(-x_train.mean(), np.sqrt(2.0), 1 - alpha))
        covered += bool(low[0] <= truth <= high[0])
        widths.append(high[0] - low[0])
    # Binomial s.d. of the share at 200 draws is 0.021: [0.84, 0.96] is ± 2.8 s.d.
    assert 0.84 <= covered / 200 <= 0.96, covered
    assert level == 0.9
    assert 0.1 < np.median(widths) < 1.0  # an interval, not a point or the whole line


def test_explanation_carries_the_interval_in_its_units_without_model_calls():
    rng = np.random.default_rng(3)
    train = pd.DataFrame({"a": rng.normal(size=300), "b": rng.normal(size=300)})
    cal = pd.DataFrame({"a": rng.normal(size=200), "b": rng.normal(size=200)})
    y_cal = cal["a"] + np.exp(0.5 * cal["b"]) * rng.normal(size=200)
    functions = {"f": lambda z: z[:, 0], "sigma": lambda z: np.exp(0.5 * z[:, 1])}
    system = system_from_functions("normalized", functions, train).conformalize(cal, y_cal)
    explainer = Explainer(system, background_size=100, seed=0)
    patients = pd.DataFrame({"a": [0.0, 1.0, -2.0], "b": [0.0, 2.0, -1.0]})
    explainer.calibration_game("exact", keep_order=True)
    start = explainer.evaluator.model_rows
    without = explainer.explain(patients, alpha=0.1, units="log")
    patients_cost = explainer.evaluator.model_rows - start
    log = explainer.explain(patients, alpha=0.1, units="log", calibration_bootstrap=200)
    # The bootstrap re-weights the kept scores: the run costs what its patients cost.
    assert explainer.evaluator.model_rows - start == 2 * patients_cost
    d = log.decomposition
    assert d.calibration_low is not None and d.calibration_high is not None
    assert d.calibration_level == 0.9
    assert np.all(d.calibration_low <= d.calibration_high)
    # On the log scale the interval is one row for the cohort, like φ_C itself.
    np.testing.assert_array_equal(d.calibration_low, np.tile(d.calibration_low[0], (3, 1)))
    width = explainer.explain(patients, alpha=0.1, units="width", calibration_bootstrap=200)
    w = width.decomposition
    # Width units multiply every part by the patient's positive factor L: ratios are kept.
    np.testing.assert_allclose(w.calibration_low / w.calibration, d.calibration_low / d.calibration,
                               rtol=1e-12)
    np.testing.assert_array_equal(w.calibration_sign_uncertain, d.calibration_sign_uncertain)
    assert without.decomposition.calibration_low is None


def test_a_bootstrap_run_computes_the_calibration_game_once():
    """The first run asking for a bootstrap keeps the rows' order at once: the masked
    calibration scores are evaluated one time, as for a run without the bootstrap."""
    rng = np.random.default_rng(4)
    train = pd.DataFrame({"a": rng.normal(size=200)})
    cal = pd.DataFrame({"a": rng.normal(size=120)})
    system = system_from_functions("absolute", {"f": lambda z: z[:, 0]}, train)
    system = system.conformalize(cal, cal["a"] + rng.normal(size=120))
    patients = pd.DataFrame({"a": [0.5]})
    costs = []
    for bootstrap in (0, 50):
        explainer = Explainer(system, background_size=30, seed=0)
        explainer.explain(patients, calibration_bootstrap=bootstrap)
        costs.append(explainer.evaluator.model_rows)
    assert costs[1] == costs[0]

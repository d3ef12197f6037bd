"""φ_C's intervals that cover the fit of the models (issue 34, item 2): the refitting bootstrap
(each replicate refits on resampled training rows) and the cross-fitted interval (fits on
disjoint halves, debiased for what a fit picks up by chance)."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

from cpdecomp import Explainer, system_from_functions
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.games.calibration import CalibrationGame
from cpdecomp.core.games.masking import MaskedEvaluator
from cpdecomp.core.models import Component, get_model
from cpdecomp.core.refit import _half_games, _refitted, cross_fit_interval, refit_bootstrap
from cpdecomp.core.system import fit_system


def data(rng: np.random.Generator, n: int) -> tuple[pd.DataFrame, np.ndarray]:
    """y = x0 + exp(0.5·x1)·ε; x2 is pure noise (no component should need it)."""
    x = rng.normal(size=(n, 3))
    y = x[:, 0] + np.exp(0.5 * x[:, 1]) * rng.normal(size=n)
    return pd.DataFrame(x, columns=["mean", "noise_driver", "pure_noise"]), y


def linear_system(seed: int = 0):
    rng = np.random.default_rng(seed)
    train, y_train = data(rng, 300)
    cal, y_cal = data(rng, 150)
    fitted = fit_system(train, y_train, family="normalized", model="linear", seed=seed)
    return fitted.conformalize(cal, y_cal), y_train


def test_replicates_refit_and_the_interval_is_the_pivot_of_their_quantiles():
    system, y_train = linear_system()
    result = refit_bootstrap(system, y_train, n_replicates=8, seed=1)
    again = refit_bootstrap(system, y_train, n_replicates=8, seed=1)
    np.testing.assert_array_equal(result.replicates, again.replicates)  # seeded
    assert result.replicates.shape == (8, 3) and result.refused == 0
    assert np.ptp(result.replicates, axis=0).min() > 0  # every replicate is another fit
    q_lo, q_hi = np.quantile(result.replicates, [0.05, 0.95], axis=0)
    np.testing.assert_allclose(result.low, 2 * result.estimate - q_hi)
    np.testing.assert_allclose(result.high, 2 * result.estimate - q_lo)
    plain = refit_bootstrap(system, y_train, n_replicates=8, seed=1, percentile=True)
    np.testing.assert_allclose(plain.low, q_lo)


def test_it_refuses_what_it_cannot_refit():
    system, y_train = linear_system()
    with pytest.raises(CpdecompError, match="training_targets has 10 values"):
        refit_bootstrap(system, y_train[:10])
    train = pd.DataFrame({"a": np.arange(50.0)})
    injected = system_from_functions("absolute", {"f": lambda z: z[:, 0]}, train)
    with pytest.raises(CpdecompError, match="refits the system's models"):
        refit_bootstrap(injected.conformalize(train, np.arange(50.0)), np.arange(50.0))


def test_the_cross_fitted_interval_is_its_splits_debiased_and_seeded():
    system, y_train = linear_system()
    result = cross_fit_interval(system, y_train, n_splits=3, seed=1)
    again = cross_fit_interval(system, y_train, n_splits=3, seed=1)
    np.testing.assert_array_equal(result.splits, again.splits)  # seeded
    assert result.splits.shape == (3, 3) and result.refused == 0
    np.testing.assert_allclose(result.estimate, result.splits.mean(axis=0))
    z = NormalDist().inv_cdf(0.95)
    half = z * np.sqrt(result.fit_se ** 2 + result.calibration_se ** 2
                       + result.splits.var(axis=0, ddof=1) / 3)
    np.testing.assert_allclose(result.high - result.estimate, half)
    np.testing.assert_allclose(result.estimate - result.low, half)
    own = Explainer(system, background_size=64, seed=1, background_error=False)
    np.testing.assert_allclose(result.plug_in, own.design("exact").apply(
        own.calibration_game("exact").values(0.1)))
    assert (result.fit_se > 0).all() and (result.calibration_se > 0).all()


def test_the_averaged_pipelines_game_is_the_game_of_the_averaged_models():
    """The mix is built from masked tables; check it against the averaged models masked by
    brute force on the same background (linearity of masking, not taken on trust)."""
    system, y_train = linear_system()
    rows, fitted = system.fitted.training_rows, system.fitted
    model = get_model(fitted.model)
    halves = [_refitted(system, model, rows[part], y_train[part], seed, 0.1)
              for part, seed in ((slice(0, 150), 3), (slice(150, 300), 4))]
    background = rows[:40]
    design = Explainer(system, background_size=64, background_error=False).design("exact")
    _, _, mix = _half_games(system, [MaskedEvaluator(h, background) for h in halves],
                            design.coalitions, 0.1)
    # The averaged models, masked by brute force: each component's predictor (sigma's on its
    # log scale, where it is masked) averaged over the halves, the link and the halves' mean
    # floor applied after the mean over the background.
    averaged = {name: Component(name, _Averaged(halves[0][name].predictor,
                                                halves[1][name].predictor),
                                floor=None if halves[0][name].floor is None else
                                (halves[0][name].floor + halves[1][name].floor) / 2)
                for name in ("f", "sigma")}
    assert averaged["sigma"].link == "log"  # the built-in sigma: a log-link boosting
    table = MaskedEvaluator(averaged, background, path="brute").evaluate_by_row(
        design.coalitions, system.calibration_rows, ["f", "sigma"])
    scores = system.family.scores(system.calibration_targets[:, None], table).T
    scores.sort(axis=1)
    expected = CalibrationGame(system.family, design.coalitions, scores).values(0.1)
    np.testing.assert_allclose(mix, expected, rtol=1e-12, atol=1e-12)


class _Averaged:
    """Two predictors' mean, declaring their link (sigma's log scale)."""

    def __init__(self, a, b) -> None:
        self.a, self.b = a, b
        self.link = getattr(a, "link", None)

    def predict(self, z):
        return (self.a.predict(z) + self.b.predict(z)) / 2


def test_the_cross_fitted_interval_refuses_what_it_cannot_split():
    system, y_train = linear_system()
    with pytest.raises(CpdecompError, match="at least 2 splits"):
        cross_fit_interval(system, y_train, n_splits=1)
    with pytest.raises(CpdecompError, match="training_targets has 10 values"):
        cross_fit_interval(system, y_train[:10])
    train = pd.DataFrame({"a": np.arange(50.0)})
    injected = system_from_functions("absolute", {"f": lambda z: z[:, 0]}, train)
    with pytest.raises(CpdecompError, match="refits the system's models"):
        cross_fit_interval(injected.conformalize(train, np.arange(50.0)), np.arange(50.0))


@pytest.mark.slow
def test_a_pure_noise_column_is_unsettled_in_most_refitted_runs():
    """Issue 34, item 2's target: fresh data and fit per run (gbm), a noise column's 90 %
    interval holds 0 in >= 90 % of runs, and the mean's real φ_C stays settled in >= 90 %
    (a trivially wide interval would fail that). The population values are x₂: 0 (no
    component needs it) and x₀ ≈ −0.35 log units (true components, 20,000 calibration rows;
    docs/results/refit_bootstrap.md). The refitting bootstrap fails the first half: 6 of 12."""
    noise_unsettled, mean_settled = [], []
    for run in range(10):
        rng = np.random.default_rng((2034, run))
        train, y_train = data(rng, 300)
        cal, y_cal = data(rng, 200)
        fitted = fit_system(train, y_train, family="normalized", model="gbm", seed=run)
        result = cross_fit_interval(fitted.conformalize(cal, y_cal), y_train, n_splits=4,
                                    seed=run)
        noise_unsettled.append(bool(result.sign_uncertain[2]))
        mean_settled.append(bool(result.high[0] < 0))
    assert np.mean(noise_unsettled) >= 0.9
    assert np.mean(mean_settled) >= 0.9

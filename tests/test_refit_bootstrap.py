"""φ_C's refitting bootstrap (issue 34, item 2): each replicate refits the models on resampled
training rows, so the interval covers the fit as well as the calibration sample."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cpdecomp import system_from_functions
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.refit import refit_bootstrap
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


@pytest.mark.slow
@pytest.mark.xfail(reason="not met yet (docs/results/refit_bootstrap.md): the fitted σ gives a "
                          "noise column a positive φ_C in every run, which a refit does not "
                          "undo", strict=False)
def test_a_pure_noise_column_is_unsettled_in_most_refitted_runs():
    """Issue 34, item 2's target at a small size: fresh data and fit per run (gbm)."""
    unsettled = []
    for run in range(8):
        rng = np.random.default_rng((2034, run))
        train, y_train = data(rng, 300)
        cal, y_cal = data(rng, 200)
        fitted = fit_system(train, y_train, family="normalized", model="gbm", seed=run)
        result = refit_bootstrap(fitted.conformalize(cal, y_cal), y_train, n_replicates=10,
                                 seed=run)
        unsettled.append(bool(result.sign_uncertain[2]))
    assert np.mean(unsettled) >= 0.9

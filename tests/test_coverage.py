"""Split-conformal coverage, empirically, for every separable family (method page §2).

The guarantee: with n exchangeable calibration rows and continuous scores, the coverage of a new
row, conditional on the training and calibration rows, is C ~ Beta(k, n + 1 - k) with
k = ceil((n + 1)(1 - alpha)), whatever the model. So its mean is k/(n + 1), which lies in
[1 - alpha, 1 - alpha + 1/(n + 1)).

Each replicate draws a fresh data set from a seeded numpy Generator, splits it with a seeded
split_rows, fits the family's components, calibrates, and records the share of m test rows whose
target falls in ConformalSystem.predict_interval. Given C that share is Binomial(m, C)/m, so over
independent replicates it has mean k/(n + 1) and variance
    Var(C)(1 - 1/m) + mu(1 - mu)/m,   Var(C) = k(n + 1 - k) / ((n + 1)^2 (n + 2)),  mu = k/(n+1).
The mean over R replicates is then checked against
    1 - alpha - 4 se  <=  mean coverage  <=  1 - alpha + 1/(n + 1) + 4 se,   se = sd / sqrt(R),
i.e. four standard errors (a false alarm about once in 30 000 per bound; the seeds are fixed,
so the outcome is deterministic).

The normalized family is also checked per floor status of sigma: a row whose sigma sits at the
floor gets an interval a few percent of the median width (the old no-link sigma did that to
some rows, and covered almost none of them). With the log-link sigma no test row is at the floor,
and the rows above it cover at the nominal rate.
"""

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

from cpdecomp.core.conformal import conformal_rank
from cpdecomp.core.data import split_rows
from cpdecomp.core.system import fit_system

FAMILIES = ["absolute", "normalized", "gamma", "cqr", "cqr-r"]
ALPHAS = [0.05, 0.1, 0.2]
N_TRAIN, N_CALIBRATION, N_TEST = 300, 299, 2000  # (n + 1)(1 - alpha) is an integer: 285, 270, 240
N_ROWS = N_TRAIN + N_CALIBRATION + N_TEST
FRACTIONS = (N_TRAIN / N_ROWS, N_CALIBRATION / N_ROWS, N_TEST / N_ROWS)
STANDARD_ERRORS = 4.0


@pytest.fixture(autouse=True)
def one_thread():
    # One thread: OpenMP boosting oversubscribes badly when other test processes share the CPUs.
    with threadpool_limits(limits=1):
        yield


def heteroscedastic_data(seed, n_rows=N_ROWS):
    """y = exp(1.5 + 0.4 x1 - 0.3 x2 + (0.2 + 0.4 x3) eps): positive (for gamma), with noise
    that grows with x3 and with the mean, and linear quantile models that do not cross on
    [0, 1]^3 (for cqr-r)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, size=(n_rows, 3))
    log_mean = 1.5 + 0.4 * x[:, 0] - 0.3 * x[:, 1]
    spread = 0.2 + 0.4 * x[:, 2]
    y = np.exp(log_mean + spread * rng.standard_normal(n_rows))
    return pd.DataFrame(x, columns=["x1", "x2", "x3"]), y


def replicate_coverage(model, family, seed):
    """{alpha: share of test rows covered} for one fresh data set and split."""
    table, y = heteroscedastic_data(seed)
    train, calibration, test = split_rows(N_ROWS, FRACTIONS, seed)
    assert (len(train), len(calibration), len(test)) == (N_TRAIN, N_CALIBRATION, N_TEST)
    fitted = fit_system(table.iloc[train], y[train], family=family, model=model, seed=seed)
    system = fitted.conformalize(table.iloc[calibration], y[calibration])
    patients = table.iloc[test][list(fitted.feature_names)]
    covered = {}
    for alpha in ALPHAS:
        lower, upper = system.predict_interval(patients, alpha)
        covered[alpha] = float(np.mean((lower <= y[test]) & (y[test] <= upper)))
    return covered


def replicate_coverage_by_floor(model, seed, alpha=0.1):
    """(covered, rows) for the test rows with sigma at its floor, and for the others."""
    table, y = heteroscedastic_data(seed)
    train, calibration, test = split_rows(N_ROWS, FRACTIONS, seed)
    fitted = fit_system(table.iloc[train], y[train], family="normalized", model=model, seed=seed)
    system = fitted.conformalize(table.iloc[calibration], y[calibration])
    rows = fitted.encode(table.iloc[test])
    sigma = fitted.components["sigma"]
    at_floor = replace(sigma, floor=None).predict(rows) <= sigma.floor  # before the floor
    assert fitted.rows_at_sigma_floor(rows) == at_floor.sum()
    lower, upper = system.predict_interval(table.iloc[test][list(fitted.feature_names)], alpha)
    covered = (lower <= y[test]) & (y[test] <= upper)
    return {status: (int(covered[mask].sum()), int(mask.sum()))
            for status, mask in (("floor", at_floor), ("above", ~at_floor))}


def coverage_band(alpha, n, m, replicates):
    """(lowest, highest) acceptable mean coverage over replicates, from the Beta law above."""
    k = conformal_rank(n, alpha)
    mu = k / (n + 1)
    var_c = k * (n + 1 - k) / ((n + 1) ** 2 * (n + 2))
    var_share = var_c * (1 - 1 / m) + mu * (1 - mu) / m
    tolerance = STANDARD_ERRORS * math.sqrt(var_share / replicates)
    return 1 - alpha - tolerance, 1 - alpha + 1 / (n + 1) + tolerance


def check_marginal_coverage(model, family, replicates):
    shares = [replicate_coverage(model, family, seed) for seed in range(replicates)]
    for alpha in ALPHAS:
        mean = float(np.mean([s[alpha] for s in shares]))
        lowest, highest = coverage_band(alpha, N_CALIBRATION, N_TEST, replicates)
        assert lowest <= mean <= highest, (
            f"{model}/{family} at alpha = {alpha}: mean coverage {mean:.4f} over {replicates} "
            f"replicates is outside [{lowest:.4f}, {highest:.4f}]"
        )


def test_coverage_band_is_not_vacuous():
    # With 30 replicates at alpha = 0.1 the band is 0.9 - 0.0136 .. 0.9033 + 0.0136, so a
    # shortfall of 1.5 points of coverage (or an excess of 2) would fail the checks below.
    lowest, highest = coverage_band(0.1, N_CALIBRATION, N_TEST, 30)
    assert 0.9 - 0.015 < lowest < 0.9
    assert 0.9 + 1 / (N_CALIBRATION + 1) < highest < 0.9 + 0.02


# The normalized family's replicates fit a sigma each (on 5 folds' residuals): the full run.
@pytest.mark.parametrize("family", [pytest.param(f, marks=pytest.mark.slow) if f == "normalized"
                                    else f for f in FAMILIES])
def test_linear_model_covers_at_least_one_minus_alpha(family):
    check_marginal_coverage("linear", family, replicates=30)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_gradient_boosting_covers_at_least_one_minus_alpha(family):
    check_marginal_coverage("gbm", family, replicates=10)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["linear", "gbm"])
def test_normalized_coverage_per_sigma_floor_status(model):
    replicates = 30 if model == "linear" else 10
    counts = [replicate_coverage_by_floor(model, seed) for seed in range(replicates)]
    floor_rows = sum(c["floor"][1] for c in counts)
    floor_covered = sum(c["floor"][0] for c in counts)
    assert floor_rows == 0, (f"{model}: {floor_rows} test rows at the sigma floor over "
                             f"{replicates} replicates, {floor_covered} of them covered")
    shares = [c["above"][0] / c["above"][1] for c in counts]
    lowest, highest = coverage_band(0.1, N_CALIBRATION, N_TEST, replicates)
    assert lowest <= float(np.mean(shares)) <= highest

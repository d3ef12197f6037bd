"""Known answers of method page §8, with oracle components injected in place of fitted models."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from cpdecomp import Explainer, system_from_functions


def explain_one_feature_world(family, functions, x_train, x_cal, y_cal, patients, alpha=0.1,
                              units="log", background=None, extra_columns=None):
    """Build a system over the columns of x_train (one per player) and explain `patients`."""
    columns = extra_columns or {}
    train = pd.DataFrame({"x": x_train, **{k: v(len(x_train)) for k, v in columns.items()}})
    cal = pd.DataFrame({"x": x_cal, **{k: v(len(x_cal)) for k, v in columns.items()}})
    pts = pd.DataFrame({"x": patients, **{k: v(len(patients)) for k, v in columns.items()}})
    system = system_from_functions(family, functions, train).conformalize(cal, y_cal)
    explainer = Explainer(system, background_size=background or len(train), seed=0)
    return explainer.explain(pts, method="exact", alpha=alpha, units=units)


def test_cf_abs_calibration_part_matches_closed_form_and_instance_part_is_zero():
    """y = bX + sε, oracle f = bx, absolute family: φ_I ≡ 0, φ_C = 2z(s − √(b²τ² + s²))."""
    rng = np.random.default_rng(11)
    b = tau = s = 1.0
    alpha = 0.1
    n, m = 40_000, 500
    x_cal = rng.normal(0, tau, n)
    y_cal = b * x_cal + s * rng.normal(size=n)
    x_train = rng.normal(0, tau, m)
    constant = {"constant": lambda k: np.full(k, 3.0)}
    result = explain_one_feature_world(
        "absolute", {"f": lambda z: b * z[:, 0]}, x_train, x_cal, y_cal,
        patients=np.array([-2.0, 0.0, 1.5]), alpha=alpha, units="width", extra_columns=constant,
    )
    d = result.decomposition
    expected = 2 * norm.ppf(1 - alpha / 2) * (s - np.sqrt(b**2 * tau**2 + s**2))
    assert expected == pytest.approx(-1.3626, abs=1e-4)
    # Standard error of each 0.9-quantile of |N| at n = 40,000 is ≈ 0.01; 0.06 is > 4 s.e.
    np.testing.assert_allclose(d.calibration[:, 0], expected, atol=0.06)
    np.testing.assert_array_equal(d.instance, 0.0)
    # The constant column is a null player in every game.
    np.testing.assert_array_equal(d.calibration[:, 1], 0.0)
    np.testing.assert_array_equal(d.total[:, 1], 0.0)


def test_cf_noise_instance_part_is_log_ratio_to_mean_sigma():
    """y = σ(x)ε, σ ∈ {1, 4}, P(σ = 4) = 0.2, oracle f = 0: φ_I = ln(σ/1.6) in log units."""
    rng = np.random.default_rng(5)
    x_train = np.r_[np.ones(200), np.zeros(800)]  # exactly 20 % high-noise rows
    x_cal = (rng.random(2_000) < 0.2).astype(float)
    sigma = lambda z: 1.0 + 3.0 * z[:, 0]  # noqa: E731
    y_cal = (1.0 + 3.0 * x_cal) * rng.normal(size=x_cal.size)
    result = explain_one_feature_world(
        "normalized", {"f": lambda z: np.zeros(len(z)), "sigma": sigma},
        x_train, x_cal, y_cal, patients=np.array([1.0, 0.0]),
    )
    np.testing.assert_allclose(
        result.decomposition.instance[:, 0], [np.log(4 / 1.6), np.log(1 / 1.6)], rtol=1e-12
    )
    np.testing.assert_allclose(result.decomposition.instance[:, 0], [0.9163, -0.4700], atol=1e-4)


def test_cf_dual_opposite_signs_for_moderate_x():
    """X ~ N(0,1), y = X + exp(X/2)ε, oracle f = x, σ = exp(x/2), α = 0.1 (log units).

    φ_I(x) = x/2 − ln mean_b exp(b/2) exactly (≈ x/2 − 0.125), φ_C ≈ −0.269, and for x in
    (0.25, 0.79) the instance part is positive while the total is not.
    """
    rng = np.random.default_rng(3)
    n, m = 40_000, 20_000
    x_cal = rng.normal(size=n)
    y_cal = x_cal + np.exp(0.5 * x_cal) * rng.normal(size=n)
    x_train = rng.normal(size=m)
    patients = np.array([-1.0, 0.3, 0.5, 0.7, 2.0])
    result = explain_one_feature_world(
        "normalized", {"f": lambda z: z[:, 0], "sigma": lambda z: np.exp(0.5 * z[:, 0])},
        x_train, x_cal, y_cal, patients=patients,
    )
    d = result.decomposition
    exact_instance = 0.5 * patients - np.log(np.mean(np.exp(0.5 * x_train)))
    np.testing.assert_allclose(d.instance[:, 0], exact_instance, rtol=1e-12, atol=1e-14)
    # Monte Carlo error of ln mean exp(b/2) at m = 20,000 is ≈ 0.005.
    np.testing.assert_allclose(d.instance[:, 0], 0.5 * patients - 0.125, atol=0.02)
    # Quantile standard errors at n = 40,000 are ≈ 0.01 on the log scale.
    np.testing.assert_allclose(d.calibration[:, 0], -0.269, atol=0.04)
    moderate = (patients > 0.25) & (patients < 0.79)
    assert np.all(d.instance[moderate, 0] > 0)
    assert np.all(d.total[moderate, 0] <= 0)


def test_log_linear_sigma_with_product_background_is_additive():
    """σ(x) = exp(Σγ_j x_j) over a product background: φ_I,j = γ_j x_j − ln mean_b exp(γ_j b_j)."""
    gamma = np.array([0.7, -0.4, 0.2])
    grids = [np.array([-1.0, 0.0, 2.0]), np.array([0.5, 1.5]), np.array([-2.0, 1.0, 3.0, 4.0])]
    product = np.array(np.meshgrid(*grids, indexing="ij")).reshape(3, -1).T
    train = pd.DataFrame(product, columns=["a", "b.dotted", "c spaced"])
    rng = np.random.default_rng(0)
    cal = pd.DataFrame(rng.normal(size=(300, 3)), columns=train.columns)
    sigma = lambda z: np.exp(z @ gamma)  # noqa: E731
    y_cal = sigma(cal.to_numpy()) * rng.normal(size=300)
    system = system_from_functions(
        "normalized", {"f": lambda z: np.zeros(len(z)), "sigma": sigma}, train
    ).conformalize(cal, y_cal)
    patients = pd.DataFrame([[0.3, -1.0, 2.5], [1.0, 1.0, 1.0]], columns=train.columns)
    result = Explainer(system, background_size=len(train)).explain(patients, units="log")
    expected = gamma * patients.to_numpy() - np.log(
        [np.mean(np.exp(g * grid)) for g, grid in zip(gamma, grids, strict=True)]
    )
    np.testing.assert_allclose(result.decomposition.instance, expected, rtol=1e-10, atol=1e-12)


def test_linear_cqr_instance_part_is_coefficient_gap_times_centred_value():
    """f_lo = β_lo·x, f_hi = β_hi·x: φ_I,j = (β_hi,j − β_lo,j)(x_j − mean_b b_j)."""
    rng = np.random.default_rng(1)
    beta_lo = np.array([1.0, -0.5, 0.2, 0.0])
    beta_hi = np.array([1.5, 0.5, 0.2, 0.3])
    columns = ["w", "x", "y", "z"]
    train = pd.DataFrame(rng.normal(size=(50, 4)), columns=columns)
    cal = pd.DataFrame(rng.normal(size=(200, 4)), columns=columns)
    y_cal = cal.to_numpy() @ (beta_lo + beta_hi) / 2 + rng.normal(size=200)
    system = system_from_functions(
        "cqr", {"lo": lambda z: z @ beta_lo, "hi": lambda z: z @ beta_hi}, train
    ).conformalize(cal, y_cal)
    patients = pd.DataFrame(rng.normal(size=(5, 4)), columns=columns)
    result = Explainer(system, background_size=len(train)).explain(patients)
    expected = (beta_hi - beta_lo) * (patients.to_numpy() - train.to_numpy().mean(axis=0))
    np.testing.assert_allclose(result.decomposition.instance, expected, rtol=1e-10, atol=1e-12)
    # The third feature has equal coefficients: it moves both bounds alike, no width.
    np.testing.assert_allclose(result.decomposition.instance[:, 2], 0.0, atol=1e-12)

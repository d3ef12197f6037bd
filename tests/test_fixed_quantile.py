"""The practitioners' comparator: Shapley values of the width at a fixed q̂, against shap's own
exact explainer on the width function a fitted conformal regressor gives."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import shap

from cpdecomp import Explainer, fit_system, system_from_functions


def shap_exact_on_width(width, rows: np.ndarray, background: np.ndarray) -> np.ndarray:
    """shap's ExactExplainer over an independent masker holding the whole background."""
    masker = shap.maskers.Independent(background, max_samples=len(background))
    return shap.explainers.Exact(width, masker)(rows).values


def heteroscedastic(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    table = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
    y = table["a"] + np.exp(0.5 * table["b"] + 0.3 * table["c"]) * rng.normal(size=n)
    return table, y.to_numpy()


def test_normalized_fixed_quantile_view_equals_shap_on_the_width_function():
    table, y = heteroscedastic(500, 0)
    sigma = lambda z: np.exp(0.5 * z[:, 1] + 0.3 * z[:, 2])  # noqa: E731
    functions = {"f": lambda z: z[:, 0], "sigma": sigma}
    system = system_from_functions("normalized", functions, table.iloc[:200])
    system = system.conformalize(table.iloc[200:450], y[200:450])
    explainer = Explainer(system, background_size=60, seed=0)
    patients = table.iloc[450:460]
    result = explainer.explain(patients, alpha=0.1, units="log", fixed_quantile=True)
    q_hat = system.quantile(0.1)
    expected = shap_exact_on_width(lambda z: 2 * q_hat * sigma(z),
                                   system.fitted.encode(patients), explainer.background)
    fixed = result.decomposition.fixed_quantile
    np.testing.assert_allclose(fixed, expected, rtol=0, atol=1e-10 * np.abs(expected).max())
    # It is not the total: the total also recalibrates q̂ in every coalition.
    assert np.abs(fixed - in_width(explainer, patients).decomposition.total).max() > 1e-3


def in_width(explainer: Explainer, patients: pd.DataFrame):
    return explainer.explain(patients, alpha=0.1, units="width")


def test_cqr_fixed_quantile_view_is_shap_on_the_width_and_equals_the_instance_part():
    table, y = heteroscedastic(700, 1)
    fitted = fit_system(table.iloc[:400], y[:400], list(table.columns), family="cqr",
                        model="gbm", seed=0)
    system = fitted.conformalize(table.iloc[400:650], y[400:650])
    explainer = Explainer(system, background_size=40, seed=0)
    assert explainer.evaluator.path_of("hi") == "tables"
    patients = table.iloc[650:658]
    result = explainer.explain(patients, alpha=0.1, fixed_quantile=True)
    q_hat = system.quantile(0.1)
    lo, hi = (system.fitted.components[name].predictor for name in ("lo", "hi"))
    expected = shap_exact_on_width(lambda z: hi.predict(z) - lo.predict(z) + 2 * q_hat,
                                   system.fitted.encode(patients), explainer.background)
    d = result.decomposition
    np.testing.assert_allclose(d.fixed_quantile, expected, rtol=0,
                               atol=1e-10 * np.abs(expected).max())
    np.testing.assert_allclose(d.fixed_quantile, d.instance, rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", ["exact", "permutation"])
def test_absolute_family_fixed_quantile_view_is_zero(method):
    table, y = heteroscedastic(400, 2)
    fitted = fit_system(table.iloc[:200], y[:200], list(table.columns), family="absolute",
                        model="gbm", seed=0)
    explainer = Explainer(fitted.conformalize(table.iloc[200:390], y[200:390]),
                          background_size=30)
    result = explainer.explain(table.iloc[390:], method=method, fixed_quantile=True, budget=8)
    np.testing.assert_allclose(result.decomposition.fixed_quantile, 0.0, atol=1e-12)
    assert explainer.explain(table.iloc[390:]).decomposition.fixed_quantile is None

"""Exact Shapley values from the tree tables' groups (TreeTables.shapley, no 2^d lattice)
against brute force, the lattice, and shap's interventional TreeExplainer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor

from cpdecomp import Explainer, fit_system, system_from_models
from cpdecomp.core.attribution.exact import exact_shapley_design
from cpdecomp.core.coalitions import bits_from_coalitions
from cpdecomp.core.explainer import draw_background
from cpdecomp.core.games import MaskedEvaluator, instance
from cpdecomp.core.games.tree_tables import TreeTables
from cpdecomp.core.games.trees import leaf_ensemble
from cpdecomp.core.models.base import Component
from tests.test_masking import mixed_table


def random_forest(d: int, seed: int) -> tuple[Component, np.ndarray]:
    """A small random ensemble (random depths, ties in the data) as a brought model's
    component, and the encoded rows."""
    rng = np.random.default_rng(seed)
    x = pd.DataFrame(np.round(rng.normal(size=(300, d)), 1), columns=[f"c{j}" for j in range(d)])
    y = x["c0"] * x[f"c{1 % d}"] + np.sin(x[f"c{d - 1}"]) + rng.normal(size=300)
    depth = int(rng.integers(2, 6))
    model = (RandomForestRegressor(n_estimators=7, max_depth=depth, random_state=seed)
             if seed % 2 else
             GradientBoostingRegressor(n_estimators=9, max_depth=depth, random_state=seed)
             ).fit(x, y)
    fitted = system_from_models("cqr", {"lo": model, "hi": model}, x)
    return fitted.components["hi"], fitted.encode(x)


@pytest.mark.parametrize(("d", "seed"), [(3, 0), (5, 1), (6, 2)])
def test_group_shapley_equals_exact_shapley_of_brute_force(d, seed):
    component, x = random_forest(d, seed)
    background, rows = x[:20], x[200:206]
    tables = TreeTables(leaf_ensemble(component.predictor), background, d)
    design = exact_shapley_design(d)
    brute = MaskedEvaluator({"hi": component}, background, path="brute").evaluate(
        design.coalitions, rows, ["hi"])["hi"]  # (coalitions, rows): the model's own predict
    expected = design.apply(brute.T)
    phi, at_all, at_none = tables.shapley(rows)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(phi, expected, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(at_all, component.predict(rows), rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(at_none, component.predict(background).mean(), rtol=0,
                               atol=1e-12 * scale)


@pytest.mark.parametrize(("d", "seed"), [(8, 3), (10, 4)])
def test_group_shapley_equals_the_lattice(d, seed):
    component, x = random_forest(d, seed)
    background, rows = x[:30], x[200:210]
    tables = TreeTables(leaf_ensemble(component.predictor), background, d)
    design = exact_shapley_design(d)
    lattice = tables.lattice(rows)
    expected = design.apply(lattice[:, bits_from_coalitions(design.coalitions)])
    phi, at_all, at_none = tables.shapley(rows)
    scale = np.abs(lattice).max()
    np.testing.assert_allclose(phi, expected, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(at_all, lattice[:, -1], rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(at_none, lattice[:, 0], rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize("model", ["gbm", "rf"])
def test_cqr_decomposition_is_the_same_on_either_path(model, monkeypatch):
    """Missing values and a categorical column; the whole decomposition, lattice or groups."""
    table, y = mixed_table(300, 4, seed=5)
    half = len(table) // 2
    system = fit_system(table.iloc[:half], y[:half], list(table.columns), family="cqr",
                        model=model).conformalize(table.iloc[half:], y[half:])
    patients = table.iloc[half:half + 12]
    monkeypatch.setattr(instance, "GROUP_SHAPLEY_PLAYERS", 99)
    lattice = Explainer(system, background_size=16).explain(patients, fixed_quantile=True)
    monkeypatch.setattr(instance, "GROUP_SHAPLEY_PLAYERS", 2)
    explainer = Explainer(system, background_size=16)
    # the dashboard asks for the fixed-q̂ view too: on CQR's identity scale it keeps the groups
    games = explainer._games_for("exact", 0.1, "width", None, None, 0, 0, True)
    assert instance.instance_shapley(games.family, games.evaluator,
                                     system.fitted.encode(patients), games.design,
                                     games.fixed_quantile) is not None
    groups = explainer.explain(patients, fixed_quantile=True)
    for part in ("calibration", "instance", "total", "fixed_quantile"):
        np.testing.assert_allclose(getattr(groups.decomposition, part),
                                   getattr(lattice.decomposition, part), rtol=0,
                                   atol=1e-12 * lattice.width.max())
    np.testing.assert_allclose(groups.width, lattice.width, rtol=0, atol=0)
    assert groups.decomposition.efficiency_error < 1e-12 * lattice.width.max()


def test_a_link_or_another_family_keeps_the_lattice():
    table, y = mixed_table(200, 10, seed=6)
    system = fit_system(table, y, list(table.columns), family="normalized", model="gbm")
    evaluator = MaskedEvaluator(system.components, draw_background(system.training_rows, 8, 0))
    design = exact_shapley_design(table.shape[1])
    assert instance.instance_shapley(system.family, evaluator, system.training_rows[:2],
                                     design) is None


def test_cqr_instance_game_agrees_with_shaps_interventional_tree_explainer():
    shap = pytest.importorskip("shap")
    xgboost = pytest.importorskip("xgboost")
    d = 11
    rng = np.random.default_rng(0)
    x = pd.DataFrame(rng.normal(size=(900, d)), columns=[f"x{j}" for j in range(d)])
    y = x["x0"] + x["x1"] ** 2 + np.exp(0.4 * x["x2"]) * rng.normal(size=900)
    models = {name: xgboost.XGBRegressor(objective="reg:quantileerror", quantile_alpha=level,
                                         n_estimators=30, max_depth=4, n_jobs=1
                                         ).fit(x[:600], y[:600])
              for name, level in (("lo", 0.05), ("hi", 0.95))}
    system = system_from_models("cqr", models, x[:600]).conformalize(x[600:800], y[600:800])
    explainer = Explainer(system, background_size=50, seed=0)
    assert d >= instance.GROUP_SHAPLEY_PLAYERS  # the groups' path, not the lattice
    result = explainer.explain(x[800:805])
    background = pd.DataFrame(explainer.background, columns=list(x.columns))
    theirs = {}
    for name, model in models.items():
        masker = shap.maskers.Independent(background, max_samples=len(background))
        tree = shap.TreeExplainer(model, data=masker, feature_perturbation="interventional")
        theirs[name] = np.asarray(tree.shap_values(x[800:805]), float)
    expected = theirs["hi"] - theirs["lo"]
    # The boosters keep leaf values in float32; cpdecomp sums them in float64.
    np.testing.assert_allclose(result.decomposition.instance, expected, rtol=0,
                               atol=1e-6 * np.abs(expected).max())

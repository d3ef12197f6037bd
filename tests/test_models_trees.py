"""Exact masking of a user's fitted models: tree tables (and the closed form) equal brute force
on hybrid rows, and the plain tables equal the model's own predict, at values on and one step
either side of the models' own split thresholds.

For each model type and each family that applies: masked components by tables = by brute force
(rtol 1e-12), the explanation by tables = by brute force, and φ_T = φ_C + φ_I (1e-10). Brute
force calls the model's own predict on every hybrid row (for XGBoost: the booster's own leaf
routing, pred_leaf, summed in float64, because its predict sums in float32; that predict is
checked separately to float32 rounding).
"""

import functools
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import make_column_transformer
from sklearn.ensemble import (
    ExtraTreesRegressor,
    GradientBoostingRegressor,
    HistGradientBoostingRegressor,
    RandomForestRegressor,
)
from sklearn.impute import SimpleImputer
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler
from sklearn.tree import DecisionTreeRegressor

from cpdecomp.core.explainer import Explainer
from cpdecomp.core.games.masking import MaskedEvaluator
from cpdecomp.core.games.tree_tables import TreeTables
from cpdecomp.core.games.trees import leaf_ensemble
from cpdecomp.core.system import system_from_models

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")

NUMERIC = ["x0", "x1", "x2", "x3"]
RTOL = 1e-12
SEED = 3


@functools.cache
def data():
    rng = np.random.default_rng(SEED)
    n = 700
    table = pd.DataFrame(rng.normal(size=(n, 4)), columns=NUMERIC)
    table.loc[rng.random(n) < 0.12, "x1"] = np.nan
    table["ward"] = rng.choice(["a", "b", "c", "d"], n)
    mean = (table.x0 + np.nan_to_num(table.x1) ** 2 + table.x2 * table.x3
            + 1.5 * (table.ward == "a"))
    table["y"] = 10 + mean + rng.normal(scale=0.6 + 0.5 * np.abs(table.x2), size=n)
    return table


def parts():
    table = data()
    return table.iloc[:300], table.iloc[300:450], table.iloc[450:560], table.iloc[560:]


def targets(train, component):
    """What each component is fitted to (sigma: a positive spread; lo/hi: shifted targets)."""
    y = train["y"].to_numpy()
    spread = 0.5 + np.abs(train["x2"].to_numpy())
    return {"f": y, "sigma": spread, "lo": y - 2 * spread, "hi": y + 2 * spread}[component]


def preprocessing():
    return make_column_transformer(
        (OneHotEncoder(handle_unknown="ignore"), ["ward"]),
        (make_pipeline(SimpleImputer(), StandardScaler()), NUMERIC),
    )


def xgb_booster(x, y):
    return xgb.train({"max_depth": 3, "eta": 0.3, "seed": 0}, xgb.DMatrix(x, y), 30)


def lgb_booster(x, y):
    return lgb.train({"num_leaves": 15, "verbose": -1, "seed": 0}, lgb.Dataset(x, y), 30)


def lgb_categories(x, y):
    x = x.assign(ward=x["ward"].astype("category"))
    return lgb.LGBMRegressor(n_estimators=30, num_leaves=15, min_data_per_group=5,
                             verbose=-1).fit(x, y)


MODEL_TYPES = {
    # name: (fit(x, y), text column 'ward' included, expected path)
    "xgboost": (lambda x, y: xgb.XGBRegressor(n_estimators=30, max_depth=3).fit(x, y),
                False, "tables"),
    "xgboost-booster": (xgb_booster, False, "tables"),
    "lightgbm": (lambda x, y: lgb.LGBMRegressor(n_estimators=30, num_leaves=15,
                                                verbose=-1).fit(x, y), False, "tables"),
    "lightgbm-booster": (lgb_booster, False, "tables"),
    "lightgbm-categories": (lgb_categories, True, "tables"),
    "hist-gradient-boosting": (lambda x, y: HistGradientBoostingRegressor(
        max_iter=30, random_state=0).fit(x, y), False, "tables"),
    "gradient-boosting": (lambda x, y: GradientBoostingRegressor(
        n_estimators=30, max_depth=3, random_state=0).fit(x.fillna(0.0), y), False, "tables"),
    "random-forest": (lambda x, y: RandomForestRegressor(
        n_estimators=15, max_depth=5, random_state=0).fit(x, y), False, "tables"),
    "extra-trees": (lambda x, y: ExtraTreesRegressor(
        n_estimators=15, max_depth=5, random_state=0).fit(x, y), False, "tables"),
    "decision-tree": (lambda x, y: DecisionTreeRegressor(max_depth=6, random_state=0).fit(x, y),
                      False, "tables"),
    "pipeline-hgb": (lambda x, y: make_pipeline(preprocessing(), HistGradientBoostingRegressor(
        max_iter=30, random_state=0)).fit(x, y), True, "tables"),
    "pipeline-forest": (lambda x, y: make_pipeline(preprocessing(), RandomForestRegressor(
        n_estimators=15, max_depth=5, random_state=0)).fit(x, y), True, "tables"),
    "pipeline-lightgbm": (lambda x, y: make_pipeline(preprocessing(), lgb.LGBMRegressor(
        n_estimators=30, verbose=-1)).fit(x, y), True, "tables"),
    "pipeline-ordinal-hgb": (lambda x, y: make_pipeline(
        make_column_transformer((OrdinalEncoder(), ["ward"]), remainder="passthrough"),
        HistGradientBoostingRegressor(max_iter=30, categorical_features=[0], random_state=0),
    ).fit(x, y), True, "tables"),
    "pipeline-ridge": (lambda x, y: make_pipeline(preprocessing(), Ridge()).fit(x, y), True,
                       "additive"),
    "ridge": (lambda x, y: Ridge().fit(x.fillna(0.0), y), False, "additive"),
}
FAMILIES = {"absolute": ("f",), "normalized": ("f", "sigma"), "gamma": ("f",),
            "cqr": ("lo", "hi"), "cqr-r": ("lo", "hi")}


def features(with_text):
    return [*NUMERIC, "ward"] if with_text else NUMERIC


@functools.cache
def fitted_models(model_type, component):
    fit, with_text, _ = MODEL_TYPES[model_type]
    train = parts()[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # LightGBM's chatter about small data
        return fit(train[features(with_text)], targets(train, component))


def needs_no_missing(model_type):
    return model_type in {"gradient-boosting", "ridge"}


@functools.cache
def system(model_type, family):
    _, with_text, _ = MODEL_TYPES[model_type]
    _, background_pool, calibration, patients = parts()
    columns = [*features(with_text), "y"]
    pool, calibration, patients = (t[columns] for t in (background_pool, calibration, patients))
    if needs_no_missing(model_type):
        pool, calibration, patients = (t.fillna(0.0) for t in (pool, calibration, patients))
    models = {name: fitted_models(model_type, name) for name in FAMILIES[family]}
    fitted = system_from_models(family, models, pool, target="y")
    return fitted.conformalize(calibration, calibration["y"]), patients


def edge_rows(fitted, base_row, n_per_player=3):
    """Rows on, and one double / one float32 step either side of, the models' thresholds."""
    rows = []
    for component in fitted.components.values():
        ensemble = leaf_ensemble(component.predictor)
        if ensemble is None:
            continue
        by_player = {}
        for path in ensemble.conditions:
            for c in path:
                if not c.categorical and np.isfinite(c.threshold):
                    by_player.setdefault(c.player, set()).add(c.threshold)
        for player, thresholds in by_player.items():
            for t in sorted(thresholds)[:: max(1, len(thresholds) // n_per_player)]:
                t32 = np.float32(t)
                for value in (t, np.nextafter(t, np.inf), np.nextafter(t, -np.inf),
                              float(np.nextafter(t32, np.float32(np.inf))),
                              float(np.nextafter(t32, np.float32(-np.inf)))):
                    row = base_row.copy()
                    row[player] = value
                    rows.append(row)
    return np.array(rows)


def all_coalitions(d):
    return np.array([[(i >> j) & 1 for j in range(d)] for i in range(1 << d)], dtype=bool)


def case(position: int, model_type: str, family: str):
    """The quick run (`-m "not slow"`) takes each model type with one family, the families in
    turn so that each is met; the rest of the cross product runs in the full suite."""
    quick = list(FAMILIES)[position % len(FAMILIES)] == family
    return pytest.param(model_type, family, marks=() if quick else pytest.mark.slow)


CASES = [case(i, m, f) for i, m in enumerate(MODEL_TYPES) for f in FAMILIES]


@pytest.mark.parametrize(("model_type", "family"), CASES)
def test_tables_equal_brute_force_and_the_split_holds(model_type, family):
    conformal, patients = system(model_type, family)
    fitted = conformal.fitted
    rows = fitted.encode(patients)
    edges = edge_rows(fitted, rows[0])
    expected_path = MODEL_TYPES[model_type][2]
    background = np.vstack([fitted.training_rows[:24], edges[::7][:8]]) if len(edges) else \
        fitted.training_rows[:32]
    fast = MaskedEvaluator(fitted.components, background)
    slow = MaskedEvaluator(fitted.components, background, path="brute")
    points = np.vstack([rows[:4], edges]) if len(edges) else rows[:4]
    coalitions = all_coalitions(rows.shape[1])
    names = list(fitted.components)
    for name in names:
        assert fast.path_of(name) == expected_path, name
    by_tables = fast.evaluate(coalitions, points, names)
    by_brute = slow.evaluate(coalitions, points, names)
    for name in names:
        scale = float(np.max(np.abs(by_brute[name])))
        np.testing.assert_allclose(by_tables[name], by_brute[name], rtol=RTOL, atol=RTOL * scale,
                                   err_msg=f"{name}: tables vs brute force")
        # the plain tables walk the model's own trees: equal to its own predict
        own = fitted.components[name].predictor.predict(points)
        if expected_path == "tables":
            walked = TreeTables(leaf_ensemble(fitted.components[name].predictor), background,
                                rows.shape[1]).predict(points)
            np.testing.assert_allclose(walked, own, rtol=RTOL, atol=RTOL * scale)
    explain = {path: Explainer(conformal, background_size=24, seed=1, masking=path).explain(
        patients.iloc[:6]) for path in ("auto", "brute")}
    d, b = explain["auto"].decomposition, explain["brute"].decomposition
    np.testing.assert_allclose(d.total, d.calibration + d.instance, rtol=0, atol=1e-10)
    for view in ("calibration", "instance", "total"):
        mine, theirs = getattr(d, view), getattr(b, view)
        np.testing.assert_allclose(mine, theirs, rtol=1e-9,
                                   atol=1e-9 * max(1.0, float(np.max(np.abs(theirs)))),
                                   err_msg=view)


@pytest.mark.parametrize("model_type", ["xgboost", "xgboost-booster"])
def test_xgboost_own_predict_is_the_float64_leaf_sum_to_float32_rounding(model_type):
    conformal, patients = system(model_type, "absolute")
    fitted = conformal.fitted
    rows = np.vstack([fitted.encode(patients), edge_rows(fitted, fitted.encode(patients)[0])])
    model = fitted_models(model_type, "f")
    frame = pd.DataFrame(rows, columns=NUMERIC)
    theirs = (model.predict(frame) if hasattr(model, "get_booster")
              else model.inplace_predict(frame))
    ours = fitted.components["f"].predict(rows)
    np.testing.assert_allclose(ours, theirs, rtol=2e-6)  # float32 accumulation over 30 trees
    assert not np.array_equal(ours, theirs.astype(float))  # float64 sums, not its float32 ones


QUANTILE_MODELS = {
    "xgboost": lambda x, y, tau: xgb.XGBRegressor(objective="reg:quantileerror",
                                                  quantile_alpha=tau, n_estimators=30,
                                                  max_depth=3).fit(x, y),
    "lightgbm": lambda x, y, tau: lgb.LGBMRegressor(objective="quantile", alpha=tau,
                                                    n_estimators=30, verbose=-1).fit(x, y),
    "hist-gradient-boosting": lambda x, y, tau: HistGradientBoostingRegressor(
        loss="quantile", quantile=tau, max_iter=30, random_state=0).fit(x, y),
}


@pytest.mark.parametrize("library", QUANTILE_MODELS)
def test_quantile_objectives_have_exact_tables_for_cqr(library):
    train, pool, calibration, patients = parts()
    x = train[NUMERIC]
    models = {"lo": QUANTILE_MODELS[library](x, train["y"], 0.05),
              "hi": QUANTILE_MODELS[library](x, train["y"], 0.95)}
    fitted = system_from_models("cqr", models, pool[[*NUMERIC, "y"]], target="y")
    conformal = fitted.conformalize(calibration, calibration["y"])
    rows = fitted.encode(patients)
    points = np.vstack([rows[:3], edge_rows(fitted, rows[0])])
    background = fitted.training_rows[:30]
    fast = MaskedEvaluator(fitted.components, background)
    slow = MaskedEvaluator(fitted.components, background, path="brute")
    coalitions = all_coalitions(4)
    for name in ("lo", "hi"):
        assert fast.path_of(name) == "tables"
        a = fast.evaluate(coalitions, points, [name])[name]
        b = slow.evaluate(coalitions, points, [name])[name]
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=RTOL * float(np.max(np.abs(b))))
    # the shown prediction, (lo + hi) / 2, is one tree sum of both models' leaves
    point = MaskedEvaluator({"point": fitted.point}, background)
    assert point.path_of("point") == "tables"
    midpoint = 0.5 * (models["lo"].predict(patients[NUMERIC]) + models["hi"].predict(
        patients[NUMERIC]))
    np.testing.assert_allclose(point.plain("point", rows), midpoint, rtol=1e-6)  # XGBoost: f32
    result = Explainer(conformal, background_size=30).explain(patients.iloc[:5])
    d = result.decomposition
    np.testing.assert_allclose(d.total, d.calibration + d.instance, rtol=0, atol=1e-10)


def test_models_without_an_exact_reading_fall_back_to_brute_force():
    """(Log-link objectives have tables on their link scale: tests/test_link_models.py.)"""
    train, pool, _, _ = parts()
    x, y = train[NUMERIC], train["y"]
    dart = xgb.XGBRegressor(booster="dart", n_estimators=10).fit(x, y)
    linear_trees = lgb.LGBMRegressor(linear_tree=True, n_estimators=10, verbose=-1).fit(x, y)
    for model in (dart, linear_trees):
        fitted = system_from_models("absolute", {"f": model}, pool[[*NUMERIC, "y"]], target="y")
        evaluator = MaskedEvaluator(fitted.components, fitted.training_rows[:10])
        assert evaluator.path_of("f") == "brute", type(model).__name__
        np.testing.assert_allclose(fitted.components["f"].predict(fitted.training_rows[:5]),
                                   model.predict(pool[NUMERIC].iloc[:5]), rtol=1e-12)


def test_lightgbm_categorical_splits_on_integer_codes_are_exact():
    rng = np.random.default_rng(SEED)
    n = 600
    table = pd.DataFrame({"stage": rng.integers(0, 6, n).astype(float),
                          "x0": rng.normal(size=n)})
    table.loc[rng.random(n) < 0.1, "stage"] = np.nan
    table["y"] = (np.isin(table.stage, [1, 4]) * 2.0 + table.x0
                  + rng.normal(scale=0.5 + (table.stage == 3), size=n))
    fit, pool, calibration, patients = table.iloc[:250], table.iloc[250:400], \
        table.iloc[400:500], table.iloc[500:]
    models = {name: lgb.LGBMRegressor(n_estimators=30, min_data_per_group=5, cat_smooth=1,
                                      verbose=-1).fit(fit[["stage", "x0"]], target,
                                                      categorical_feature=["stage"])
              for name, target in (("f", fit["y"]), ("sigma", np.abs(fit["y"] - 1) + 0.5))}
    fitted = system_from_models("normalized", models, pool, target="y")
    conformal = fitted.conformalize(calibration, calibration["y"])
    ensemble = leaf_ensemble(fitted.components["f"].predictor)
    assert any(c.categorical for path in ensemble.conditions for c in path)
    # every category, unseen ones, missing, and fractional codes (LightGBM truncates them)
    values = np.array([0, 1, 2, 3, 4, 5, 7, 300, np.nan, 1.5, 3.9])
    points = np.column_stack([values, np.zeros(len(values))])
    background = np.vstack([fitted.training_rows[:20], points])
    fast = MaskedEvaluator(fitted.components, background)
    slow = MaskedEvaluator(fitted.components, background, path="brute")
    coalitions = all_coalitions(2)
    for name in ("f", "sigma"):
        assert fast.path_of(name) == "tables"
        a = fast.evaluate(coalitions, points, [name])[name]
        b = slow.evaluate(coalitions, points, [name])[name]
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=RTOL * float(np.max(np.abs(b))))
    d = Explainer(conformal, background_size=40).explain(patients.iloc[:5]).decomposition
    np.testing.assert_allclose(d.total, d.calibration + d.instance, rtol=0, atol=1e-10)


def test_histogram_boosting_reading_pandas_categories_falls_back_to_brute_force():
    train, pool, _, patients = parts()
    x = train[features(True)].assign(ward=train["ward"].astype("category"))
    model = HistGradientBoostingRegressor(max_iter=20, categorical_features="from_dtype",
                                          random_state=0).fit(x, train["y"])
    fitted = system_from_models("absolute", {"f": model}, pool[[*features(True), "y"]],
                                target="y")
    assert MaskedEvaluator(fitted.components, fitted.training_rows[:10]).path_of("f") == "brute"
    shown = patients[features(True)].assign(ward=patients["ward"].astype("category"))
    np.testing.assert_array_equal(fitted.point.predict(fitted.encode(patients)),
                                  model.predict(shown))


def test_an_imputer_that_replaces_real_values_keeps_the_pipeline_on_brute_force():
    # SimpleImputer(missing_values=0) maps 0 to the mean: not monotone, so no threshold rewrite
    train, pool, _, _ = parts()
    x = train[NUMERIC].fillna(0.0).round(0)
    model = make_pipeline(SimpleImputer(missing_values=0.0),
                          RandomForestRegressor(n_estimators=5, max_depth=3, random_state=0))
    model.fit(x, train["y"])
    fitted = system_from_models("absolute", {"f": model}, pool[[*NUMERIC, "y"]].fillna(0.0),
                                target="y")
    assert MaskedEvaluator(fitted.components, fitted.training_rows[:10]).path_of("f") == "brute"

"""Models with a log link (Poisson, gamma, Tweedie boosters; the gamma family's own models) are
masked on their link scale with exact tree tables, checked against the libraries themselves.

The definition (core.games.masking): g_S(x) = exp(mean over the background of the model's raw
margin at the hybrid rows). The reference here is written without the engine: hybrids built one
coalition at a time and handed to each library's own margin output (scikit-learn's
`_raw_predict`, XGBoost's `output_margin=True`, LightGBM's `raw_score=True`, a Pipeline's
transformers and then its last step's). `--masking response` is the other definition, the mean
of the model's own `predict` over the hybrids, checked the same way. Models come from their
files (XGBoost JSON, LightGBM text, skops), as a hospital brings them.
"""

from __future__ import annotations

import itertools
import math
import warnings

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
import skops.io
import xgboost as xgb
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from cpdecomp import Explainer, fit_system, load_model_file, system_from_models
from cpdecomp.core.games.masking import MaskedEvaluator

FEATURES = ["age", "ward_load", "creatinine", "admissions"]
RTOL = 1e-10
XGB_RTOL = 1e-6
"""XGBoost's own margin output sums its float32 leaves in float32; we sum them in float64."""


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    n = 420
    x = pd.DataFrame(rng.normal(size=(n, len(FEATURES))), columns=FEATURES)
    stay = np.exp(0.5 + 0.4 * x.age - 0.3 * x.ward_load + 0.2 * x.creatinine * x.admissions)
    y = stay * rng.gamma(4.0, 0.25, n) + 0.05
    return x, y


def _margin_hgb(model, frame):
    return model._raw_predict(frame)[:, 0]


def _margin_xgb(booster, frame):
    return booster.inplace_predict(frame, predict_type="margin")


def own_predict(model, frame):
    """The model's own prediction (a Booster read from JSON predicts in place)."""
    return model.inplace_predict(frame) if isinstance(model, xgb.Booster) else model.predict(frame)


def _margin_lgb(model, frame):
    return model.predict(frame, raw_score=True)


def _margin_pipeline(model, frame):
    inner = model[:-1].transform(frame)
    last = model.steps[-1][1]
    return (_margin_hgb if isinstance(last, HistGradientBoostingRegressor)
            else _margin_lgb)(last, np.asarray(inner))


def _lgb_text(model, tmp):
    path = tmp / "model.txt"
    model.booster_.save_model(path)
    return path


def _xgb_json(model, tmp):
    path = tmp / "model.json"
    model.save_model(path)
    return path


def _skops(model, tmp):
    path = tmp / "model.skops"
    skops.io.dump(model, path)
    return path


FIT = {
    "hgb-poisson": lambda: HistGradientBoostingRegressor(loss="poisson", max_iter=40),
    "hgb-gamma": lambda: HistGradientBoostingRegressor(loss="gamma", max_iter=40),
    "xgb-tweedie": lambda: xgb.XGBRegressor(objective="reg:tweedie", n_estimators=40, max_depth=4),
    "xgb-poisson": lambda: xgb.XGBRegressor(objective="count:poisson", n_estimators=40,
                                            max_depth=4),
    "xgb-gamma": lambda: xgb.XGBRegressor(objective="reg:gamma", n_estimators=40, max_depth=4),
    "lgb-poisson": lambda: lgb.LGBMRegressor(objective="poisson", n_estimators=40, verbose=-1),
    "lgb-tweedie": lambda: lgb.LGBMRegressor(objective="tweedie", n_estimators=40, verbose=-1),
    "lgb-gamma": lambda: lgb.LGBMRegressor(objective="gamma", n_estimators=40, verbose=-1),
    "pipeline-hgb-gamma": lambda: make_pipeline(
        StandardScaler(), HistGradientBoostingRegressor(loss="gamma", max_iter=40)),
    "pipeline-lgb-poisson": lambda: make_pipeline(
        StandardScaler(), lgb.LGBMRegressor(objective="poisson", n_estimators=40, verbose=-1)),
}
FILE = {"xgb": _xgb_json, "lgb": _lgb_text, "hgb": _skops, "pipeline": _skops}
MARGIN = {"xgb": _margin_xgb, "lgb": _margin_lgb, "hgb": _margin_hgb,
          "pipeline": _margin_pipeline}


def hand_masked(function, background: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """(coalitions, rows): the mean of function(hybrid frame) over the background, built one
    coalition at a time."""
    coalitions = np.array(list(itertools.product([False, True], repeat=rows.shape[1])))
    out = np.empty((len(coalitions), len(rows)))
    for s, keep in enumerate(coalitions):
        hybrids = np.repeat(background[None], len(rows), axis=0)
        hybrids[:, :, keep] = rows[:, None, keep]
        frame = pd.DataFrame(hybrids.reshape(-1, rows.shape[1]), columns=FEATURES)
        out[s] = np.asarray(function(frame), dtype=float).reshape(len(rows), -1).mean(axis=1)
    return coalitions, out


@pytest.fixture(scope="module", params=sorted(FIT))
def brought(request, data, tmp_path_factory):
    """(name, the model as read back from its file, the fitted system)."""
    x, y = data
    name = request.param
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LightGBM's and XGBoost's own chatter
        model = FIT[name]().fit(x.iloc[:200], y[:200])
    path = FILE[name.split("-")[0]](model, tmp_path_factory.mktemp(name))
    loaded = load_model_file(path)
    fitted = system_from_models("gamma", {"f": loaded}, x.iloc[200:300].assign(y=y[200:300]),
                                target="y")
    return name, loaded, fitted


def test_a_brought_link_model_is_read_on_its_link_scale_with_tree_tables(brought, data):
    name, model, fitted = brought
    x, _ = data
    f = fitted.components["f"]
    assert f.link == "log", name
    assert MaskedEvaluator(fitted.components, fitted.training_rows[:10]).path_of("f") == "tables"
    assert MaskedEvaluator(fitted.components, fitted.training_rows[:10],
                           path="response").path_of("f") == "brute"
    # the component is the model itself: exp(margin) is its own predict
    rtol = XGB_RTOL if name.startswith("xgb") else 1e-12
    np.testing.assert_allclose(f.predict(fitted.encode(x.iloc[300:320])),
                               own_predict(model, x.iloc[300:320]), rtol=rtol)


def test_link_scale_masking_equals_the_libraries_own_margins_over_all_coalitions(brought, data):
    name, model, fitted = brought
    x, _ = data
    background = fitted.training_rows[:16]
    rows = fitted.encode(x.iloc[300:304])
    coalitions, margins = hand_masked(
        lambda frame: MARGIN[name.split("-")[0]](model, frame), background, rows)
    fast = MaskedEvaluator(fitted.components, background).evaluate(coalitions, rows, ["f"])["f"]
    slow = MaskedEvaluator(fitted.components, background, path="brute").evaluate(
        coalitions, rows, ["f"])["f"]
    want = np.exp(margins)
    np.testing.assert_allclose(fast, slow, rtol=RTOL)  # the same definition, two algorithms
    np.testing.assert_allclose(fast, want, rtol=XGB_RTOL if name.startswith("xgb") else RTOL)


def test_response_scale_masking_is_the_mean_of_the_models_own_predict(brought, data):
    name, model, fitted = brought
    x, _ = data
    background = fitted.training_rows[:16]
    rows = fitted.encode(x.iloc[300:303])
    coalitions, want = hand_masked(lambda frame: own_predict(model, frame), background, rows)
    got = MaskedEvaluator(fitted.components, background, path="response").evaluate(
        coalitions, rows, ["f"])["f"]
    np.testing.assert_allclose(got, want, rtol=XGB_RTOL if name.startswith("xgb") else RTOL)
    # the two definitions differ (Jensen: the mean of exp is above exp of the mean)
    link = MaskedEvaluator(fitted.components, background).evaluate(coalitions, rows, ["f"])["f"]
    inner = coalitions.any(axis=1) & ~coalitions.all(axis=1)
    assert np.all(got[inner] >= link[inner] * (1 - 1e-12))
    assert np.max(got[inner] / link[inner]) > 1 + 1e-6


@pytest.mark.parametrize("model", ["gbm", "linear"])
def test_the_gamma_familys_own_models_have_exact_fast_paths(model, data):
    """Built-in gbm (gamma loss) and the gamma GLM: tables / closed form on the log scale,
    φ equal to brute force of the same definition over all coalitions, the split exact."""
    x, y = data
    system = fit_system(x.iloc[:200], y[:200], FEATURES, family="gamma", model=model,
                        seed=0).conformalize(x.iloc[200:320], y[200:320])
    fast = Explainer(system, background_size=24, seed=0)
    assert fast.evaluator.path_of("f") == ("tables" if model == "gbm" else "additive")
    estimator = system.fitted.components["f"].predictor.estimator
    encoded = system.fitted.encode(x.iloc[320:330])
    np.testing.assert_allclose(system.fitted.components["f"].predict(encoded),
                               estimator.predict(encoded if model == "gbm" else
                                                 system.fitted.components["f"].predictor
                                                 .design.transform(encoded)), rtol=1e-12)
    patients = x.iloc[320:332]
    got = fast.explain(patients, method="exact", alpha=0.1)
    want = Explainer(system, background_size=24, seed=0, masking="brute").explain(
        patients, method="exact", alpha=0.1)
    for part in ("calibration", "instance", "total"):
        np.testing.assert_allclose(getattr(got.decomposition, part),
                                   getattr(want.decomposition, part), rtol=0,
                                   atol=1e-10 * float(got.width.max()))
    d = got.decomposition
    np.testing.assert_allclose(d.total, d.calibration + d.instance, rtol=0, atol=1e-12 * float(
        got.width.max()))
    np.testing.assert_allclose(d.total.sum(axis=1), got.width - got.base_width, rtol=0,
                               atol=1e-10 * float(got.width.max()))


def test_on_the_log_scale_the_instance_game_is_the_raw_margins_shapley_value(data):
    """Gamma family, log units: v_I(S) = ln f_S = the masked raw margin, so φ_I is the exact
    interventional Shapley value of the model's raw output (shap's model_output="raw"), here
    computed by hand from scikit-learn's own _raw_predict over all coalitions."""
    x, y = data
    system = fit_system(x.iloc[:200], y[:200], FEATURES, family="gamma", model="gbm",
                        seed=0).conformalize(x.iloc[200:320], y[200:320])
    explainer = Explainer(system, background_size=40, seed=0)
    patients = x.iloc[320:326]
    got = explainer.explain(patients, method="exact", alpha=0.1, units="log").decomposition
    estimator = system.fitted.components["f"].predictor.estimator
    rows = system.fitted.encode(patients)
    coalitions, margins = hand_masked(
        lambda frame: estimator._raw_predict(frame.to_numpy())[:, 0], explainer.background, rows)
    d = len(FEATURES)
    index = {tuple(c): i for i, c in enumerate(coalitions)}
    want = np.zeros((len(rows), d))
    for keep in coalitions:
        size = int(keep.sum())
        for j in np.flatnonzero(~keep):
            weight = math.factorial(size) * math.factorial(d - size - 1) / math.factorial(d)
            with_j = keep.copy()
            with_j[j] = True
            want[:, j] += weight * (margins[index[tuple(with_j)]] - margins[index[tuple(keep)]])
    np.testing.assert_allclose(got.instance, want, rtol=0, atol=1e-12)

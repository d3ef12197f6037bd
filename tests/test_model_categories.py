"""A brought model's categories are its own, not only the background pool's.

Every kind of fitted model a user brings gives, through cpdecomp, the prediction its own
`predict` gives, on every patient, including a rare category the model was fitted on but the
rows given as the training table (the background pool) lack. Before the fix such a category
was encoded as missing, so the model read it as missing: the prediction, q-hat and the parts
moved with no warning (issue 34). A category that neither the model nor the rows know is
refused, naming the column and rows (never the cell's value).

The models are read back from their files (skops, LightGBM text, XGBoost JSON), as a hospital
would bring them; MAPIE is given a LightGBM regressor in memory.
"""

import functools

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import make_column_transformer
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.explainer import Explainer
from cpdecomp.core.games.masking import MaskedEvaluator
from cpdecomp.core.model_files import load_model_file
from cpdecomp.core.system import system_from_models

skops_io = pytest.importorskip("skops.io")
xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")

FEATURES = ["age", "ward"]
LEVELS = ["north", "south", "east", "rare"]
RARE = "rare"


@functools.cache
def tables():
    """Fit rows (all levels), a pool without the rare level, calibration and patients with it."""
    rng = np.random.default_rng(11)
    n = 1400
    frame = pd.DataFrame({"age": rng.uniform(20, 90, n),
                          "ward": rng.choice(LEVELS, n, p=[0.4, 0.3, 0.25, 0.05])})
    frame.loc[rng.random(n) < 0.08, "ward"] = None  # missing has its own learned reading
    frame["y"] = (0.05 * frame.age + 1.0 * (frame.ward == "south") - 4.0 * frame.ward.isna()
                  + 6.0 * (frame.ward == RARE) + rng.normal(scale=0.5, size=n))
    fit, pool = frame.iloc[:600], frame.iloc[600:900]
    pool = pool[pool.ward != RARE]
    calibration, patients = frame.iloc[900:1150], frame.iloc[1150:]
    assert (calibration.ward == RARE).sum() >= 5 and (patients.ward == RARE).sum() >= 5
    return fit, pool, calibration, patients


def as_categories(frame):
    """The feature columns as the boosters were fitted on them: ward as pandas categories."""
    return frame[FEATURES].assign(ward=pd.Categorical(frame.ward, categories=LEVELS))


def skops_pipeline(tmp_path):
    fit, *_ = tables()
    model = make_pipeline(
        make_column_transformer((OneHotEncoder(handle_unknown="ignore"), ["ward"]),
                                remainder="passthrough"),
        RandomForestRegressor(n_estimators=20, max_depth=6, random_state=0),
    ).fit(fit[FEATURES], fit.y)
    skops_io.dump(model, tmp_path / "model.skops")
    return load_model_file(tmp_path / "model.skops"), lambda frame: frame[FEATURES]


def lightgbm_text(tmp_path):
    fit, *_ = tables()
    model = lgb.LGBMRegressor(n_estimators=40, min_data_per_group=5, min_child_samples=5,
                              cat_smooth=1, verbose=-1).fit(as_categories(fit), fit.y)
    model.booster_.save_model(tmp_path / "model.txt")
    return load_model_file(tmp_path / "model.txt"), as_categories


def xgboost_json(tmp_path):
    fit, *_ = tables()
    model = xgb.XGBRegressor(n_estimators=40, max_depth=3, enable_categorical=True,
                             n_jobs=1).fit(as_categories(fit), fit.y)
    model.save_model(tmp_path / "model.json")
    return load_model_file(tmp_path / "model.json"), as_categories


def histogram_boosting(tmp_path):
    fit, *_ = tables()
    # in memory: its skops file holds a functools.partial, which the allow-list refuses
    model = HistGradientBoostingRegressor(max_iter=40, categorical_features="from_dtype",
                                          random_state=0).fit(as_categories(fit), fit.y)
    return model, as_categories


def own_predict(model, frame):
    if isinstance(model, xgb.Booster):
        return model.inplace_predict(frame)
    return model.predict(frame)


KINDS = {"skops Pipeline + OneHotEncoder": skops_pipeline, "LightGBM text": lightgbm_text,
         "XGBoost JSON": xgboost_json, "HistGradientBoosting from_dtype": histogram_boosting}
PATHS = {"skops Pipeline + OneHotEncoder": "tables", "LightGBM text": "tables",
         "XGBoost JSON": "brute", "HistGradientBoosting from_dtype": "brute"}
"""Categorical splits keep the tables where they had them; the rare level's code is one more
row of each split's table."""


@pytest.mark.parametrize("kind", KINDS)
def test_prediction_is_the_models_own_for_a_category_the_pool_lacks(kind, tmp_path):
    model, shown = KINDS[kind](tmp_path)
    _, pool, calibration, patients = tables()
    assert RARE not in set(pool.ward)
    theirs = own_predict(model, shown(patients))
    # The rare level matters to the model: read as missing it would be another prediction.
    rare = (patients.ward == RARE).to_numpy()
    missing = pd.Series([None] * len(patients), index=patients.index, dtype=object)
    as_missing = own_predict(model, shown(patients.assign(ward=missing)))
    assert np.min(np.abs(theirs - as_missing)[rare]) > 1.0

    fitted = system_from_models("absolute", {"f": model}, pool[[*FEATURES, "y"]], target="y")
    assert RARE in fitted.encoder.kinds_[1].categories
    system = fitted.conformalize(calibration[FEATURES], calibration.y)
    result = Explainer(system, background_size=20).explain(patients[FEATURES])
    np.testing.assert_allclose(result.prediction, theirs, rtol=1e-12, atol=0)
    # The calibration scores are the model's own residuals too (q-hat does not move).
    own_scores = np.abs(calibration.y.to_numpy() - own_predict(model, shown(calibration)))
    np.testing.assert_allclose(system.calibration_scores(), np.sort(own_scores), rtol=1e-12)
    d = result.decomposition
    np.testing.assert_allclose(d.total, d.calibration + d.instance, rtol=0, atol=1e-10)
    # Masked with a background holding the rare level: the tables agree with brute force.
    rows = fitted.encode(patients.iloc[:12])
    background = np.vstack([fitted.training_rows[:10], fitted.encode(patients[rare][:3])])
    fast = MaskedEvaluator(fitted.components, background)
    assert fast.path_of("f") == PATHS[kind]
    slow = MaskedEvaluator(fitted.components, background, path="brute")
    coalitions = np.array([[False, False], [True, False], [False, True], [True, True]])
    np.testing.assert_allclose(fast.evaluate(coalitions, rows, ["f"])["f"],
                               slow.evaluate(coalitions, rows, ["f"])["f"], rtol=1e-12)


def test_mapie_with_lightgbm_takes_a_calibration_set_holding_the_rare_category():
    """Before the fix the calibration rows were refused as "not MAPIE's" (they were, but their
    rare category reached the model as missing)."""
    from mapie.regression import SplitConformalRegressor

    from cpdecomp import system_from_mapie

    fit, pool, calibration, patients = tables()
    model = lgb.LGBMRegressor(n_estimators=40, min_data_per_group=5, min_child_samples=5,
                              cat_smooth=1, n_jobs=1, verbose=-1).fit(as_categories(fit), fit.y)
    mapie = SplitConformalRegressor(model, confidence_level=0.9, prefit=True)
    mapie.conformalize(as_categories(calibration), calibration.y)
    system = system_from_mapie(mapie, calibration[FEATURES], calibration.y,
                               training_table=pool[FEATURES])
    result = Explainer(system, background_size=20).explain(patients[FEATURES])
    np.testing.assert_allclose(result.prediction, model.predict(as_categories(patients)),
                               rtol=1e-12)
    _, theirs = mapie.predict_interval(as_categories(patients))
    np.testing.assert_allclose(result.upper - result.lower, theirs[:, 1, 0] - theirs[:, 0, 0],
                               rtol=1e-12)


def test_a_category_neither_the_model_nor_the_pool_knows_is_refused_by_column_and_row(tmp_path):
    model, _ = lightgbm_text(tmp_path)
    _, pool, calibration, patients = tables()
    fitted = system_from_models("absolute", {"f": model}, pool[[*FEATURES, "y"]], target="y")
    unknown = patients[FEATURES].reset_index(drop=True)
    unknown.loc[3, "ward"] = "west wing"
    with pytest.raises(CpdecompError, match=r"column 'ward' has a category in data row 4 "
                                            r"that neither") as refused:
        fitted.conformalize(calibration[FEATURES], calibration.y).predict(unknown)
    assert "west wing" not in str(refused.value)  # a cell's value is patient data


def test_a_function_of_the_table_cannot_tell_its_categories_so_the_pools_are_the_known_ones():
    _, pool, calibration, _ = tables()

    def by_ward(frame):
        return frame["age"].to_numpy() * 0.05 + 6.0 * (frame["ward"] == RARE).to_numpy()

    fitted = system_from_models("absolute", {"f": by_ward}, pool[[*FEATURES, "y"]], target="y")
    with pytest.raises(CpdecompError, match=r"column 'ward' has a category in .*leave those "
                                            r"cells empty \(missing\), or add rows"):
        fitted.conformalize(calibration[FEATURES], calibration.y)


def test_a_pipeline_encoder_after_an_imputer_gives_its_categories():
    from sklearn.impute import SimpleImputer

    fit, pool, _, patients = tables()
    text = make_pipeline(SimpleImputer(strategy="most_frequent"),
                         OneHotEncoder(handle_unknown="ignore"))
    model = make_pipeline(make_column_transformer((text, ["ward"]), remainder="passthrough"),
                          RandomForestRegressor(n_estimators=10, random_state=0))
    model.fit(fit[FEATURES], fit.y)
    fitted = system_from_models("absolute", {"f": model}, pool[[*FEATURES, "y"]], target="y")
    assert fitted.encoder.kinds_[1].categories == tuple(sorted(LEVELS))
    np.testing.assert_allclose(fitted.point.predict(fitted.encode(patients)),
                               model.predict(patients[FEATURES]), rtol=1e-12)

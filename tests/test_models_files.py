"""Model files, never pickle: skops with an allow-list, XGBoost JSON/UBJ, LightGBM text."""

import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.compose import make_column_transformer
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.games.masking import MaskedEvaluator
from cpdecomp.core.model_files import load_model_file
from cpdecomp.core.system import system_from_models

skops_io = pytest.importorskip("skops.io")
xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")


def table(n=200, seed=0):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"age": rng.uniform(20, 80, n), "ward": rng.choice(["a", "b"], n)})
    frame["y"] = 0.1 * frame.age + 2.0 * (frame.ward == "a") + rng.normal(size=n)
    return frame


class Custom(BaseEstimator, RegressorMixin):
    """A type no allow-list knows: its file must be refused."""

    def fit(self, x, y):
        self.mean_ = float(np.mean(y))
        return self

    def predict(self, x):
        return np.full(len(x), self.mean_)


def test_a_skops_pipeline_loads_and_keeps_the_fast_path(tmp_path):
    data = table()
    pipeline = make_pipeline(
        make_column_transformer((OneHotEncoder(), ["ward"]), (StandardScaler(), ["age"])),
        HistGradientBoostingRegressor(max_iter=20),
    ).fit(data[["age", "ward"]], data["y"])
    path = tmp_path / "model.skops"
    skops_io.dump(pipeline, path)
    loaded = load_model_file(path)
    np.testing.assert_array_equal(loaded.predict(data[["age", "ward"]]),
                                  pipeline.predict(data[["age", "ward"]]))
    fitted = system_from_models("absolute", {"f": loaded}, data, target="y")
    assert MaskedEvaluator(fitted.components, fitted.training_rows[:10]).path_of("f") == "tables"


def test_an_unknown_skops_type_is_refused_by_name(tmp_path):
    data = table()
    path = tmp_path / "custom.skops"
    skops_io.dump(Custom().fit(data[["age"]], data["y"]), path)
    with pytest.raises(CpdecompError, match=r"not on the trusted list: .*Custom"):
        load_model_file(path)


@pytest.mark.parametrize("suffix", [".pkl", ".pickle", ".joblib", ".PKL"])
def test_pickle_files_are_refused_with_a_pointer_to_skops(tmp_path, suffix):
    path = tmp_path / f"model{suffix}"
    path.write_bytes(pickle.dumps({"not": "loaded"}))
    with pytest.raises(CpdecompError, match="skops"):
        load_model_file(path)


@pytest.mark.parametrize("suffix", [".json", ".ubj"])
def test_xgboost_model_files_round_trip(tmp_path, suffix):
    data = table()
    model = xgb.XGBRegressor(n_estimators=20, max_depth=3).fit(data[["age"]], data["y"])
    path = tmp_path / f"model{suffix}"
    model.save_model(path)
    booster = load_model_file(path)
    np.testing.assert_array_equal(booster.inplace_predict(data[["age"]]),
                                  model.predict(data[["age"]]))
    fitted = system_from_models("absolute", {"f": booster}, data[["age", "y"]], target="y")
    assert MaskedEvaluator(fitted.components, fitted.training_rows[:10]).path_of("f") == "tables"


def test_a_lightgbm_text_model_round_trips_with_its_categories(tmp_path):
    data = table()
    x = data[["age", "ward"]].assign(ward=data["ward"].astype("category"))
    model = lgb.LGBMRegressor(n_estimators=20, min_data_per_group=5, verbose=-1).fit(x, data["y"])
    path = tmp_path / "model.txt"
    model.booster_.save_model(path)
    booster = load_model_file(path)
    np.testing.assert_array_equal(booster.predict(x), model.predict(x))
    fitted = system_from_models("absolute", {"f": booster}, data, target="y")
    assert MaskedEvaluator(fitted.components, fitted.training_rows[:10]).path_of("f") == "tables"


@pytest.mark.parametrize(("name", "content", "message"), [
    ("model.json", b'{"hello": 1}', "not an XGBoost model file"),
    ("model.txt", b"just some notes\n", "not a LightGBM text model"),
    ("model.skops", b"PK not really", "not a skops file"),
    ("model.onnx", b"\x08\x07", r"must end in \.skops, \.json, \.ubj, \.txt"),
])
def test_other_content_is_refused_in_one_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(CpdecompError, match=message) as info:
        load_model_file(path)
    assert "\n" not in str(info.value)


def test_model_files_are_capped_in_size_before_reading(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 2048)
    with pytest.raises(CpdecompError, match="capped"):
        load_model_file(path, max_bytes=1024)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(CpdecompError, match=r"not found: none\.skops"):
        load_model_file(tmp_path / "none.skops")

"""The dashboard's "Your fitted model" source without a browser (app.sources.model_upload): real
model files in, the checks the Data page shows in its error box."""

from __future__ import annotations

import dataclasses
import pickle
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cpdecomp import StudyOptions, prepare_study
from cpdecomp.app import sources
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.tables import LIMITS


def cohort() -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(3)
    n = 120
    x = pd.DataFrame(rng.normal(size=(n, 3)), columns=["age_z", "creatinine_z", "bmi_z"])
    y = x["age_z"] + np.abs(x["creatinine_z"]) * rng.normal(size=n)
    table = pd.concat([pd.DataFrame({"mrn": [f"M{i:03d}" for i in range(n)]}), x,
                       pd.DataFrame({"length_of_stay": y})], axis=1)
    return table, x, y.to_numpy()


def saved(model, path: Path) -> tuple[str, bytes]:
    if path.suffix == ".skops":
        import skops.io
        skops.io.dump(model, path)
    else:
        model.save_model(path)
    return path.name, path.read_bytes()


def test_skops_and_lightgbm_files_run_as_given(tmp_path: Path) -> None:
    import lightgbm
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    table, x, y = cohort()
    point = make_pipeline(StandardScaler(), HistGradientBoostingRegressor(max_iter=20)).fit(x, y)
    spread = lightgbm.LGBMRegressor(n_estimators=10, verbose=-1).fit(
        x, np.abs(y - point.predict(x)))
    files = {"f": saved(point, tmp_path / "f.skops"),
             "sigma": saved(spread.booster_, tmp_path / "sigma.txt")}
    dataset = sources.model_upload(("ward.csv", table.to_csv(index=False).encode()), files)
    assert dataset.model_features == ("age_z", "creatinine_z", "bmi_z")
    assert dataset.default_target == "length_of_stay" and dataset.default_id == "mrn"
    assert sources.family_for(list(files)) == "normalized"
    study = prepare_study(dataset.patients, StudyOptions(
        target="length_of_stay", id_column="mrn", features=dataset.model_features,
        family="normalized"), models=dataset.models)
    # the study's point model is the uploaded pipeline, not a refit
    rows = dataset.patients[list(dataset.model_features)].iloc[:5]
    np.testing.assert_allclose(study.system.predict(rows), point.predict(rows), rtol=1e-12)
    # the digest follows the model bytes, so another model is another fitted study
    again = sources.model_upload(("copy.csv", table.to_csv(index=False).encode()), files)
    assert again.digest == dataset.digest
    changed = sources.model_upload(("ward.csv", table.to_csv(index=False).encode()),
                                   {"f": files["f"]})
    assert changed.digest != dataset.digest


def test_refusals_name_the_problem(tmp_path: Path) -> None:
    import xgboost
    from sklearn.linear_model import LinearRegression

    table, x, y = cohort()
    csv = ("ward.csv", table.to_csv(index=False).encode())
    point = xgboost.XGBRegressor(n_estimators=5, n_jobs=1).fit(x, y)
    with pytest.raises(CpdecompError, match=r"pickle files are refused.*skops"):
        sources.model_upload(csv, {"f": ("point.pkl", pickle.dumps(point))})
    with pytest.raises(CpdecompError, match="model files must end in"):
        sources.model_upload(csv, {"f": ("point.exe", b"MZ")})
    renamed = xgboost.XGBRegressor(n_estimators=5, n_jobs=1).fit(
        x.rename(columns={"bmi_z": "weight_z"}), y)
    with pytest.raises(CpdecompError, match="the table lacks 'weight_z'"):
        sources.model_upload(csv, {"f": saved(renamed, tmp_path / "renamed.json")})
    with pytest.raises(CpdecompError, match="read different columns"):
        sources.model_upload(csv, {"f": saved(point, tmp_path / "f.json"),
                                   "sigma": saved(renamed, tmp_path / "sigma.json")})
    strange = LinearRegression().fit(x, y)
    strange.note_ = Fraction(1, 3)  # a type outside the allow-list
    with pytest.raises(CpdecompError, match=r"fractions\.Fraction"):
        sources.model_upload(csv, {"f": saved(strange, tmp_path / "strange.skops")})
    name, content = saved(point, tmp_path / "big.json")
    small = dataclasses.replace(LIMITS, max_bytes=len(content) - 1)
    with pytest.raises(CpdecompError, match="upload limit"):
        sources.read_model_upload("f", name, content, small)
    with pytest.raises(CpdecompError, match="at least one model file"):
        sources.model_upload(csv, {})


def test_the_run_names_the_users_model_not_the_unused_built_in(tmp_path: Path) -> None:
    import xgboost

    from cpdecomp.app import planning

    table, x, y = cohort()
    point = xgboost.XGBRegressor(n_estimators=5, n_jobs=1).fit(x, y)
    dataset = sources.model_upload(("ward.csv", table.to_csv(index=False).encode()),
                                   {"f": saved(point, tmp_path / "f.json")})
    assert planning.model_name("gbm", dataset.models) == "your model: XGBoost"
    assert planning.model_name("gbm", None) == "gbm"

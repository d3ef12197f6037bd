"""The command line with --model-file COMPONENT=PATH: model files in, never pickle."""

import json
import pickle

import numpy as np
import pandas as pd
import pytest
from cli_helpers import assert_bad_input, run_ok

skops_io = pytest.importorskip("skops.io")
xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")


def write_tables(tmp_path, seed=0):
    rng = np.random.default_rng(seed)
    n = 600
    table = pd.DataFrame({"age": rng.uniform(20, 80, n), "dose": rng.normal(size=n)})
    table["y"] = 0.05 * table.age + table.dose ** 2 + rng.normal(scale=0.5 + 0.3 * table.age / 80,
                                                                 size=n)
    table.insert(0, "patient_id", [f"P{i}" for i in range(n)])
    fit, rest = table.iloc[:200], table.iloc[200:]
    rest.to_csv(tmp_path / "data.csv", index=False)
    return fit


def test_xgboost_and_lightgbm_files_explain_on_the_exact_path(tmp_path, capsys):
    fit = write_tables(tmp_path)
    x, y = fit[["age", "dose"]], fit["y"]
    xgb.XGBRegressor(n_estimators=30, max_depth=3).fit(x, y).save_model(tmp_path / "f.json")
    spread = np.abs(y - y.mean()) + 0.5
    lgb.LGBMRegressor(n_estimators=30, verbose=-1).fit(x, spread).booster_.save_model(
        tmp_path / "sigma.txt")
    out = tmp_path / "out.json"
    run_ok(capsys, "explain", tmp_path / "data.csv", "--target", "y", "--id-column",
           "patient_id", "--family", "normalized", "--model-file", f"f={tmp_path / 'f.json'}",
           "--model-file", f"sigma={tmp_path / 'sigma.txt'}", "--out", out)
    result = json.loads(out.read_text())
    assert result["meta"]["model"] == "lightgbm+xgboost"
    assert result["meta"]["additivity_error"] <= 1e-10
    assert result["meta"]["background"] == 200  # every training row: the fast-path default


def test_a_skops_pipeline_file_explains(tmp_path, capsys):
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    fit = write_tables(tmp_path)
    model = make_pipeline(StandardScaler(), RandomForestRegressor(n_estimators=10, max_depth=4,
                                                                  random_state=0))
    skops_io.dump(model.fit(fit[["age", "dose"]], fit["y"]), tmp_path / "f.skops")
    out = tmp_path / "out.csv"
    err = run_ok(capsys, "explain", tmp_path / "data.csv", "--target", "y", "--id-column",
                 "patient_id", "--family", "absolute", "--model-file",
                 f"f={tmp_path / 'f.skops'}", "--out", out)
    assert "explained" in err
    assert set(pd.read_csv(out)["feature"]) == {"age", "dose"}


def test_a_pickle_file_is_refused_in_one_line(tmp_path, capsys):
    write_tables(tmp_path)
    (tmp_path / "f.pkl").write_bytes(pickle.dumps({"f": 1}))
    message = assert_bad_input(capsys, "explain", tmp_path / "data.csv", "--target", "y",
                               "--model-file", f"f={tmp_path / 'f.pkl'}", "--out",
                               tmp_path / "out.csv")
    assert "skops" in message


def test_a_model_that_does_not_fit_the_columns_is_refused_with_the_names(tmp_path, capsys):
    fit = write_tables(tmp_path)
    # A column the model reads that the table lacks is refused by name. (A table column the
    # model does not read is no longer refused: the model's own columns are the features when
    # --features is absent; tests/test_cli_brought_features.py.)
    model = xgb.XGBRegressor(n_estimators=5).fit(
        fit[["age", "dose"]].rename(columns={"dose": "creatinine"}), fit["y"])
    model.save_model(tmp_path / "f.json")
    message = assert_bad_input(capsys, "explain", tmp_path / "data.csv", "--target", "y",
                               "--id-column", "patient_id", "--family", "absolute",
                               "--model-file", f"f={tmp_path / 'f.json'}", "--out",
                               tmp_path / "out.csv")
    assert "'creatinine'" in message
    # --features given that the model was not fitted on: refused naming both
    only_age = xgb.XGBRegressor(n_estimators=5).fit(fit[["age"]], fit["y"])
    only_age.save_model(tmp_path / "age.json")
    message = assert_bad_input(capsys, "explain", tmp_path / "data.csv", "--target", "y",
                               "--id-column", "patient_id", "--family", "absolute",
                               "--features", "age,dose",
                               "--model-file", f"f={tmp_path / 'age.json'}", "--out",
                               tmp_path / "out.csv")
    assert "'dose'" in message


def test_a_malformed_model_file_argument_is_refused(tmp_path, capsys):
    write_tables(tmp_path)
    message = assert_bad_input(capsys, "explain", tmp_path / "data.csv", "--target", "y",
                               "--model-file", "f.json", "--out", tmp_path / "out.csv")
    assert "COMPONENT=PATH" in message

"""`cpdecomp explain --model-file` takes the model's own columns when --features is absent,
and its log lines name the brought model (issue 33, last bullet).

Before the fix a table holding any column the model does not read (a ward note, a second
outcome) was refused ("the model was not fitted on ..."), where the dashboard takes the model's
columns; and the progress and summary lines said "gbm", the unused built-in choice. The model
is a skops file; the command line runs in-process (main()) and once as a subprocess.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_helpers import run_ok
from sklearn.compose import make_column_transformer
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

skops_io = pytest.importorskip("skops.io")

ROOT = Path(__file__).resolve().parents[1]


def write_files(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(33)
    n = 500
    table = pd.DataFrame({"patient_id": [f"P{i}" for i in range(n)],
                          "age": rng.uniform(20, 90, n), "ward": rng.integers(1, 4, n),
                          "bp": rng.normal(120, 15, n),
                          "note_length": rng.integers(0, 400, n),  # read by no model
                          "readmitted_days": rng.exponential(30, n)})  # another outcome
    table["los"] = 0.05 * table.age + 1.5 * (table.ward == 2) + rng.gamma(2.0, 1.0, n)
    fit = table.iloc[:200]
    # the model reads bp before age: its own order, not the table's
    model = make_pipeline(
        make_column_transformer((OneHotEncoder(handle_unknown="ignore"), ["ward"]),
                                remainder="passthrough"),
        HistGradientBoostingRegressor(max_iter=30, random_state=0),
    ).fit(fit[["bp", "age", "ward"]], fit.los)
    skops_io.dump(model, tmp_path / "los.skops")
    table.iloc[200:].to_csv(tmp_path / "ward.csv", index=False)
    return tmp_path / "ward.csv", tmp_path / "los.skops"


def test_the_models_own_columns_are_the_features_and_the_lines_name_it(tmp_path, capsys):
    data, model = write_files(tmp_path)
    out = tmp_path / "out.json"
    err = run_ok(capsys, "explain", data, "--target", "los", "--id-column", "patient_id",
                 "--family", "absolute", "--model-file", f"f={model}", "--out", out,
                 "--verbose")
    result = json.loads(out.read_text())
    assert result["meta"]["features"] == ["bp", "age", "ward"]  # main: refused (note_length)
    assert result["meta"]["additivity_error"] <= 1e-10
    assert "gbm" not in err  # main: "fitted gbm on 150 rows" and "(absolute, gbm, exact"
    assert ("took your model (f: scikit-learn Pipeline from los.skops) as given, with "
            "150 training rows as the background pool") in err, err
    summary = [line for line in err.splitlines() if line.startswith("explained")]
    assert len(summary) == 1 and "(absolute, your scikit-learn Pipeline, exact" in summary[0]


def test_explicit_features_still_win(tmp_path, capsys):
    """--features given: those, checked against the model as before."""
    data, model = write_files(tmp_path)
    status_err = run_ok(capsys, "explain", data, "--target", "los", "--id-column",
                        "patient_id", "--family", "absolute", "--features", "bp,age,ward",
                        "--model-file", f"f={model}", "--out", tmp_path / "out.csv")
    assert "explained" in status_err
    assert set(pd.read_csv(tmp_path / "out.csv")["feature"]) == {"bp", "age", "ward"}


def test_as_a_subprocess_too(tmp_path):
    data, model = write_files(tmp_path)
    out = tmp_path / "out.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "cpdecomp", "explain", str(data), "--target",
                           "los", "--id-column", "patient_id", "--family", "absolute",
                           "--model-file", f"f={model}", "--out", str(out), "--verbose"],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["meta"]["features"] == ["bp", "age", "ward"]
    assert "gbm" not in done.stderr and "your scikit-learn Pipeline" in done.stderr

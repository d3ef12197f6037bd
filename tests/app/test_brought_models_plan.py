"""Setup and Data with the user's own model files (issue 35 items 3 and 4), without a browser.

* Setup plans from the brought model's real masking path, not from a small built-in fit: a
  Pipeline core cannot read as trees gets the small background and a warning with the expected
  time before Run; a Pipeline one-hot encoding integer codes is planned on the tree tables.
* The target is guessed once, the same way for every upload (`los` is a length of stay), and
  a model file without column names, matched to the table by position, is warned about.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dashboard_helpers import csv_bytes, errors, new_app, shown
from sklearn.compose import make_column_transformer
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, PolynomialFeatures

from cpdecomp import StudyOptions
from cpdecomp.app import planning, sources, targets

skops_io = pytest.importorskip("skops.io")

FEATURES = ["age", "ward", "bp"]


def cohort(n: int = 240) -> pd.DataFrame:
    """Length of stay (`los`, not the last column) with integer ward codes."""
    rng = np.random.default_rng(35)
    ward = rng.integers(1, 4, n)
    age = rng.uniform(20, 90, n)
    los = 0.05 * age + 1.5 * (ward == 2) + rng.gamma(2.0, 1.0, n)
    return pd.DataFrame({"mrn": [f"M{i:03d}" for i in range(n)], "los": los, "age": age,
                         "ward": ward, "bp": rng.normal(120, 15, n)})


def skops_bytes(model) -> bytes:
    return skops_io.dumps(model)


def integer_code_pipeline(table: pd.DataFrame):
    return make_pipeline(
        make_column_transformer((OneHotEncoder(handle_unknown="ignore"), ["ward"]),
                                remainder="passthrough"),
        HistGradientBoostingRegressor(max_iter=20, random_state=0),
    ).fit(table[FEATURES], table.los)


def slow_pipeline(table: pd.DataFrame):
    """Products of columns: no output column is a function of one raw column, so no tables."""
    return make_pipeline(PolynomialFeatures(degree=2),
                         HistGradientBoostingRegressor(max_iter=20, random_state=0)
                         ).fit(table[FEATURES], table.los)


def upload_model(at, table: pd.DataFrame, model) -> None:
    at.switch_page("views/data.py").run()
    at.radio(key="data_source").set_value("model").run()
    at.file_uploader(key="model_table").set_value(("ward.csv", csv_bytes(table), "text/csv"))
    at.file_uploader(key="model_f").set_value(("point.skops", skops_bytes(model),
                                               "application/octet-stream"))
    at.run()


def slow_warnings(at) -> list[str]:
    return [shown(w.value) for w in at.warning if "brute force" in w.value]


def test_setup_plans_a_slow_brought_model_as_slow_and_says_how_long() -> None:
    table = cohort()
    at = new_app()
    upload_model(at, table, slow_pipeline(table))
    assert errors(at) == []
    at.switch_page("views/setup.py").run()
    assert errors(at) == []
    # core will use the slow path's background: Setup says the same (main said all rows)
    assert at.number_input(key="background_used").value == 64
    said = slow_warnings(at)
    assert len(said) == 1, said
    assert "Your model for the prediction (scikit-learn Pipeline)" in said[0]
    assert "Expected time on this machine: about" in said[0]


def test_setup_plans_integer_codes_on_the_tree_tables() -> None:
    table = cohort()
    at = new_app()
    upload_model(at, table, integer_code_pipeline(table))
    at.switch_page("views/setup.py").run()
    assert errors(at) == []
    assert slow_warnings(at) == []
    n_train = at.number_input(key="background_used").value
    assert n_train > 64  # the fast path's background: every training row here


def test_the_plan_is_the_models_own() -> None:
    table = cohort()
    options = StudyOptions(target="los", id_column="mrn", family="absolute")
    for model, fast in ((integer_code_pipeline(table), True), (slow_pipeline(table), False)):
        dataset = sources.model_upload(("ward.csv", csv_bytes(table)),
                                       {"f": ("f.skops", skops_bytes(model))})
        plan = planning.run_plan(dataset, options)
        assert plan.fast is fast
        assert plan.slow_names == (() if fast else ("f",))
        if not fast:
            assert 0 < plan.rows_per_second < float("inf")


# --- one target guesser -------------------------------------------------------------------


def test_los_is_the_outcome_whatever_its_place_and_every_upload_guesses_alike() -> None:
    table = cohort()
    assert targets.choose_target(table) == "los"  # bp has as many distinct values, and is last
    for name in ("LOS", "los_days", "hospital_los", "LOS (d)"):
        assert targets.choose_target(table.rename(columns={"los": name})) == name
    assert targets.choose_target(table.rename(columns={"los": "close"})) == "bp"
    single = sources.single_upload("ward.csv", csv_bytes(table))
    unnamed = make_pipeline(HistGradientBoostingRegressor(max_iter=10)).fit(
        table[FEATURES].to_numpy(), table.los)  # fitted on an array: no column names
    brought = sources.model_upload(("ward.csv", csv_bytes(table)),
                                   {"f": ("f.skops", skops_bytes(unnamed))})
    assert single.default_target == brought.default_target == "los"  # main: 'bp' for the model


def test_a_model_without_column_names_is_matched_by_position_with_a_warning(tmp_path: Path
                                                                            ) -> None:
    table = cohort()
    unnamed = make_pipeline(HistGradientBoostingRegressor(max_iter=10)).fit(
        table[FEATURES].to_numpy(), table.los)
    at = new_app()
    upload_model(at, table, unnamed)
    assert errors(at) == []
    assert at.session_state["target_column"] == "los"  # main: 'bp', the last numeric column
    said = [shown(w.value) for w in at.warning if "position" in w.value]
    assert len(said) == 1, [w.value for w in at.warning]
    assert "'age', 'ward', 'bp'" in said[0] and "point model file" in said[0]
    # a model that names its columns is matched by name: no such warning
    at = new_app()
    upload_model(at, table, integer_code_pipeline(table))
    assert not [w for w in at.warning if "position" in w.value]


def test_a_censored_survival_time_as_the_target_is_warned_about() -> None:
    rng = np.random.default_rng(0)
    n = 80
    table = pd.DataFrame({"age": rng.uniform(20, 80, n), "days": rng.exponential(300, n),
                          "cens": rng.integers(0, 2, n)})
    note = targets.censored_time_note(table, "days")
    assert note is not None and "'cens'" in note and "too short" in note
    assert targets.censored_time_note(table.assign(cens=1), "days") is None  # every event seen
    assert targets.censored_time_note(table, "age") is None
    assert targets.censored_time_note(cohort().assign(died=1 - (cohort().ward == 1)),
                                      "los") is None  # a stay is no time to an event
    at = new_app()
    at.switch_page("views/data.py").run()
    at.radio(key="data_source").set_value("upload").run()
    at.file_uploader(key="upload").set_value(("surv.csv", csv_bytes(table), "text/csv"))
    at.run()
    at.selectbox(key="target_column").set_value("days").run()
    assert any("survival time" in w.value for w in at.warning)

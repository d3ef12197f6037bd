"""A user's fitted models in (system_from_models): raw columns are the players, column names
are checked against the table, sigma is fitted (and said so) when the normalized family gets
none, and every kind of model gives its own predictions through the system."""

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import make_column_transformer
from sklearn.ensemble import RandomForestRegressor
from sklearn.impute import SimpleImputer
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.explainer import Explainer
from cpdecomp.core.models import MODEL_KINDS, model_kind
from cpdecomp.core.system import system_from_models

FEATURES = ["age", "ward", "dose"]


def clinic(seed=0, n=360):
    rng = np.random.default_rng(seed)
    table = pd.DataFrame({"age": rng.uniform(20, 80, n), "ward": rng.choice(["a", "b", "c"], n),
                          "dose": rng.normal(size=n)})
    table.loc[rng.random(n) < 0.1, "dose"] = np.nan
    table["y"] = (0.05 * table.age + 2.0 * (table.ward == "a") + np.nan_to_num(table.dose)
                  + rng.normal(scale=0.5 + (table.ward == "c"), size=n))
    return table


def pipeline(regressor):
    columns = make_column_transformer(
        (OneHotEncoder(handle_unknown="ignore"), ["ward"]),
        (make_pipeline(SimpleImputer(), StandardScaler()), ["age", "dose"]),
    )
    return make_pipeline(columns, regressor)


@pytest.fixture(scope="module")
def table():
    return clinic()


@pytest.fixture(scope="module")
def fitted_pipeline(table):
    train = table.iloc[:120]
    return pipeline(RandomForestRegressor(n_estimators=10, max_depth=4, random_state=0)).fit(
        train[FEATURES], train["y"])


def test_components_give_the_models_own_predictions(table, fitted_pipeline):
    fitted = system_from_models("absolute", {"f": fitted_pipeline}, table.iloc[120:240],
                                target="y")
    rows = table.iloc[240:]
    np.testing.assert_allclose(fitted.point.predict(fitted.encode(rows)),
                               fitted_pipeline.predict(rows[FEATURES]), rtol=1e-12, atol=0)


def test_normalized_without_sigma_fits_one_and_says_so(table, fitted_pipeline):
    with pytest.warns(UserWarning, match="no sigma model was given"):
        fitted = system_from_models("normalized", {"f": fitted_pipeline}, table.iloc[120:240],
                                    target="y")
    assert any("no sigma model" in w for w in fitted.warnings)
    sigma = fitted.components["sigma"].predict(fitted.encode(table.iloc[240:]))
    assert (sigma > 0).all() and np.ptp(sigma) > 0


def test_normalized_without_sigma_or_target_is_refused(table, fitted_pipeline):
    with pytest.raises(CpdecompError, match="target"):
        system_from_models("normalized", {"f": fitted_pipeline}, table.iloc[120:240][FEATURES])


@pytest.mark.parametrize(("columns", "named"), [
    (["age", "ward"], "lacks 'dose'"),
    (["age", "ward", "dose", "extra"], "not fitted on 'extra'"),
    (["ward", "age", "dose"], "another order"),
])
def test_model_columns_must_be_the_tables(table, fitted_pipeline, columns, named):
    train = table.iloc[120:240].assign(extra=1.0)[[*columns, "y"]]
    with pytest.raises(CpdecompError, match=named):
        system_from_models("absolute", {"f": fitted_pipeline}, train, target="y")


def test_a_model_without_names_must_read_as_many_columns(table):
    numbers = table[["age", "dose"]].fillna(0.0)
    ridge = Ridge().fit(numbers.to_numpy()[:100], table["y"].to_numpy()[:100])
    with pytest.raises(CpdecompError, match="reads 2 columns"):
        system_from_models("absolute", {"f": ridge}, table.iloc[100:200], target="y")


def test_a_family_component_missing_or_unknown_is_refused(table, fitted_pipeline):
    with pytest.raises(CpdecompError, match="needs a model for lo, hi"):
        system_from_models("cqr", {"f": fitted_pipeline}, table, target="y")
    with pytest.raises(CpdecompError, match="no component 'mu'"):
        system_from_models("absolute", {"f": fitted_pipeline, "mu": fitted_pipeline}, table,
                           target="y")


def test_a_callable_over_the_raw_table_is_masked_by_brute_force(table):
    def f(frame):
        return 0.05 * frame["age"].to_numpy() + 2.0 * (frame["ward"] == "a").to_numpy()

    assert model_kind(f) is MODEL_KINDS["callable"]
    fitted = system_from_models("absolute", {"f": f}, table.iloc[:200], target="y")
    system = fitted.conformalize(table.iloc[200:300], table["y"].iloc[200:300])
    explainer = Explainer(system, background_size=20)
    result = explainer.explain(table.iloc[300:305])
    assert explainer.evaluator.path_of("f") == "brute"
    # dose is a null player of f: exactly zero in every game.
    np.testing.assert_array_equal(result.decomposition.total[:, 2], 0.0)
    d = result.decomposition
    np.testing.assert_allclose(d.total, d.calibration + d.instance, rtol=0, atol=1e-10)


def test_a_failing_model_is_refused_without_its_message(table):
    def broken(frame):
        raise ValueError("patient value 42.17 is odd")

    with pytest.raises(CpdecompError, match=r"failed on the training rows \(ValueError\)") as info:
        system_from_models("absolute", {"f": broken}, table, target="y")
    assert "42.17" not in str(info.value)


def test_cqr_without_a_point_model_shows_the_midpoint(table):
    lo = lambda frame: frame["age"].to_numpy() * 0.04  # noqa: E731
    hi = lambda frame: frame["age"].to_numpy() * 0.06 + 1  # noqa: E731
    fitted = system_from_models("cqr", {"f_lo": lo, "f_hi": hi}, table, target="y")
    rows = fitted.encode(table.iloc[:5])
    np.testing.assert_allclose(fitted.point.predict(rows),
                               table["age"].to_numpy()[:5] * 0.05 + 0.5, rtol=1e-14)


def test_a_study_takes_fitted_models_and_reports_them(table, fitted_pipeline):
    from cpdecomp.core.workflow import StudyOptions, prepare_study

    data = table.iloc[120:]
    study = prepare_study(data, StudyOptions(target="y", family="normalized", background=30),
                          models={"f": fitted_pipeline})
    report = study.explain(rows=range(4))
    assert report.meta["model"] == "sklearn-pipeline"
    assert any("no sigma model" in w for w in report.meta["warnings"])
    assert study.explainer.evaluator.path_of("f") == "tables"
    d = report.explanation.decomposition
    np.testing.assert_allclose(d.total, d.calibration + d.instance, rtol=0, atol=1e-10)
    np.testing.assert_allclose(report.explanation.prediction,
                               fitted_pipeline.predict(study.patients.iloc[:4][FEATURES]),
                               rtol=1e-12)

"""A conformalized MAPIE 1.6 regressor taken in (core.mapie): widths equal MAPIE's own
`predict_interval` where the rank rules agree, and differ exactly where the method page says.

MAPIE computes its intervals itself here (its estimators, its scores, its quantile); cpdecomp
recomputes them from the estimators and calibration rows it took in.
"""

import functools
import warnings
from pathlib import Path

import numpy as np
import pytest
from mapie.conformity_scores import GammaConformityScore, ResidualNormalisedScore
from mapie.regression import ConformalizedQuantileRegressor, SplitConformalRegressor
from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from cpdecomp import CpdecompError, Explainer, system_from_mapie
from cpdecomp.core.data import split_rows
from cpdecomp.core.mapie import mapie_rank
from cpdecomp.core.tables import load_table

DATA = Path(__file__).resolve().parents[1] / "sample_data" / "diabetes.csv"
TARGET = "progression"
RTOL = 1e-12


@pytest.fixture(autouse=True)
def one_thread():
    with threadpool_limits(limits=1):
        yield


@functools.cache
def splits():
    table = load_table(DATA)
    features = [c for c in table.columns if c not in ("patient_id", TARGET)]
    train, calibration, test = split_rows(len(table), (0.5, 0.25, 0.25), seed=0)
    return table[features], table[TARGET].to_numpy(float), train, calibration, test


def assert_same_interval(ours, theirs):
    lower, upper = ours
    scale = RTOL * float(np.max(np.abs(theirs)))
    np.testing.assert_allclose(lower, theirs[:, 0, 0], rtol=RTOL, atol=scale)
    np.testing.assert_allclose(upper, theirs[:, 1, 0], rtol=RTOL, atol=scale)
    np.testing.assert_allclose(upper - lower, theirs[:, 1, 0] - theirs[:, 0, 0], rtol=RTOL,
                               atol=scale)


def conformalized(kind, alpha=0.1):
    x, y, train, calibration, _ = splits()
    confidence = 1 - alpha
    if kind == "absolute":  # prefit, a Pipeline
        model = make_pipeline(StandardScaler(), LinearRegression()).fit(x.iloc[train], y[train])
        regressor = SplitConformalRegressor(model, confidence_level=confidence, prefit=True)
    elif kind == "absolute-fit":  # MAPIE fits a clone itself
        regressor = SplitConformalRegressor(
            GradientBoostingRegressor(n_estimators=40, max_depth=3, random_state=0),
            confidence_level=confidence, prefit=False).fit(x.iloc[train], y[train])
    elif kind == "gamma":  # a forest of positive targets predicts positive values
        model = RandomForestRegressor(n_estimators=20, max_depth=5, random_state=0)
        model.fit(x.iloc[train], y[train])
        regressor = SplitConformalRegressor(model, confidence_level=confidence, prefit=True,
                                            conformity_score=GammaConformityScore(sym=True))
    else:  # cqr: MAPIE fits the three quantile models
        regressor = ConformalizedQuantileRegressor(
            GradientBoostingRegressor(loss="quantile", n_estimators=40, max_depth=3,
                                      random_state=0),
            confidence_level=confidence, prefit=False).fit(x.iloc[train], y[train])
    return regressor.conformalize(x.iloc[calibration], y[calibration])


def taken_in(regressor, calibration_rows=None):
    x, y, train, calibration, _ = splits()
    rows = calibration if calibration_rows is None else calibration_rows
    return system_from_mapie(regressor, x.iloc[rows], y[rows], training_table=x.iloc[train])


@pytest.mark.parametrize("kind", ["absolute", "absolute-fit", "gamma", "cqr"])
def test_widths_equal_mapie_where_the_rank_rules_agree(kind):
    x, _, _, calibration, test = splits()
    alpha = 0.1
    assert mapie_rank(len(calibration), alpha) is not None
    regressor = conformalized(kind, alpha)
    system = taken_in(regressor)
    assert system.family.name == ("absolute" if kind.startswith("absolute") else kind)
    assert system.fitted.warnings == ()
    options = {"symmetric_correction": True} if kind == "cqr" else {}
    _, theirs = regressor.predict_interval(x.iloc[test], **options)
    assert_same_interval(system.predict_interval(x.iloc[test], alpha), theirs)
    np.testing.assert_allclose(system.predict(x.iloc[test]), regressor.predict(x.iloc[test]),
                               rtol=RTOL)


def test_boosters_inside_mapie():
    """LightGBM quantile models given to a prefit CQR agree to 1e-12 (cpdecomp calls their own
    predict); XGBoost to float32 rounding, since cpdecomp adds its leaves in float64
    (docs/analyst/own-model.md)."""
    import lightgbm
    import xgboost

    x, y, train, calibration, test = splits()
    # LightGBM writes "s1 tc" as "s1_tc" in its model (core then refuses the names as a
    # mismatch), so the columns are named without spaces here
    x = x.rename(columns=lambda name: name.replace(" ", "_"))

    def taken_in(regressor):
        return system_from_mapie(regressor, x.iloc[calibration], y[calibration],
                                 training_table=x.iloc[train])

    quantiles = [lightgbm.LGBMRegressor(objective="quantile", alpha=level, n_estimators=30,
                                        n_jobs=1, verbose=-1).fit(x.iloc[train], y[train])
                 for level in (0.05, 0.95, 0.5)]
    cqr = ConformalizedQuantileRegressor(quantiles, confidence_level=0.9, prefit=True)
    cqr.conformalize(x.iloc[calibration], y[calibration])
    _, theirs = cqr.predict_interval(x.iloc[test], symmetric_correction=True)
    assert_same_interval(taken_in(cqr).predict_interval(x.iloc[test], 0.1), theirs)

    point = xgboost.XGBRegressor(n_estimators=30, n_jobs=1).fit(x.iloc[train], y[train])
    absolute = SplitConformalRegressor(point, confidence_level=0.9, prefit=True)
    absolute.conformalize(x.iloc[calibration], y[calibration])
    _, theirs = absolute.predict_interval(x.iloc[test])
    lower, upper = taken_in(absolute).predict_interval(x.iloc[test], 0.1)
    np.testing.assert_allclose(upper - lower, theirs[:, 1, 0] - theirs[:, 0, 0], rtol=1e-6)
    np.testing.assert_allclose(upper, theirs[:, 1, 0], rtol=1e-6)


def test_calibration_rows_in_another_order_are_the_same_set():
    x, _, _, calibration, test = splits()
    regressor = conformalized("absolute")
    system = taken_in(regressor, calibration_rows=calibration[::-1])
    _, theirs = regressor.predict_interval(x.iloc[test])
    assert_same_interval(system.predict_interval(x.iloc[test], 0.1), theirs)


def test_explaining_a_mapie_system_keeps_the_identity():
    x, _, _, _, test = splits()
    system = taken_in(conformalized("cqr"))
    result = Explainer(system, background_size=16).explain(x.iloc[test[:3]], alpha=0.1)
    decomposition = result.decomposition
    np.testing.assert_allclose(decomposition.total,
                               decomposition.calibration + decomposition.instance,
                               rtol=0, atol=1e-10)
    # the explained width is MAPIE's width
    width = decomposition.full_value
    _, theirs = conformalized("cqr").predict_interval(x.iloc[test[:3]],
                                                      symmetric_correction=True)
    np.testing.assert_allclose(width, theirs[:, 1, 0] - theirs[:, 0, 0], rtol=1e-12)


def rank_case(n, alpha):
    """MAPIE conformalized on the first n calibration rows at miscoverage alpha."""
    x, y, train, calibration, _ = splits()
    rows = calibration[:n]
    model = make_pipeline(StandardScaler(), LinearRegression()).fit(x.iloc[train], y[train])
    regressor = SplitConformalRegressor(model, confidence_level=1 - alpha, prefit=True)
    regressor.conformalize(x.iloc[rows], y[rows])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        system = system_from_mapie(regressor, x.iloc[rows], y[rows],
                                   training_table=x.iloc[train])
    return regressor, system, [str(w.message) for w in caught]


def test_where_floating_point_rounds_the_rank_up_mapie_is_one_order_statistic_higher():
    # (n + 1)(1 - alpha) = 100 * 0.55 is 55.000000000000007 in floating point: MAPIE's k is 56,
    # the exact rank 55 (method page §2).
    n, alpha = 99, 0.45
    x, _, _, _, test = splits()
    regressor, system, caught = rank_case(n, alpha)
    scores = np.sort(regressor.conformity_scores)
    _, theirs = regressor.predict_interval(x.iloc[test])
    f = regressor.predict(x.iloc[test])
    np.testing.assert_allclose(theirs[:, 1, 0] - f, scores[55], rtol=1e-12)  # 56th smallest
    lower, upper = system.predict_interval(x.iloc[test], alpha)
    np.testing.assert_allclose(upper - f, scores[54], rtol=1e-12)             # 55th smallest
    assert scores[55] > scores[54]
    assert np.all(upper - lower < theirs[:, 1, 0] - theirs[:, 0, 0])
    assert any("56-th" in message and "55-th" in message for message in caught)
    assert any("56-th" in note for note in system.fitted.warnings)


def test_where_mapie_refuses_a_small_calibration_set_the_exact_rank_is_used():
    # n = 9 at alpha = 0.1: k = ceil(10 * 0.9) = 9 <= n is valid; MAPIE asks for n >= 10.
    n, alpha = 9, 0.1
    x, _, _, _, test = splits()
    regressor, system, caught = rank_case(n, alpha)
    with pytest.raises(ValueError, match="too low"):
        regressor.predict_interval(x.iloc[test])
    _, upper = system.predict_interval(x.iloc[test], alpha)
    f = regressor.predict(x.iloc[test])
    np.testing.assert_allclose(upper - f, np.max(regressor.conformity_scores), rtol=1e-12)
    assert any("MAPIE refuses 9 calibration rows" in message for message in caught)


def test_mapie_rank_is_mapies_own_rule():
    # mapie_rank only words the warnings; it must be MAPIE's rule (scores 1..n give q-hat = k).
    for n, alpha in [(99, 0.45), (99, 0.1), (19, 0.05), (9, 0.1), (10, 0.1), (200, 0.3)]:
        regressor = SplitConformalRegressor(LinearRegression().fit([[0.0], [1.0]], [0.0, 0.0]),
                                            confidence_level=1 - alpha, prefit=True)
        regressor.conformalize(np.zeros((n, 1)), np.arange(1.0, n + 1))
        try:
            _, bounds = regressor.predict_interval(np.zeros((1, 1)))
            theirs = round(float(bounds[0, 1, 0]))
        except ValueError:
            theirs = None
        assert mapie_rank(n, alpha) == theirs, (n, alpha)


def test_refusals_name_what_to_do():
    x, y, train, calibration, _ = splits()
    model = RandomForestRegressor(n_estimators=5, random_state=0).fit(x.iloc[train], y[train])
    asymmetric = SplitConformalRegressor(model, prefit=True, conformity_score="gamma")
    asymmetric.conformalize(x.iloc[calibration], y[calibration])
    with pytest.raises(CpdecompError, match=r"GammaConformityScore\(sym=True\)"):
        taken_in(asymmetric)
    normalised = SplitConformalRegressor(
        model, prefit=True,
        conformity_score=ResidualNormalisedScore(residual_estimator=model, prefit=True))
    normalised.conformalize(x.iloc[calibration], y[calibration])
    with pytest.raises(CpdecompError, match="ResidualNormalisedScore is not taken in"):
        taken_in(normalised)
    with pytest.raises(CpdecompError, match="not conformalized yet"):
        taken_in(SplitConformalRegressor(model, prefit=True))
    with pytest.raises(CpdecompError, match="is not taken in"):
        taken_in(model)
    regressor = conformalized("absolute")
    other_rows = train[: len(calibration)]
    with pytest.raises(CpdecompError, match="do not give MAPIE's conformity scores"):
        taken_in(regressor, calibration_rows=other_rows)
    with pytest.raises(CpdecompError, match="conformalized on"):
        taken_in(regressor, calibration_rows=calibration[:-1])
    with pytest.raises(CpdecompError, match="training_table"):
        system_from_mapie(regressor, x.iloc[calibration], y[calibration], training_table=None)
    with pytest.raises(CpdecompError, match="'bmi'"):
        system_from_mapie(regressor, x.iloc[calibration], y[calibration],
                          training_table=x.iloc[train].drop(columns="bmi"))

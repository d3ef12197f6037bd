"""Our intervals equal MAPIE 1.6's, for the plain and for the masked pipeline (method page §2-§4).

MAPIE's split-conformal quantile is the k-th smallest score with k = ceil((n + 1)(1 - alpha))
computed in floating point; at the levels used here (alpha = 0.05, 0.1, 0.2) it agrees with our
exact integer rank for every n, so the intervals must agree to rounding. MAPIE is given our own
fitted (or masked) component functions as prefit estimators; it recomputes the scores, the
quantile and the interval independently.

Family correspondences (prefit=True everywhere):
  absolute    SplitConformalRegressor, AbsoluteConformityScore (default):   f ± q
  normalized  ResidualNormalisedScore(residual_estimator=sigma, prefit=True): f ± q sigma
              (MAPIE floors sigma at 1e-8; ours is floored far above that, inside the component)
  gamma       GammaConformityScore(sym=True):                                 f (1 ± q)
  cqr         ConformalizedQuantileRegressor([lo, hi, median]),
              predict_interval(symmetric_correction=True):                    [lo - q, hi + q]
"""

import functools
from pathlib import Path

import numpy as np
import pytest
from mapie.conformity_scores import GammaConformityScore, ResidualNormalisedScore
from mapie.regression import ConformalizedQuantileRegressor, SplitConformalRegressor
from sklearn.base import BaseEstimator, RegressorMixin
from threadpoolctl import threadpool_limits

from cpdecomp.core.conformal import conformal_rank, to_width_scale
from cpdecomp.core.data import split_rows, target_values
from cpdecomp.core.games import CalibrationGame, MaskedEvaluator, instance_values
from cpdecomp.core.system import fit_system
from cpdecomp.core.tables import load_table

DATA = Path(__file__).resolve().parents[1] / "sample_data" / "diabetes.csv"
TARGET = "progression"
ID_COLUMN = "patient_id"
SPLIT = (0.5, 0.25, 0.25)
SEED = 0
ALPHAS = [0.1, 0.2, 0.05]
MODELS = ["linear", "gbm"]
FAMILIES = ["absolute", "normalized", "gamma", "cqr"]
BACKGROUND_SIZE = 24
RTOL = 1e-12

# Coalitions over the ten diabetes features, by name (True = keeps the patient's value).
COALITIONS = [
    (),
    ("bmi",),
    ("bmi", "s5 ltg"),
    ("age", "sex", "bp"),
    ("s1 tc", "s2 ldl", "s3 hdl", "s4 tch", "s6 glu"),
    "all but bmi",
    "all",
]


@pytest.fixture(autouse=True)
def one_thread():
    # One thread: OpenMP boosting oversubscribes badly (seconds per predict call) when other
    # test processes share the CPUs.
    with threadpool_limits(limits=1):
        yield


class FixedFn(RegressorMixin, BaseEstimator):
    """A prefit regressor that is just a function of X (MAPIE checks `fitted_`)."""

    def __init__(self, fn=None):
        self.fn = fn
        self.fitted_ = True

    def fit(self, X, y=None):
        return self

    def predict(self, X):
        return np.asarray(self.fn(np.asarray(X)), float).ravel()


# --- shared fixtures: one diabetes split, one fitted system per (model, family) --------------


@functools.cache
def diabetes():
    table = load_table(DATA)
    targets = target_values(table, TARGET)
    features = tuple(c for c in table.columns if c not in {ID_COLUMN, TARGET})
    train, calibration, test = split_rows(len(table), SPLIT, SEED)
    return table, targets, features, train, calibration, test


@functools.cache
def conformal_system(model, family):
    table, targets, features, train, calibration, _ = diabetes()
    fitted = fit_system(table.iloc[train], targets[train], list(features), family=family,
                        model=model, seed=SEED)
    return fitted.conformalize(table.iloc[calibration], targets[calibration])


def encoded_splits(system):
    table, targets, _, _, calibration, test = diabetes()
    return (system.fitted.encode(table.iloc[calibration]), targets[calibration],
            system.fitted.encode(table.iloc[test]), targets[test])


def mapie_interval(family, functions, x_calibration, y_calibration, x_test, alpha):
    """MAPIE's (lower, upper) for prefit component functions {name: function of X}."""
    confidence = 1 - alpha
    if family == "cqr":
        lo, hi = FixedFn(functions["lo"]), FixedFn(functions["hi"])
        # The third (median) model only gives MAPIE's point prediction; it does not enter q.
        regressor = ConformalizedQuantileRegressor(
            estimator=[lo, hi, FixedFn(functions["lo"])], confidence_level=confidence, prefit=True
        )
        regressor.conformalize(x_calibration, y_calibration)
        _, bounds = regressor.predict_interval(x_test, symmetric_correction=True)
    else:
        score = {
            "absolute": None,
            "normalized": lambda: ResidualNormalisedScore(
                residual_estimator=FixedFn(functions["sigma"]), prefit=True
            ),
            "gamma": lambda: GammaConformityScore(sym=True),
        }[family]
        options = {} if score is None else {"conformity_score": score()}
        regressor = SplitConformalRegressor(
            estimator=FixedFn(functions["f"]), confidence_level=confidence, prefit=True, **options
        )
        regressor.conformalize(x_calibration, y_calibration)
        _, bounds = regressor.predict_interval(x_test)
    assert bounds.shape == (len(x_test), 2, 1)
    return bounds[:, 0, 0], bounds[:, 1, 0]


def slack_of(*arrays):
    """Absolute slack for sums and differences of these arrays (bounds f - q sigma, widths,
    implied q): rounding there is relative to the terms, not to a result that cancels them."""
    return RTOL * max(float(np.max(np.abs(a))) for a in arrays)


def assert_same_bounds(actual, expected, what):
    """Bounds agree to rtol 1e-12 (plus the slack above, for bounds that cross zero)."""
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=slack_of(actual, expected),
                               err_msg=what)


# --- (a) the plain pipeline: our ConformalSystem against MAPIE ------------------------------


def test_mapie_rank_rule_agrees_with_ours_at_the_levels_used():
    # Precondition of the whole file: on scores 1..n, MAPIE's q-hat is our rank k.
    for alpha in ALPHAS:
        for n in [20, 39, 99, 110, 111, 199, 299, 1000]:
            scores = np.arange(1.0, n + 1)
            regressor = SplitConformalRegressor(
                estimator=FixedFn(lambda x: np.zeros(len(x))), confidence_level=1 - alpha,
                prefit=True,
            )
            regressor.conformalize(np.zeros((n, 1)), scores)
            _, bounds = regressor.predict_interval(np.zeros((1, 1)))
            assert bounds[0, 1, 0] == conformal_rank(n, alpha), (n, alpha)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("model", MODELS)
def test_intervals_equal_mapie_on_diabetes(model, family, alpha):
    """ConformalSystem.predict_interval is MAPIE's interval for the same fitted components."""
    system = conformal_system(model, family)
    x_calibration, y_calibration, x_test, _ = encoded_splits(system)
    functions = {name: c.predict for name, c in system.fitted.components.items()}
    theirs = mapie_interval(family, functions, x_calibration, y_calibration, x_test, alpha)
    ours = system.interval_at_rows(x_test, alpha)
    assert_same_bounds(ours[0], theirs[0], "lower bound")
    assert_same_bounds(ours[1], theirs[1], "upper bound")


# --- (b) the masked pipeline: our games against MAPIE on masked components ------------------


def coalition_masks(features):
    masks = []
    for spec in COALITIONS:
        if spec == "all":
            keep = set(features)
        elif spec == "all but bmi":
            keep = set(features) - {"bmi"}
        else:
            keep = set(spec)
        assert keep <= set(features)
        masks.append([f in keep for f in features])
    return np.array(masks, dtype=bool)


def masked_by_definition(component, coalition, rows, background):
    """§3 written out: g_S(x) = mean_b g(x_S, b_rest), g_full = g, floor applied after the mean."""
    if coalition.all():
        return component.predict(rows)
    hybrids = np.where(coalition[None, None, :], rows[:, None, :], background[None, :, :])
    raw = component.predictor.predict(hybrids.reshape(-1, rows.shape[1]))
    return component.finish(np.asarray(raw, float).reshape(len(rows), len(background)).mean(1))


@functools.cache
def masked_setup(model, family):
    system = conformal_system(model, family)
    x_calibration, y_calibration, x_test, _ = encoded_splits(system)
    rng = np.random.default_rng(SEED)
    training = system.fitted.training_rows
    background = training[np.sort(rng.choice(len(training), BACKGROUND_SIZE, replace=False))]
    coalitions = coalition_masks(system.feature_names)
    names = system.family.components
    rows = np.vstack([x_calibration, x_test])
    tables = {
        name: np.array([
            masked_by_definition(system.fitted.components[name], s, rows, background)
            for s in coalitions
        ])
        for name in names
    }
    evaluator = MaskedEvaluator(system.fitted.components, background)
    game = CalibrationGame.compute(system.family, evaluator, x_calibration, y_calibration,
                                   coalitions)
    instance = instance_values(system.family, evaluator, x_test, coalitions)
    evaluated = evaluator.evaluate(coalitions, rows, names)
    return system, coalitions, tables, evaluated, game, instance


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("model", MODELS)
def test_masked_components_are_means_over_the_background(model, family):
    """MaskedEvaluator (closed form for linear, batched for trees) is §3's definition."""
    _, _, tables, evaluated, _, _ = masked_setup(model, family)
    for name, table in tables.items():
        np.testing.assert_allclose(evaluated[name], table, rtol=RTOL, atol=slack_of(table),
                                   err_msg=name)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("model", MODELS)
def test_masked_calibration_quantile_and_width_equal_mapie(model, family, alpha):
    """For each coalition S, MAPIE run on the masked components g_S gives q_S of the
    calibration game, the masked family's interval, and the width T^-1(v_C(S) + v_I(S; x))."""
    system, coalitions, tables, _, game, instance = masked_setup(model, family)
    x_calibration, y_calibration, x_test, _ = encoded_splits(system)
    n_calibration, n_test = len(x_calibration), len(x_test)
    # MAPIE sees the masked pipeline as functions of a row index: column 0 of X is the row.
    index_calibration = np.arange(n_calibration, dtype=float)[:, None]
    index_test = np.arange(n_calibration, n_calibration + n_test, dtype=float)[:, None]
    q_ours = game.quantiles(alpha)
    v_calibration = game.values(alpha)
    fam = system.family

    for s in range(len(coalitions)):
        functions = {
            name: functools.partial(lambda x, t: t[x[:, 0].astype(int)], t=table[s])
            for name, table in tables.items()
        }
        lower, upper = mapie_interval(fam.name, functions, index_calibration,
                                      y_calibration, index_test, alpha)
        comps = {name: table[s, n_calibration:] for name, table in tables.items()}
        label = f"coalition {coalitions[s].astype(int)}"
        slack = slack_of(lower, upper)

        # q_S: the k-th smallest masked calibration score, read back from MAPIE's interval
        # (a difference of bounds, divided by the masked scale where the family has one).
        if family == "absolute":
            q_mapie, divisor = upper - comps["f"], 1.0
        elif family == "normalized":
            q_mapie, divisor = (upper - lower) / (2 * comps["sigma"]), 2 * comps["sigma"].min()
        elif family == "gamma":
            q_mapie, divisor = (upper - lower) / (2 * comps["f"]), 2 * comps["f"].min()
        else:
            q_mapie, divisor = comps["lo"] - lower, 1.0
        np.testing.assert_allclose(q_mapie, np.full(n_test, q_ours[s]), rtol=RTOL,
                                   atol=slack / divisor, err_msg=f"q_S, {label}")

        # The masked family's interval with our q_S is MAPIE's interval.
        ours_lower, ours_upper = fam.interval(q_ours[s], comps)
        assert_same_bounds(ours_lower, lower, f"lower bound, {label}")
        assert_same_bounds(ours_upper, upper, f"upper bound, {label}")

        # The total game is the sum of the two games: T(U_S(x)) = v_C(S) + v_I(S; x).
        width = to_width_scale(fam.scale, v_calibration[s] + instance[:, s])
        np.testing.assert_allclose(width, upper - lower, rtol=RTOL, atol=slack,
                                   err_msg=f"width, {label}")

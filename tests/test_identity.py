"""The decomposition identity φ_T = φ_C + φ_I and efficiency, for every family and method."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cpdecomp import FAMILIES, Explainer, fit_system, load_table, split_rows, target_values
from cpdecomp.core.attribution import METHOD_BUDGETS, METHODS

FEATURES = ["age", "bmi", "bp", "s1 tc", "s5 ltg", "s6 glu", "constant"]


@pytest.fixture(scope="module")
def diabetes():
    table = load_table("sample_data/diabetes.csv")
    table["constant"] = 1.0
    y = target_values(table, "progression")
    return table, y, split_rows(len(table), (0.5, 0.25, 0.25), seed=0)


def explain(diabetes, family, method, model="gbm", units="width", alpha=0.1):
    table, y, (train, cal, test) = diabetes
    system = fit_system(table.iloc[train], y[train], FEATURES, family=family, model=model, seed=0)
    system = system.conformalize(table.iloc[cal], y[cal])
    explainer = Explainer(system, background_size=12, seed=0)
    spec = METHOD_BUDGETS[method]
    budget = None if spec is None else max(10, 2 * spec.minimum(len(FEATURES)))
    result = explainer.explain(table.iloc[test[:25]], method=method, alpha=alpha, units=units,
                               budget=budget)
    return explainer, result


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_total_is_calibration_plus_instance_and_sums_to_width_gap(diabetes, family, method):
    """φ_T = φ_C + φ_I to 1e-10 and Σφ_T = U − U_∅ to 1e-9, relative to the width."""
    _, result = explain(diabetes, family, method)
    d = result.decomposition
    width = result.width[:, None]
    np.testing.assert_allclose(d.total - d.calibration - d.instance, 0.0, atol=1e-10 * width.max())
    assert d.additivity_error <= 1e-10 * result.width.max()
    if d.efficient:  # Banzhaf and leave-one-out are exact splits that need not sum to the gap
        np.testing.assert_allclose(d.total.sum(axis=1), result.width - result.base_width,
                                   rtol=0, atol=1e-9 * result.width.max())
        assert d.efficiency_error <= 1e-9 * result.width.max()


@pytest.mark.parametrize("family", [f for f in FAMILIES if FAMILIES[f].scale == "log"])
def test_log_units_sum_to_log_width_gap_and_calibration_row_is_shared(diabetes, family):
    """On the additive (log) scale φ_C is one vector for the whole cohort."""
    _, result = explain(diabetes, family, "exact", units="log")
    d = result.decomposition
    np.testing.assert_allclose(d.total.sum(axis=1),
                               np.log(result.width) - np.log(result.base_width), atol=1e-9)
    np.testing.assert_array_equal(d.calibration, np.tile(d.calibration[0], (len(d.total), 1)))


@pytest.mark.parametrize("family", [f for f in FAMILIES if FAMILIES[f].scale == "identity"])
def test_identity_families_share_the_calibration_row_in_width_units(diabetes, family):
    _, result = explain(diabetes, family, "exact")
    d = result.decomposition
    np.testing.assert_array_equal(d.calibration, np.tile(d.calibration[0], (len(d.total), 1)))


@pytest.mark.parametrize("model", ["gbm", "rf", "linear"])
@pytest.mark.parametrize("family", ["absolute", "normalized", "cqr"])
def test_constant_column_is_a_null_player_in_all_three_games(diabetes, family, model):
    _, result = explain(diabetes, family, "exact", model=model)
    d = result.decomposition
    j = FEATURES.index("constant")
    for part in (d.calibration, d.instance, d.total):
        np.testing.assert_array_equal(part[:, j], 0.0)


def test_alpha_change_re_ranks_without_model_calls(diabetes):
    """The calibration game keeps sorted masked scores: a new α is an index lookup."""
    explainer, first = explain(diabetes, "normalized", "exact")
    game = explainer.calibration_game("exact")
    before = explainer.evaluator.model_rows
    values_02 = game.values(0.2)
    assert explainer.evaluator.model_rows == before
    assert explainer.calibration_game("exact") is game
    assert np.all(values_02 <= game.values(0.1))  # a larger α never raises a quantile
    table, _, (_, _, test) = diabetes
    second = explainer.explain(table.iloc[test[:25]], method="exact", alpha=0.2)
    assert second.q_hat <= first.q_hat
    np.testing.assert_allclose(second.width, 2 * second.q_hat * np.exp(
        second.decomposition.full_value - np.log(2 * second.q_hat)), rtol=1e-12)


def test_patient_results_do_not_depend_on_the_batch(diabetes):
    """The calibration game is shared; a patient explained alone gets the same numbers."""
    table, _, (_, _, test) = diabetes
    explainer, together = explain(diabetes, "cqr", "exact")
    alone = explainer.explain(table.iloc[test[3:4]], method="exact", budget=10)
    np.testing.assert_allclose(alone.decomposition.total[0], together.decomposition.total[3],
                               rtol=1e-12, atol=1e-12)


def test_categorical_and_missing_columns_keep_the_identity():
    """String columns are one player each; missing values pass through the models."""
    rng = np.random.default_rng(0)
    n = 400
    table = pd.DataFrame({
        "dose.mg": rng.normal(size=n),
        "ward name": rng.choice(["north", "south", "east"], size=n),
        "âge": rng.normal(size=n),
    })
    table.loc[rng.random(n) < 0.1, "âge"] = np.nan
    table.loc[rng.random(n) < 0.1, "ward name"] = None
    y = table["dose.mg"] + (table["ward name"] == "north") * rng.normal(size=n) + rng.normal(size=n)
    y = y.to_numpy()
    train, cal, test = split_rows(n, (0.5, 0.25, 0.25), seed=1)
    for model in ("gbm", "rf", "linear"):
        system = fit_system(table.iloc[train], y[train], list(table.columns),
                            family="normalized", model=model).conformalize(table.iloc[cal], y[cal])
        result = Explainer(system, background_size=16).explain(table.iloc[test])
        d = result.decomposition
        assert d.total.shape == (len(test), 3)
        np.testing.assert_allclose(d.total, d.calibration + d.instance, atol=1e-10)
        np.testing.assert_allclose(d.total.sum(axis=1), result.width - result.base_width,
                                   atol=1e-9 * result.width.max())


@pytest.mark.parametrize("family", [f for f in FAMILIES if FAMILIES[f].scale == "log"])
def test_switching_units_needs_no_game_and_matches_a_fresh_explanation(diabetes, family):
    """in_units rescales by the logarithmic-mean factor; it equals explaining in those units."""
    from cpdecomp.core.decomposition import in_units

    explainer, in_width = explain(diabetes, family, "permutation")
    table, _, (_, _, test) = diabetes
    in_log = explainer.explain(table.iloc[test[:25]], method="permutation", units="log",
                               budget=in_width.budget)
    for converted, fresh in ((in_units(in_width.decomposition, "log"), in_log.decomposition),
                             (in_units(in_log.decomposition, "width"), in_width.decomposition)):
        for part in ("calibration", "instance", "total", "total_se"):
            np.testing.assert_allclose(getattr(converted, part), getattr(fresh, part),
                                       rtol=1e-12, atol=1e-14)
        assert converted.efficiency_error <= 1e-9 * in_width.width.max()

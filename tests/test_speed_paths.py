"""The fast paths give the same numbers as the plain ones: serial and parallel kernels, the tree
walk and the model's predict, one pass over the terms and two, chunked and whole calibration
games, merged leaf groups and separate ones. (How fast they are is the benchmark's business.)
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor

import cpdecomp.core.games.calibration as calibration_module
import cpdecomp.core.games.tree_tables as tree_tables
from cpdecomp import Explainer, fit_system
from cpdecomp.core.attribution import build_design
from cpdecomp.core.explainer import draw_background
from cpdecomp.core.games import CalibrationGame, MaskedEvaluator
from cpdecomp.core.games.cache import GameCache
from cpdecomp.core.games.tree_tables import TreeTables
from cpdecomp.core.games.trees import leaf_ensemble


def mixed_table(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Numeric columns with gaps, a text column with gaps, and an outcome using them."""
    rng = np.random.default_rng(seed)
    table = pd.DataFrame(rng.normal(size=(n, 4)), columns=[f"x{j}" for j in range(4)])
    table["ward"] = rng.choice(["north", "south", "east", "west"], size=n)
    table.loc[rng.random(n) < 0.1, "x0"] = np.nan
    table.loc[rng.random(n) < 0.1, "ward"] = None
    noise = rng.normal(size=n) * (1 + np.abs(table["x2"]))
    y = table["x1"] * 2 + table["ward"].isin(["north", "east"]) * 1.5 + noise
    return table, (y + np.nan_to_num(table["x0"])).to_numpy()


@pytest.fixture(scope="module", params=["gbm", "rf"])
def system(request):
    table, y = mixed_table(320, seed=0)
    fitted = fit_system(table.iloc[:200], y[:200], list(table.columns), family="normalized",
                        model=request.param, seed=0)
    return fitted.conformalize(table.iloc[200:], y[200:])


def tables_of(system, name: str, **kwargs) -> TreeTables:
    background = draw_background(system.fitted.training_rows, 30, seed=0)
    predictor = system.fitted.components[name].predictor
    return TreeTables(leaf_ensemble(predictor), background, len(system.feature_names), **kwargs)


def test_one_row_on_the_calling_thread_equals_its_row_in_a_batch(system):
    tables = tables_of(system, "sigma")
    rows = system.calibration_rows[:40]
    batch = tables.lattice(rows)
    assert len(rows) > tree_tables.SERIAL_ROWS
    for i in (0, 7, 39):
        np.testing.assert_array_equal(tables.lattice(rows[i:i + 1])[0], batch[i])
        np.testing.assert_array_equal(tables.predict(rows[i:i + 1]), tables.predict(rows)[i:i + 1])


def test_tree_walk_equals_the_models_predict(system):
    rows = np.vstack([system.calibration_rows, system.fitted.training_rows[:50]])
    for name, component in system.fitted.components.items():
        walked = tables_of(system, name).predict(rows)
        own = component.predictor.predict(rows)
        # sigma is a forest whatever the model, so which sum it is is the component's kind
        if isinstance(getattr(component.predictor, "estimator", None),
                      HistGradientBoostingRegressor):  # the same leaves, in the same order
            np.testing.assert_array_equal(walked, own)
        else:  # a forest's mean of trees vs our sum of leaf values / n_trees
            np.testing.assert_allclose(walked, own, rtol=1e-13, atol=0)


def test_merged_leaf_groups_equal_separate_groups(system, monkeypatch):
    rows = system.calibration_rows[:25]
    merged = tables_of(system, "f")
    monkeypatch.setattr(tree_tables, "HOST_EXTRA_PLAYERS", 0)
    separate = tables_of(system, "f")
    assert merged.groups[3].size < separate.groups[3].size
    expected = separate.lattice(rows)
    np.testing.assert_allclose(merged.lattice(rows), expected, rtol=0,
                               atol=1e-13 * np.abs(expected).max())


def test_one_pass_over_the_terms_equals_two_and_ignores_batching():
    rng = np.random.default_rng(3)
    for method, budget in (("exact", None), ("permutation", 64), ("banzhaf-sampled", 64),
                           ("kernel", 64)):
        design = build_design(method, 5, budget, seed=1)
        n = len(design.coalitions)
        offset = rng.normal(size=n)
        games = rng.normal(size=(21, n))
        games[:, design.coalitions[:, 2]] = games[:, ~design.coalitions[:, 2]]  # player 2: null
        offset[design.coalitions[:, 2]] = offset[~design.coalitions[:, 2]]
        plain, shifted = design.apply_offset(offset, games)
        np.testing.assert_array_equal(plain, design.apply(games))
        np.testing.assert_array_equal(shifted, design.apply(offset[None, :] + games))
        if method == "kernel":  # a dense least-squares map: neither exact zeros nor batch-blind
            continue
        assert not plain[:, 2].any() and not shifted[:, 2].any()
        for i in (0, 20):
            one_plain, one_shifted = design.apply_offset(offset, games[i:i + 1])
            np.testing.assert_array_equal(one_plain[0], plain[i])
            np.testing.assert_array_equal(one_shifted[0], shifted[i])


def test_calibration_game_in_row_chunks_equals_one_pass(system, monkeypatch):
    background = draw_background(system.fitted.training_rows, 30, seed=0)
    evaluator = MaskedEvaluator(system.fitted.components, background)
    coalitions = build_design("exact", len(system.feature_names)).coalitions

    def game() -> np.ndarray:
        return CalibrationGame.compute(system.family, evaluator, system.calibration_rows,
                                       system.calibration_targets, coalitions).sorted_scores

    whole = game()
    monkeypatch.setattr(calibration_module, "CELLS_PER_CHUNK", 7 * len(coalitions))
    np.testing.assert_array_equal(game(), whole)


def test_repeated_single_patient_calls_reuse_the_setup_and_agree(system):
    explainer = Explainer(system, background_size=30, cache=GameCache(None))
    rows = system.calibration_rows[:3]
    first = explainer.explain_rows(rows[:1], alpha=0.2)
    again = explainer.explain_rows(rows[:1], alpha=0.2)
    other = explainer.explain_rows(rows[:1], alpha=0.1)
    assert len(explainer._patient_games) == 2
    np.testing.assert_array_equal(first.decomposition.total, again.decomposition.total)
    assert other.q_hat != first.q_hat
    batch = explainer.explain_rows(rows, alpha=0.2)
    for part in ("calibration", "instance", "total"):
        np.testing.assert_array_equal(getattr(first.decomposition, part)[0],
                                      getattr(batch.decomposition, part)[0])
    np.testing.assert_array_equal(first.width, batch.width[:1])

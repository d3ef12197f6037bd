"""Masked predictions: tree tables and the additive closed form equal brute force exactly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cpdecomp import Explainer, fit_system
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.explainer import draw_background
from cpdecomp.core.games import MaskedEvaluator
from cpdecomp.core.games.tree_tables import MAX_LATTICE_PLAYERS, TreeTables
from cpdecomp.core.games.trees import leaf_ensemble


def mixed_table(n: int, n_numeric: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Numeric columns with gaps, a string column with gaps, and an outcome using all."""
    rng = np.random.default_rng(seed)
    table = pd.DataFrame(rng.normal(size=(n, n_numeric)),
                         columns=[f"x.{j} value" for j in range(n_numeric)])
    table["ward"] = rng.choice(["north", "south", "east", "west"], size=n)
    table.loc[rng.random(n) < 0.1, "x.0 value"] = np.nan
    table.loc[rng.random(n) < 0.1, "ward"] = None
    noise = rng.normal(size=n) * (1 + np.abs(table["x.2 value"]))
    y = (table["x.1 value"] * 2 + table["ward"].isin(["north", "east"]) * 1.5
         + np.nan_to_num(table["x.0 value"]) + noise)
    return table, y.to_numpy()


@pytest.mark.parametrize("model", ["gbm", "rf"])
@pytest.mark.parametrize("family", ["normalized", "cqr"])
def test_tree_tables_equal_brute_force_on_random_coalitions(model, family):
    table, y = mixed_table(300, 4, seed=0)
    system = fit_system(table, y, list(table.columns), family=family, model=model, seed=0)
    background = draw_background(system.training_rows, 24, seed=0)
    rows = system.training_rows[:40]
    rng = np.random.default_rng(1)
    coalitions = rng.random((30, rows.shape[1])) < 0.5
    coalitions[0], coalitions[1] = False, True
    tables = MaskedEvaluator(system.components, background, path="tables")
    brute = MaskedEvaluator(system.components, background, path="brute")
    names = list(system.components)
    assert all(tables.path_of(name) == "tables" for name in names)
    fast = tables.evaluate(coalitions, rows, names)
    slow = brute.evaluate(coalitions, rows, names)
    assert tables.model_rows == 0
    for name in names:
        scale = np.abs(slow[name]).max()
        np.testing.assert_allclose(fast[name], slow[name], rtol=0, atol=1e-12 * scale)


@pytest.mark.slow
def test_tree_tables_per_coalition_mode_beyond_the_lattice():
    """Above MAX_LATTICE_PLAYERS the buffers are read per coalition: same numbers."""
    table, y = mixed_table(400, MAX_LATTICE_PLAYERS + 2, seed=2)
    system = fit_system(table, y, list(table.columns), family="absolute", model="gbm")
    background = draw_background(system.training_rows, 16, seed=0)
    rows = system.training_rows[:5]
    coalitions = np.random.default_rng(3).random((12, rows.shape[1])) < 0.5
    component = system.components["f"]
    tables = TreeTables(leaf_ensemble(component.predictor), background, rows.shape[1])
    fast = tables.coalition_values(rows, coalitions)
    slow = MaskedEvaluator({"f": component}, background, path="brute").evaluate(
        coalitions, rows, ["f"])["f"]
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12 * np.abs(slow).max())


def test_additive_closed_form_equals_brute_force_for_linear_models():
    table, y = mixed_table(200, 3, seed=4)
    system = fit_system(table, y, list(table.columns), family="cqr", model="linear")
    background = draw_background(system.training_rows, 20, seed=0)
    rows = system.training_rows[:30]
    coalitions = np.random.default_rng(5).random((25, rows.shape[1])) < 0.5
    closed = MaskedEvaluator(system.components, background)
    assert {closed.path_of(name) for name in system.components} == {"additive"}
    brute = MaskedEvaluator(system.components, background, path="brute")
    for name in system.components:
        fast = closed.evaluate(coalitions, rows, [name])[name]
        slow = brute.evaluate(coalitions, rows, [name])[name]
        np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-11 * np.abs(slow).max())


def test_log_link_boosting_has_tables_on_its_link_scale_and_brute_force_on_the_response():
    """The gamma family's point model has a log link: its raw margin is a sum of leaves (tables),
    its response is not (brute force under --masking response); tests/test_link_models.py
    checks both against the library's own outputs."""
    table, y = mixed_table(200, 3, seed=6)
    system = fit_system(table, np.exp(y / 4), list(table.columns), family="gamma", model="gbm")
    assert MaskedEvaluator(system.components, system.training_rows[:8]).path_of("f") == "tables"
    assert MaskedEvaluator(system.components, system.training_rows[:8],
                           path="response").path_of("f") == "brute"


@pytest.mark.parametrize("model", ["gbm", "rf"])
def test_attributions_through_tables_equal_brute_force(model):
    """φ from the fast path equals φ from brute force to 1e-10 (same games, same design)."""
    table, y = mixed_table(240, 3, seed=7)
    half = len(table) // 2
    system = fit_system(table.iloc[:half], y[:half], list(table.columns), family="normalized",
                        model=model).conformalize(table.iloc[half:], y[half:])
    patients = table.iloc[half:half + 20]
    fast = Explainer(system, background_size=12).explain(patients)
    slow = Explainer(system, background_size=12, masking="brute").explain(patients)
    for part in ("calibration", "instance", "total"):
        np.testing.assert_allclose(getattr(fast.decomposition, part),
                                   getattr(slow.decomposition, part), rtol=0,
                                   atol=1e-10 * fast.width.max())


def wide_grouped_system(n_columns: int, family: str = "normalized"):
    """A gbm system on `n_columns` numeric columns, every column used by the trees."""
    rng = np.random.default_rng(7)
    table = pd.DataFrame(rng.normal(size=(260, n_columns)),
                         columns=[f"c{j}" for j in range(n_columns)])
    signal = table.to_numpy() @ rng.normal(size=n_columns)
    y = signal + rng.normal(size=len(table)) * (1 + np.abs(table["c3"].to_numpy()))
    system = fit_system(table.iloc[:200], y[:200], list(table.columns), family=family,
                        model="gbm", seed=0)
    return system.conformalize(table.iloc[200:], y[200:]), table.iloc[200:205]


@pytest.mark.parametrize("method", [pytest.param("exact", marks=pytest.mark.slow),
                                    "permutation"])
def test_seventy_columns_in_ten_groups_tables_equal_brute_force(method):
    """Bitmasks run over the groups, not the 70 columns: past 63 columns int64 masks over
    columns overflowed, and the tables silently gave other coalitions' values."""
    system, patients = wide_grouped_system(70)
    groups = tuple(tuple(range(g * 7, g * 7 + 7)) for g in range(10))
    results = {}
    for path in ("tables", "brute"):
        explainer = Explainer(system, background_size=6, seed=0, masking=path)
        results[path] = explainer.explain(patients, method=method, alpha=0.2, budget=8,
                                          groups=groups)
    fast, slow = results["tables"].decomposition, results["brute"].decomposition
    np.testing.assert_allclose(results["tables"].width, results["brute"].width, rtol=1e-12)
    for part in ("calibration", "instance", "total"):
        np.testing.assert_allclose(getattr(fast, part), getattr(slow, part), rtol=0, atol=1e-9)
    assert np.abs(fast.instance).max() > 1e-3  # the games are not trivially zero


def test_column_players_are_the_groups_a_design_moves_together():
    from cpdecomp.core.coalitions import column_players
    coalitions = np.array([[1, 1, 0, 0, 1], [0, 0, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=bool)
    player_of_column, over_players = column_players(coalitions)
    np.testing.assert_array_equal(player_of_column, [0, 0, 1, 1, 0])
    np.testing.assert_array_equal(over_players, [[1, 0], [0, 1], [1, 1]])
    distinct = np.random.default_rng(0).random((40, 9)) < 0.5
    np.testing.assert_array_equal(column_players(distinct)[0], np.arange(9))


def test_more_than_62_independent_players_are_tabulated_not_wrapped():
    """Integer bitmasks (the lattice's index) still refuse past 62 players rather than wrap;
    the tree tables read masks, so 64 independent players are exact, not another
    coalition's values."""
    from cpdecomp.core.coalitions import bits_from_coalitions
    coalitions = np.eye(63, dtype=bool)
    with pytest.raises(CpdecompError, match="at most 62"):
        bits_from_coalitions(coalitions)
    system, _patients = wide_grouped_system(64, family="absolute")
    tables = Explainer(system, background_size=4, masking="tables").evaluator
    brute = Explainer(system, background_size=4, masking="brute").evaluator
    coalitions = np.concatenate([np.eye(64, dtype=bool), ~np.eye(64, dtype=bool)])
    rows = system.calibration_rows[:2]
    fast = tables.evaluate(coalitions=coalitions, rows=rows, names=["f"])["f"]
    slow = brute.evaluate(coalitions=coalitions, rows=rows, names=["f"])["f"]
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12 * np.abs(slow).max())
    assert tables.model_rows == 0


def test_spot_check_finds_a_wrong_fast_path_and_passes_a_right_one():
    system, _patients = wide_grouped_system(12)
    explainer = Explainer(system, background_size=8, masking="tables")
    coalitions = np.random.default_rng(4).random((30, 12)) < 0.5
    rows = system.calibration_rows[:2]
    assert explainer.evaluator.spot_check(coalitions, rows, ["f", "sigma"]) < 1e-12
    # A fast path that answers with the wrong coalitions' values is caught.
    broken = Explainer(system, background_size=8, masking="tables").evaluator
    real = broken._from_tables
    broken._from_tables = lambda name, c, r: real(name, c[::-1], r)
    assert broken.spot_check(coalitions, rows, ["f", "sigma"]) > 1e-3


def test_per_coalition_chains_over_permutation_prefixes_equal_brute_force():
    """Past the lattice a permutation prefix is its parent's value plus the groups its new
    player changes: the same numbers as brute force, and as summing every group."""
    from cpdecomp.core.attribution import build_design
    table, y = mixed_table(400, MAX_LATTICE_PLAYERS + 3, seed=6)
    system = fit_system(table, y, list(table.columns), family="normalized", model="gbm")
    background = draw_background(system.training_rows, 12, seed=0)
    rows = system.training_rows[:4]
    design = build_design("permutation", rows.shape[1], budget=4, seed=1)
    tables = MaskedEvaluator(system.components, background, path="tables")
    brute = MaskedEvaluator(system.components, background, path="brute")
    fast = tables.evaluate(design.coalitions, rows, ["f", "sigma"])
    slow = brute.evaluate(design.coalitions, rows, ["f", "sigma"])
    for name in ("f", "sigma"):
        np.testing.assert_allclose(fast[name], slow[name], rtol=0,
                                   atol=1e-12 * np.abs(slow[name]).max())
    sigma = tables.tables("sigma")
    assert sigma is not None
    _, over_players = tables._players(design.coalitions)
    offsets, _, parent, *_ = sigma._design_reads(over_players)
    bits = over_players.astype(np.int64) @ (np.int64(1) << np.arange(over_players.shape[1]))
    # Every prefix but ∅ extends another; its parent is used where fewer than half of the
    # groups change, which is most prefixes.
    assert (parent >= 0).sum() > len(bits) // 2
    unused = [c for c in range(1, len(bits)) if parent[c] < 0 and bits[c]]
    for c in unused:
        lost = bits[c] & (bits[c] - 1)  # one candidate parent: c without its lowest player
        if lost in set(bits.tolist()):
            other = int(np.flatnonzero(bits == lost)[0])
            assert (offsets[c] != offsets[other]).sum() * 2 >= offsets.shape[1]


def test_grouped_tables_are_bounded_per_component_and_the_column_tables_kept():
    """Feature groupings come and go with the user's --group choices: a few are kept per
    component (the oldest dropped), the columns' own tables always, and a grouping asked for
    again after it was dropped is rebuilt to the same values."""
    from cpdecomp.core.games.masking import GROUPED_TABLES_KEPT

    table, y = mixed_table(300, 4, seed=3)
    system = fit_system(table, y, family="normalized", model="gbm", seed=0)
    background = draw_background(system.training_rows, 40, seed=0)
    evaluator = MaskedEvaluator(system.components, background)
    columns = evaluator.tables("f")
    n = evaluator.n_columns
    groupings = [np.array([0] * (k + 2) + list(range(1, n - k - 1)), dtype=np.int64)
                 for k in range(GROUPED_TABLES_KEPT + 1)]
    first = evaluator.tables("f", groupings[0])
    for grouping in groupings[1:]:
        evaluator.tables("f", grouping)
    assert evaluator.tables("f") is columns
    assert len(evaluator._grouped_tables["f"]) == GROUPED_TABLES_KEPT
    again = evaluator.tables("f", groupings[0])
    assert again is not first  # dropped as the oldest, then rebuilt
    rows = system.training_rows[:5]
    keep = np.random.default_rng(1).random((6, int(groupings[0].max()) + 1)) < 0.5
    np.testing.assert_allclose(again.values_by_row(rows, keep), first.values_by_row(rows, keep),
                               rtol=0, atol=1e-12)

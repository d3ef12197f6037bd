"""Coalition designs: exact Shapley against its definition and shap, permutation sampling,
the contract every registered design keeps, and feature groups."""

from __future__ import annotations

from itertools import combinations
from math import factorial

import numpy as np
import pytest
import shap
from hypothesis import given, settings
from hypothesis import strategies as st

from cpdecomp import Explainer, fit_system, load_table, split_rows, target_values
from cpdecomp.core.attribution import (
    METHOD_BUDGETS,
    METHOD_LABELS,
    METHODS,
    NOT_DECOMPOSABLE,
    build_design,
    exact_shapley_design,
    permutation_design,
)
from cpdecomp.core.attribution.exact import MAX_EXACT_PLAYERS
from cpdecomp.core.errors import CpdecompError


def shapley_by_definition(game, d):
    """φ_j = Σ_{S ⊆ N∖{j}} |S|!(d−|S|−1)!/d! (v(S ∪ {j}) − v(S)), written out."""
    phi = np.zeros(d)
    for j in range(d):
        others = [k for k in range(d) if k != j]
        for size in range(d):
            for subset in combinations(others, size):
                weight = factorial(size) * factorial(d - size - 1) / factorial(d)
                phi[j] += weight * (game(set(subset) | {j}) - game(set(subset)))
    return phi


def values_on(design, game):
    return np.array([game({j for j in range(design.n_players) if row[j]})
                     for row in design.coalitions])


@settings(max_examples=30, deadline=None)
@given(d=st.integers(1, 6), seed=st.integers(0, 2**31 - 1))
def test_exact_design_equals_the_shapley_definition_on_random_games(d, seed):
    table = np.random.default_rng(seed).normal(size=2**d)
    game = lambda s: table[sum(1 << j for j in s)]  # noqa: E731
    design = exact_shapley_design(d)
    np.testing.assert_allclose(design.apply(values_on(design, game)),
                               shapley_by_definition(game, d), rtol=1e-12, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(d=st.integers(2, 9), budget=st.integers(2, 40), seed=st.integers(0, 1000))
def test_permutation_design_is_efficient_linear_and_keeps_null_players(d, budget, seed):
    rng = np.random.default_rng(seed)
    design = permutation_design(d, budget=budget, seed=seed)
    v = rng.normal(size=(3, len(design.coalitions)))
    w = rng.normal(size=len(design.coalitions))
    phi = design.apply(v)
    np.testing.assert_allclose(phi.sum(axis=1), v[:, design.full_index] - v[:, design.empty_index],
                               atol=1e-12)
    np.testing.assert_allclose(design.apply(v + 2.5 * w), phi + 2.5 * design.apply(w), atol=1e-12)
    # A game that ignores player 0 has the same value with and without it: φ_0 is exactly 0.
    ignores_zero = rng.normal(size=2 ** (d - 1))
    without_zero = (design.coalitions[:, 1:] * (1 << np.arange(d - 1))).sum(axis=1)
    assert design.apply(ignores_zero[without_zero])[0] == 0.0


def test_permutation_converges_to_exact_shapley_within_its_standard_error():
    """Unbiased, with error ≈ sd/√pairs: within 5 standard errors at every budget."""
    d = 6
    rng = np.random.default_rng(0)
    table = rng.normal(size=2**d) + np.arange(2**d) % 7
    game = lambda s: table[sum(1 << j for j in s)]  # noqa: E731
    exact = shapley_by_definition(game, d)
    one_pair = [permutation_design(d, budget=2, seed=s) for s in range(120)]
    pair_sd = np.std([p.apply(values_on(p, game)) for p in one_pair], axis=0)
    for budget in (16, 256, 4096):
        design = permutation_design(d, budget=budget, seed=1)
        error = np.abs(design.apply(values_on(design, game)) - exact)
        assert np.all(error <= 5 * pair_sd / np.sqrt(budget / 2) + 1e-12)


def test_exact_is_refused_above_the_documented_limit():
    with pytest.raises(CpdecompError, match="permutation"):
        build_design("exact", MAX_EXACT_PLAYERS + 1)


def test_weight_matrix_is_the_same_linear_map():
    design = exact_shapley_design(5)
    v = np.random.default_rng(2).normal(size=len(design.coalitions))
    np.testing.assert_allclose(v @ design.weight_matrix(), design.apply(v), atol=1e-12)


@pytest.fixture(scope="module")
def real_games():
    table = load_table("sample_data/diabetes.csv")
    y = target_values(table, "progression")
    train, cal, test = split_rows(len(table), (0.5, 0.25, 0.25), seed=0)
    features = ["age", "bmi", "bp", "s5 ltg", "s6 glu"]
    system = fit_system(table.iloc[train], y[train], features, family="normalized", model="gbm")
    system = system.conformalize(table.iloc[cal], y[cal])
    explainer = Explainer(system, background_size=16)
    design = explainer.design("exact")
    v_c = explainer.calibration_game("exact").values(0.1)
    rows = system.fitted.encode(table.iloc[test[:3]])
    from cpdecomp.core.games import instance_values

    v_i = instance_values(system.family, explainer.evaluator, rows, design.coalitions)
    return design, v_c, v_i


def test_exact_matches_shap_kernel_explainer_on_the_stacked_two_game(real_games):
    """shap's KernelExplainer, all 2^d coalitions, l1_reg=False, on [v_C, v_I] of a 0/1 mask."""
    design, v_c, v_i = real_games
    d = design.n_players
    bits = 1 << np.arange(d)
    lookup = {int(b): i for i, b in enumerate((design.coalitions * bits).sum(axis=1))}
    for patient in range(len(v_i)):
        def stacked(masks, patient=patient):
            index = [lookup[int(b)] for b in (np.asarray(masks) > 0.5) @ bits]
            return np.stack([v_c[index], v_i[patient, index]], axis=1)

        explainer = shap.KernelExplainer(stacked, np.zeros((1, d)))
        phi = explainer.shap_values(np.ones((1, d)), nsamples=2**d, l1_reg=False, silent=True)
        phi = np.asarray(phi).reshape(d, 2) if np.asarray(phi).ndim == 3 else np.asarray(phi)
        ours_c = design.apply(v_c)
        ours_i = design.apply(v_i[patient])
        np.testing.assert_allclose(phi[:, 0], ours_c, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(phi[:, 1], ours_i, rtol=1e-8, atol=1e-10)


# --- the design contract, for every registered method -----------------------------------------

def test_registries_list_the_same_methods_in_menu_order():
    assert list(METHOD_LABELS) == list(METHODS) == list(METHOD_BUDGETS)
    assert all(name == method.name for name, method in METHODS.items())
    assert not set(NOT_DECOMPOSABLE) & set(METHODS)


@pytest.mark.parametrize("method", list(METHODS))
def test_the_registry_says_what_each_builder_does(method):
    """Capabilities are stated once in the registry: they must be what the builders do."""
    entry = METHODS[method]
    for d in (4, 20 if entry.max_players is None else entry.max_players):
        design = build_design(method, d, seed=0)
        assert design.efficient == entry.efficient
        if entry.efficient:
            v = np.random.default_rng(d).normal(size=design.n_evaluations)
            np.testing.assert_allclose(design.apply(v).sum(),
                                       v[design.full_index] - v[design.empty_index], atol=1e-9)
    if entry.max_players is None:
        assert build_design(method, 70, seed=0).n_players == 70
    else:
        with pytest.raises(CpdecompError):
            build_design(method, entry.max_players + 1, seed=0)


@pytest.mark.parametrize("method", list(METHODS))
def test_every_design_keeps_the_contract(method):
    """Boolean coalitions with ∅ and N, φ = v @ W, any leading shape, seeded, budget reported."""
    d = 6
    spec = METHOD_BUDGETS[method]
    budget = None if spec is None else 2 * spec.minimum(d)
    design = build_design(method, d, budget=budget, seed=3)
    assert design.coalitions.dtype == bool and design.coalitions.shape[1] == d
    assert design.n_evaluations == len(np.unique(design.coalitions, axis=0))
    assert not design.coalitions[design.empty_index].any()
    assert design.coalitions[design.full_index].all()
    v = np.random.default_rng(0).normal(size=(2, 3, design.n_evaluations))
    phi = design.apply(v)
    assert phi.shape == (2, 3, d)
    np.testing.assert_allclose(v @ design.weight_matrix(), phi, atol=1e-12)
    again = build_design(method, d, budget=budget, seed=3)
    np.testing.assert_array_equal(again.coalitions, design.coalitions)
    np.testing.assert_array_equal(again.apply(v), phi)
    se = design.standard_errors(v)
    assert (se is None) == (not design.sampled)
    if design.sampled:
        assert se.shape == phi.shape and np.all(se >= 0)
        assert design.budget is not None
        other = build_design(method, d, budget=budget, seed=4)
        table = np.random.default_rng(1).normal(size=2**d)
        game = lambda s: table[sum(1 << j for j in s)]  # noqa: E731
        assert not np.array_equal(other.apply(values_on(other, game)),
                                  design.apply(values_on(design, game)))
    default = build_design(method, d)  # every builder has a working default budget
    assert default.n_players == d


def test_unknown_and_non_decomposable_methods_are_refused_with_the_reason():
    with pytest.raises(CpdecompError, match="unknown attribution method 'lasso'"):
        build_design("lasso", 4)
    for name, spec in NOT_DECOMPOSABLE.items():
        with pytest.raises(CpdecompError, match="cannot be decomposed"):
            build_design(name, 4)
        assert "not decomposable" in spec.label


# --- feature groups ------------------------------------------------------------------------------

@pytest.mark.parametrize("method", list(METHODS))
def test_groups_move_their_columns_together_and_attribute_per_group(method):
    """A design over groups = the group-level design on the game of whole groups."""
    groups = [[0, 3], [1], [2, 4, 5]]
    spec = METHOD_BUDGETS[method]
    budget = None if spec is None else 2 * spec.minimum(len(groups))
    design = build_design(method, 6, budget=budget, seed=1, groups=groups)
    inner = build_design(method, 3, budget=budget, seed=1)
    assert design.n_players == 3 and design.coalitions.shape[1] == 6
    for group in groups:  # every coalition holds all of a group's columns or none
        block = design.coalitions[:, group]
        assert np.all(block.all(axis=1) | ~block.any(axis=1))
    table = np.random.default_rng(5).normal(size=2**6)
    column_bits = design.coalitions.astype(np.int64) @ (1 << np.arange(6))
    group_bits = inner.coalitions.astype(np.int64) @ (1 << np.arange(3))
    spelled = np.array([sum(1 << c for g, grp in enumerate(groups) if b >> g & 1 for c in grp)
                        for b in group_bits])
    np.testing.assert_allclose(design.apply(table[column_bits]), inner.apply(table[spelled]),
                               atol=1e-12)


def test_singleton_groups_are_the_plain_design():
    plain = build_design("kernel", 5, budget=20, seed=2)
    grouped = build_design("kernel", 5, budget=20, seed=2, groups=[[j] for j in range(5)])
    np.testing.assert_array_equal(grouped.coalitions, plain.coalitions)
    np.testing.assert_array_equal(grouped.weight_matrix(), plain.weight_matrix())


@pytest.mark.parametrize("groups, message", [
    ([[0, 1], [2]], "missing \\[3\\]"),
    ([[0, 1], [1, 2, 3]], "repeated \\[1\\]"),
    ([[0, 1], [2, 3], []], "at least one column"),
    ([[0, 1], [2, 3, 4]], "out of range \\[4\\]"),
])
def test_groups_must_partition_the_columns(groups, message):
    with pytest.raises(CpdecompError, match=message):
        build_design("exact", 4, groups=groups)

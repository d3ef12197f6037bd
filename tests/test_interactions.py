"""Pairwise interaction values (SII, order-2 k-SII) of the three games, from the exact lattice.

Checked against what we did not write: closed forms of games whose interactions are known, a
brute-force SII over Python sets written from the textbook definition, and shapiq's
ExactComputer (on synthetic games and on the lattices of fitted systems); and the split
I_T = I_C + I_I for every family.
"""

from __future__ import annotations

from itertools import combinations
from math import factorial

import numpy as np
import pandas as pd
import pytest
from ci_policy import unavailable

from cpdecomp import (
    FAMILIES,
    CpdecompError,
    Explainer,
    Interactions,
    fit_system,
    load_table,
    split_rows,
    system_from_functions,
    target_values,
)
from cpdecomp.core.attribution import exact_shapley_design
from cpdecomp.core.attribution.interactions import interaction_matrices, pairs, pairwise_sii
from cpdecomp.core.games import instance_values

FEATURES = ["age", "bmi", "bp", "s1 tc", "s5 ltg"]
TOLERANCE = 1e-10


def lattice_of(game, d: int) -> np.ndarray:
    """v over bitmasks 0 .. 2^d − 1 of a game given on frozensets of players."""
    return np.array([game(frozenset(j for j in range(d) if b >> j & 1)) for b in range(1 << d)])


def textbook_sii(game, d: int, i: int, j: int) -> float:
    """Grabisch's SII of {i, j}: Σ over S ⊆ N∖{i,j} of |S|!(d−|S|−2)!/(d−1)! Δ_ij(S)."""
    others = [k for k in range(d) if k not in (i, j)]
    total = 0.0
    for size in range(len(others) + 1):
        weight = factorial(size) * factorial(d - size - 2) / factorial(d - 1)
        for subset in combinations(others, size):
            s = frozenset(subset)
            total += weight * (game(s | {i, j}) - game(s | {i}) - game(s | {j}) + game(s))
    return total


def shapley(lattice: np.ndarray, d: int) -> np.ndarray:
    return exact_shapley_design(d).apply(lattice)


def matrices(lattice: np.ndarray, index: str) -> np.ndarray:
    d = int(lattice.shape[-1]).bit_length() - 1
    return interaction_matrices(pairwise_sii(lattice), shapley(lattice, d), index)  # type: ignore[arg-type]


# --- closed forms and the textbook formula ------------------------------------------------------


@pytest.mark.parametrize("d", [3, 5, 7])
def test_pairwise_game_has_its_coefficients_as_sii_and_its_main_terms_as_k_sii(d):
    """v(S) = c + Σ a_i 1[i∈S] + Σ b_ij 1[i,j∈S]: SII_ij = b_ij, φ_i = a_i + ½Σ_j b_ij, and the
    k-SII main effects are a_i (its Möbius coefficients of order 1)."""
    rng = np.random.default_rng(d)
    a, b = rng.normal(size=d), np.triu(rng.normal(size=(d, d)), 1)
    b = b + b.T

    def game(s):
        members = sorted(s)
        return 0.7 + sum(a[i] for i in members) + sum(
            b[i, j] for i, j in combinations(members, 2))

    sii, k_sii = matrices(lattice_of(game, d), "SII"), matrices(lattice_of(game, d), "k-SII")
    off = ~np.eye(d, dtype=bool)
    np.testing.assert_allclose(sii[off], b[off], rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.diag(sii), a + 0.5 * b.sum(axis=1), rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.diag(k_sii), a, rtol=0, atol=1e-12)
    np.testing.assert_allclose(k_sii[off], b[off], rtol=0, atol=1e-12)


def test_a_three_way_term_shares_itself_half_with_each_of_its_pairs():
    """v(S) = 1[{0,1,2} ⊆ S]: SII of each of its three pairs is 1/2 (Möbius: m_T/(|T|−1)),
    every other pair 0."""
    d = 5
    sii = matrices(lattice_of(lambda s: float({0, 1, 2} <= s), d), "SII")
    expected = np.zeros((d, d))
    for i, j in combinations(range(3), 2):
        expected[i, j] = expected[j, i] = 0.5
    off = ~np.eye(d, dtype=bool)
    np.testing.assert_allclose(sii[off], expected[off], rtol=0, atol=1e-12)


@pytest.mark.parametrize("d", [2, 4, 6])
def test_agrees_with_the_textbook_sum_over_subsets(d):
    rng = np.random.default_rng(10 + d)
    lattice = rng.normal(size=1 << d)

    def game(s):
        return lattice[sum(1 << j for j in s)]

    ours = pairwise_sii(lattice)
    theirs = [textbook_sii(game, d, i, j) for i, j in zip(*pairs(d), strict=True)]
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


def test_lattices_in_a_batch_are_each_their_own():
    rng = np.random.default_rng(3)
    batch = rng.normal(size=(3, 2, 1 << 5))
    together = pairwise_sii(batch)
    assert together.shape == (3, 2, 10)
    for index in np.ndindex(3, 2):
        np.testing.assert_array_equal(together[index], pairwise_sii(batch[index]))


def test_conventions_symmetric_full_pair_values_and_order_one_values_on_the_diagonal():
    """[i, j] = [j, i] = the pair's whole value (not halved as in shap's TreeExplainer); the
    diagonal holds φ_i (SII) or φ_i − ½ Σ_j I_ij (k-SII), so k-SII's diagonal plus its upper
    triangle adds up to v(N) − v(∅)."""
    d = 5
    lattice = np.random.default_rng(4).normal(size=1 << d)
    sii, k_sii = matrices(lattice, "SII"), matrices(lattice, "k-SII")
    for m in (sii, k_sii):
        np.testing.assert_array_equal(m, m.T)
    first, second = pairs(d)
    np.testing.assert_array_equal(sii[first, second], pairwise_sii(lattice))
    np.testing.assert_array_equal(np.diag(sii), shapley(lattice, d))
    off = sii - np.diag(np.diag(sii))
    np.testing.assert_allclose(np.diag(k_sii), shapley(lattice, d) - 0.5 * off.sum(axis=1),
                               rtol=0, atol=1e-15)
    efficiency = np.trace(k_sii) + k_sii[first, second].sum()
    np.testing.assert_allclose(efficiency, lattice[-1] - lattice[0], rtol=0, atol=1e-12)


def test_a_null_player_gets_exact_zeros():
    d = 5
    base = np.random.default_rng(5).normal(size=1 << (d - 1))
    # Player 4 never changes the game: v(S) = v(S without player 4).
    lattice = np.concatenate([base, base])
    values = pairwise_sii(lattice)
    first, second = pairs(d)
    assert np.all(values[(first == 4) | (second == 4)] == 0.0)


# --- shapiq --------------------------------------------------------------------------------------

def shapiq_matrices(lattice: np.ndarray, d: int, index: str) -> np.ndarray:
    """shapiq's ExactComputer on the game, as our matrix convention (shapiq is in the dev
    extra: without it these comparisons are skipped locally and fail under CI)."""
    try:
        import shapiq
    except ImportError:
        unavailable("shapiq is not installed (the dev extra has it)")

    def game(coalitions: np.ndarray) -> np.ndarray:
        return lattice[coalitions.astype(np.int64) @ (1 << np.arange(d))]

    values = shapiq.ExactComputer(game, n_players=d)(index, order=2)
    out = np.zeros((d, d))
    for i in range(d):
        out[i, i] = values[(i,)]
    for i, j in combinations(range(d), 2):
        out[i, j] = out[j, i] = values[(i, j)]
    return out


@pytest.mark.parametrize("index", ["SII", "k-SII"])
@pytest.mark.parametrize("d", [4, 5, 6])
def test_agrees_with_shapiq_on_random_games(d, index):
    lattice = np.random.default_rng(20 + d).normal(size=1 << d) * 10
    np.testing.assert_allclose(matrices(lattice, index), shapiq_matrices(lattice, d, index),
                               rtol=0, atol=TOLERANCE)


@pytest.fixture(scope="module")
def diabetes():
    table = load_table("sample_data/diabetes.csv")
    y = target_values(table, "progression")
    return table, y, split_rows(len(table), (0.5, 0.25, 0.25), seed=0)


_explainers: dict[str, Explainer] = {}


def explainer_for(diabetes, family: str) -> Explainer:
    if family not in _explainers:
        table, y, (train, cal, _) = diabetes
        system = fit_system(table.iloc[train], y[train], FEATURES, family=family, model="gbm",
                            seed=0).conformalize(table.iloc[cal], y[cal])
        _explainers[family] = Explainer(system, background_size=16, seed=0)
    return _explainers[family]


def patients(diabetes, n: int = 4) -> pd.DataFrame:
    table, _, (_, _, test) = diabetes
    return table.iloc[test[:n]]


@pytest.mark.parametrize("groups", [None, ((0, 3), (1,), (2, 4))])
@pytest.mark.parametrize("index", ["SII", "k-SII"])
@pytest.mark.parametrize("family", ["normalized", "cqr"])
def test_fitted_systems_lattices_agree_with_shapiq(diabetes, family, index, groups):
    """The API's three views equal shapiq's on the same games: v_C, and v_I, v_T per patient,
    looked up by coalition (not through our lattice order), on the family's scale."""
    explainer = explainer_for(diabetes, family)
    units = "log" if FAMILIES[family].scale == "log" else "width"
    rows = explainer.system.fitted.encode(patients(diabetes))
    result = explainer.interactions_rows(rows, index=index, units=units, groups=groups)
    games = explainer.patient_games("exact", 0.1, units, groups=groups)
    coalitions = games.design.coalitions
    row_of = {c.tobytes(): r for r, c in enumerate(coalitions)}
    members = [(c,) for c in range(len(FEATURES))] if groups is None else groups
    d = len(members)

    def lattice(values: np.ndarray) -> np.ndarray:
        out = np.empty(1 << d)
        for b in range(1 << d):
            columns = np.zeros(len(FEATURES), dtype=bool)
            for g in range(d):
                if b >> g & 1:
                    columns[list(members[g])] = True
            out[b] = values[row_of[columns.tobytes()]]
        return out

    v_c = games.calibration_values
    v_i = instance_values(games.family, games.evaluator, rows, coalitions)
    for p in range(len(rows)):
        for view, values in (("calibration", v_c), ("instance", v_i[p]),
                             ("total", v_c + v_i[p])):
            np.testing.assert_allclose(getattr(result, view)[p],
                                       shapiq_matrices(lattice(values), d, index),
                                       rtol=0, atol=TOLERANCE, err_msg=view)


# --- the split, per family -----------------------------------------------------------------------


@pytest.mark.parametrize("family", list(FAMILIES))
def test_total_is_calibration_plus_instance_for_every_family(diabetes, family):
    """I_T = I_C + I_I to 1e-10 in both indices and both units; SII's diagonal is the exact
    method's φ of each view; k-SII adds up to width − base width like the Shapley values."""
    explainer = explainer_for(diabetes, family)
    table = patients(diabetes)
    unit_choices = ["width", "log"] if FAMILIES[family].scale == "log" else ["width"]
    for units in unit_choices:
        explanation = explainer.explain(table, method="exact", units=units)
        d = explanation.decomposition
        for index in ("SII", "k-SII"):
            result = explainer.interactions(table, index=index, units=units)
            np.testing.assert_allclose(result.total - result.calibration - result.instance, 0.0,
                                       rtol=0, atol=TOLERANCE)
            assert result.additivity_error <= TOLERANCE
            if index == "SII":
                for view in ("calibration", "instance", "total"):
                    np.testing.assert_allclose(
                        np.diagonal(getattr(result, view), axis1=1, axis2=2),
                        getattr(d, view), rtol=0, atol=TOLERANCE, err_msg=view)
                assert result.efficiency_error is None
            else:
                first, second = pairs(len(FEATURES))
                sums = (np.trace(result.total, axis1=1, axis2=2)
                        + result.total[:, first, second].sum(axis=1))
                gap = (explanation.width - explanation.base_width if units == "width"
                       else np.log(explanation.width) - np.log(explanation.base_width))
                np.testing.assert_allclose(sums, gap, rtol=0, atol=1e-9)
                assert result.efficiency_error is not None and result.efficiency_error <= 1e-9


def test_the_calibration_view_is_one_matrix_for_the_cohort_on_the_additive_scale(diabetes):
    result = explainer_for(diabetes, "cqr").interactions(patients(diabetes), index="SII")
    np.testing.assert_array_equal(result.calibration, result.calibration[:1].repeat(4, axis=0))
    assert np.abs(result.calibration).max() > 0


# --- closed forms on systems ---------------------------------------------------------------------


def product_system(family: str, c: float = 2.5):
    """Components of five features: f_hi = c·x0·x1 + 3·x2, f_lo = −x3 (CQR), or the same
    f for the absolute family; x4 is read by no component. The background is drawn
    independently per column."""
    rng = np.random.default_rng(7)
    training = pd.DataFrame(rng.normal(size=(200, 5)) + 1.0, columns=list("abcde"))
    f_hi = lambda x: c * x[:, 0] * x[:, 1] + 3 * x[:, 2]  # noqa: E731
    f_lo = lambda x: -x[:, 3]  # noqa: E731
    functions = {"lo": f_lo, "hi": f_hi} if family == "cqr" else {"f": f_hi}
    fitted = system_from_functions(family, functions, training)
    calibration = pd.DataFrame(rng.normal(size=(60, 5)) + 1.0, columns=list("abcde"))
    y = calibration["a"] * calibration["b"] + rng.normal(size=60)
    return fitted.conformalize(calibration, y.to_numpy())


def test_instance_interaction_of_a_product_has_its_closed_form():
    """CQR with width h = c·x0·x1 + 3·x2 + x3, masked over a background B: Δ_01(S) is the
    same for every S, so SII_01 = c(x0x1 − x0·m1 − m0·x1 + mean_B b0b1), m = the background
    means, and every other pair's instance interaction is 0; the total is I_C + that."""
    c = 2.5
    explainer = Explainer(product_system("cqr", c), background_size=40, seed=0)
    rows = np.random.default_rng(8).normal(size=(6, 5)) + 1.0
    result = explainer.interactions_rows(rows, index="SII")
    b = explainer.background
    m0, m1 = b[:, 0].mean(), b[:, 1].mean()
    expected = c * (rows[:, 0] * rows[:, 1] - rows[:, 0] * m1 - m0 * rows[:, 1]
                    + (b[:, 0] * b[:, 1]).mean())
    np.testing.assert_allclose(result.instance[:, 0, 1], expected, rtol=0, atol=1e-10)
    np.testing.assert_allclose(result.instance[:, 1, 0], expected, rtol=0, atol=1e-10)
    others = result.pair_values("instance")[:, 1:]  # every pair but (0, 1)
    np.testing.assert_allclose(others, 0.0, rtol=0, atol=1e-10)
    np.testing.assert_allclose(result.total[:, 0, 1], result.calibration[:, 0, 1] + expected,
                               rtol=0, atol=1e-10)


def test_the_absolute_family_has_no_instance_interaction():
    explainer = Explainer(product_system("absolute"), background_size=40, seed=0)
    rows = np.random.default_rng(9).normal(size=(3, 5)) + 1.0
    result = explainer.interactions_rows(rows, index="k-SII")
    assert np.all(result.instance == 0.0)
    np.testing.assert_array_equal(result.total, result.calibration)
    assert np.abs(result.calibration[:, 0, 1]).max() > 0  # the product moves q̂ jointly


@pytest.mark.parametrize("family", ["cqr", "absolute"])
def test_a_feature_no_component_reads_gets_exact_zeros_in_every_view(family):
    explainer = Explainer(product_system(family), background_size=40, seed=0)
    rows = np.random.default_rng(10).normal(size=(4, 5)) + 1.0
    for index in ("SII", "k-SII"):
        result = explainer.interactions_rows(rows, index=index)
        for view in ("calibration", "instance", "total"):
            values = getattr(result, view)
            assert np.all(values[:, 4, :] == 0.0) and np.all(values[:, :, 4] == 0.0), view


# --- limits, tables, and the study ---------------------------------------------------------------


def wide_explainer(n_columns: int) -> Explainer:
    training = pd.DataFrame(np.random.default_rng(1).normal(size=(50, n_columns)),
                            columns=[f"x{i}" for i in range(n_columns)])
    fitted = system_from_functions("absolute", {"f": lambda x: x[:, 0] * x[:, 1]}, training)
    system = fitted.conformalize(training, training["x0"].to_numpy())
    return Explainer(system, background_size=4, seed=0)


def test_refuses_more_than_sixteen_players_naming_the_exact_lattice():
    explainer = wide_explainer(17)
    with pytest.raises(CpdecompError, match=r"exact lattice.*16 features or feature groups"):
        explainer.interactions_rows(np.zeros((1, 17)))
    # Seventeen columns in three groups are three players: allowed.
    groups = ((0, 1), (2,), tuple(range(3, 17)))
    result = explainer.interactions_rows(np.ones((2, 17)), index="k-SII", groups=groups)
    assert result.total.shape == (2, 3, 3)
    assert result.players[0] == "x0 + x1"


def test_refuses_an_unknown_index_and_one_player():
    explainer = wide_explainer(3)
    with pytest.raises(CpdecompError, match="unknown interaction index 'STII'"):
        explainer.interactions_rows(np.zeros((1, 3)), index="STII")
    with pytest.raises(CpdecompError, match="at least two"):
        explainer.interactions_rows(np.zeros((1, 3)), groups=((0, 1, 2),))


def test_frame_and_strongest_pairs_read_the_matrices(diabetes):
    result = explainer_for(diabetes, "normalized").interactions(patients(diabetes), index="SII")
    assert isinstance(result, Interactions)
    result = Interactions(**{**result.__dict__, "patient_ids": ["p1", "p2", "p3", "p4"]})
    frame = result.to_frame()
    n_pairs = len(FEATURES) * (len(FEATURES) - 1) // 2
    assert list(frame.columns) == ["patient_id", "feature_a", "feature_b", "calibration",
                                   "instance", "total"]
    assert len(frame) == 4 * n_pairs
    row = frame[(frame.patient_id == "p3") & (frame.feature_a == "bmi")
                & (frame.feature_b == "s5 ltg")].iloc[0]
    for view in ("calibration", "instance", "total"):
        assert row[view] == getattr(result, view)[2, 1, 4]
    strongest = result.strongest(top=3)
    assert len(strongest) == 3
    assert strongest["total"].is_monotonic_decreasing
    top = strongest.iloc[0]
    a, b = FEATURES.index(top.feature_a), FEATURES.index(top.feature_b)
    np.testing.assert_allclose(top.total, np.abs(result.total[:, a, b]).mean(), rtol=1e-15)
    assert top.total == pytest.approx(np.abs(result.pair_values("total")).mean(axis=0).max())


def test_study_names_patients_and_groups(diabetes):
    from cpdecomp import StudyOptions, prepare_study

    table = diabetes[0]
    study = prepare_study(table, StudyOptions(target="progression", id_column="patient_id",
                                              features=tuple(FEATURES[:4]), family="cqr",
                                              background=16))
    result = study.interactions(rows=[2, 0], groups=[["age", "bp"]], index="k-SII")
    assert result.patient_ids == [study.patient_ids[2], study.patient_ids[0]]
    assert result.players == ("age + bp", "bmi", "s1 tc")
    report = study.explain(rows=[2, 0], groups=[["age", "bp"]])
    first, second = pairs(3)
    sums = np.trace(result.total, axis1=1, axis2=2) + result.total[:, first, second].sum(axis=1)
    np.testing.assert_allclose(sums, report.explanation.width - report.explanation.base_width,
                               rtol=0, atol=1e-9)


def test_a_patients_values_do_not_depend_on_its_chunk(diabetes):
    from cpdecomp.core.interactions import LatticeGames, lattice_interactions

    explainer = explainer_for(diabetes, "normalized")
    rows = explainer.system.fitted.encode(patients(diabetes, 5))
    g = explainer.patient_games("exact", 0.1, "width")
    games = LatticeGames(g.family, g.evaluator, g.design, g.calibration_values,
                         g.calibration_attribution[0], g.units, g.players, g.alpha)
    whole = lattice_interactions(games, rows, "k-SII")
    one_by_one = lattice_interactions(games, rows, "k-SII", chunk_size=2)
    for view in ("calibration", "instance", "total"):
        np.testing.assert_array_equal(getattr(whole, view), getattr(one_by_one, view))
    alone = explainer.interactions_rows(rows[3:4], index="k-SII")
    np.testing.assert_array_equal(alone.total[0], whole.total[3])

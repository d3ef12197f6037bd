"""Wide tables: past 62 features the sampled methods run on tree tables, exactly.

Coalitions are boolean masks with no width limit; the tree tables read a coalition's local
bits per group of leaves from its mask. Checked against brute force, which masks by building
hybrid rows and calling the model's own predict (scikit-learn), and against efficiency.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cpdecomp import fit_system
from cpdecomp.core.attribution import build_design
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.explainer import draw_background
from cpdecomp.core.games import MaskedEvaluator
from cpdecomp.core.games.calibration import CalibrationGame
from cpdecomp.core.games.instance import instance_values

ALPHA = 0.2


def wide_system(n_columns: int, model: str, family: str = "normalized"):
    """A small sklearn tree system on `n_columns` numeric columns, most of them used."""
    rng = np.random.default_rng(n_columns)
    table = pd.DataFrame(rng.normal(size=(300, n_columns)),
                         columns=[f"c{j}" for j in range(n_columns)])
    signal = table.to_numpy() @ rng.normal(size=n_columns)
    y = signal + rng.normal(size=len(table)) * (1 + np.abs(table["c3"].to_numpy()))
    system = fit_system(table.iloc[:240], y[:240], list(table.columns), family=family,
                        model=model, seed=0)
    return system.conformalize(table.iloc[240:], y[240:])


@pytest.mark.parametrize(("n_columns", "model", "method", "budget"), [
    (70, "gbm", "permutation", 4),
    (70, "rf", "kernel", None),
    (100, "gbm", "kernel", 230),
    (100, "rf", "permutation", 4),
])
def test_wide_tables_equal_the_models_own_predict_and_are_efficient(n_columns, model, method,
                                                                    budget):
    system = wide_system(n_columns, model)
    design = build_design(method, n_columns, budget=budget, seed=1)
    assert design.coalitions.shape[1] == n_columns
    background = draw_background(system.fitted.training_rows, 6, seed=0)
    rows = system.calibration_rows[:3]
    names = list(system.fitted.components)
    tables = MaskedEvaluator(system.fitted.components, background, path="tables")
    brute = MaskedEvaluator(system.fitted.components, background, path="brute")
    assert all(tables.path_of(name) == "tables" for name in names)
    fast = tables.evaluate(design.coalitions, rows, names)
    assert tables.model_rows == 0  # no hybrid row was predicted
    slow = brute.evaluate(design.coalitions, rows, names)
    assert brute.model_rows > 0
    for name in names:
        scale = np.abs(slow[name]).max()
        np.testing.assert_allclose(fast[name], slow[name], rtol=0, atol=1e-10 * scale)
        assert np.ptp(slow[name], axis=0).max() > 1e-3 * scale  # coalitions do differ

    # Both games from the tables: φ adds up to v(N) − v(∅), and equals brute force's φ.
    family = system.family
    calibration_rows = system.calibration_rows[:30]
    calibration_targets = system.calibration_targets[:30]
    games = {}
    for path, evaluator in (("tables", tables), ("brute", brute)):
        calibration = CalibrationGame.compute(family, evaluator, calibration_rows,
                                              calibration_targets, design.coalitions)
        games[path] = (calibration.values(ALPHA),
                       instance_values(family, evaluator, rows, design.coalitions))
    for got, want in zip(games["tables"], games["brute"], strict=True):
        scale = max(np.abs(want).max(), 1.0)
        phi = design.apply(got)
        gap = got[..., design.full_index] - got[..., design.empty_index]
        np.testing.assert_allclose(phi.sum(axis=-1), gap, rtol=0, atol=1e-9 * scale)
        np.testing.assert_allclose(phi, design.apply(want), rtol=0, atol=1e-9 * scale)
        assert np.abs(phi).max() > 1e-6 * scale  # the game is not trivially zero


@pytest.mark.parametrize("method", ["permutation", "kernel", "banzhaf-sampled",
                                    "leave-one-out", "shap-permutation"])
def test_sampled_and_linear_size_designs_take_any_number_of_players(method):
    """Past 62 players a design is still over every player: the prefixes of a permutation,
    each player alone, each player left out, at their own coalitions."""
    d = 130
    budget = {"kernel": 2 * d + 2, "leave-one-out": None}.get(method, 4)
    design = build_design(method, d, budget=budget, seed=2)
    coalitions = design.coalitions
    assert coalitions.shape[1] == d
    assert len(np.unique(coalitions, axis=0)) == len(coalitions)  # merged, none lost
    assert not coalitions[design.empty_index].any() and coalitions[design.full_index].all()
    # A game that is additive in the players: every method gives each its own weight exactly
    # (Banzhaf and leave-one-out too, since there is no interaction to split).
    weight = np.random.default_rng(0).normal(size=d)
    phi = design.apply(coalitions.astype(float) @ weight)
    np.testing.assert_allclose(phi, weight, rtol=0, atol=1e-9)


def test_exact_enumeration_stays_refused_with_a_pointer_to_the_sampled_methods():
    for method in ("exact", "banzhaf"):
        with pytest.raises(CpdecompError, match="--method"):
            build_design(method, 70)

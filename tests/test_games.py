"""The games axis: both games offer the `Game` protocol, and their values at the lattice's ends
are what the family gives on unmasked rows (full coalition) and on the background alone (empty
coalition), computed here without the masking code."""

from __future__ import annotations

import numpy as np
import pandas as pd

from cpdecomp import Explainer, system_from_functions
from cpdecomp.core.games import GAMES, CalibrationGame, Game, InstanceGame


def sigma(z):
    return 0.5 + z[:, 0] ** 2


def test_both_games_are_games_and_registered():
    rng = np.random.default_rng(0)
    train = pd.DataFrame({"a": rng.normal(size=80), "b": rng.normal(size=80)})
    fitted = system_from_functions("normalized", {"f": lambda z: z[:, 0] - z[:, 1],
                                                  "sigma": sigma}, train)
    y = train["a"] - train["b"] + sigma(train.to_numpy()) * rng.normal(size=80)
    system = fitted.conformalize(train, y)
    explainer = Explainer(system, background_size=20, seed=0)
    calibration = explainer.calibration_game("exact")
    patients = explainer.system.fitted.encode(train.iloc[:5])
    instance = InstanceGame.compute(system.family, explainer.evaluator, patients,
                                    calibration.coalitions)
    assert isinstance(calibration, Game) and isinstance(instance, Game)
    assert list(GAMES) == ["calibration", "instance"]
    assert (CalibrationGame.kind, InstanceGame.kind) == (GAMES["calibration"], GAMES["instance"])
    assert calibration.n_players == instance.n_players == 2
    assert calibration.scale == instance.scale == "log"

    full = calibration.coalitions.all(axis=1)
    empty = ~calibration.coalitions.any(axis=1)
    alpha = 0.2
    # Full coalition: nothing masked, so q_S is the system's own q̂ and h_S is sigma itself.
    np.testing.assert_allclose(calibration.values(alpha)[full],
                               np.log(2 * system.quantile(alpha)), rtol=1e-12)
    np.testing.assert_allclose(instance.values(alpha)[:, full][:, 0],
                               np.log(sigma(patients)), rtol=1e-12)
    # Empty coalition: every patient sees the background's mean sigma.
    np.testing.assert_allclose(instance.values(alpha)[:, empty][:, 0],
                               np.log(sigma(explainer.background).mean()), rtol=1e-12)
    np.testing.assert_array_equal(instance.values(0.05), instance.values(0.3))

"""Explaining patients: the games on one design, the calibration game computed once.

    explainer = Explainer(system, background_size=64, seed=0)
    result = explainer.explain(patient_table, method="exact", alpha=0.1)

Changing alpha re-ranks the cached masked calibration scores; changing the method builds (and
caches) one more design; neither refits or re-evaluates anything already done.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.attribution import Design, build_design
from core.conformal import conformal_rank
from core.decomposition import Decomposition, Units, decompose
from core.errors import CpdecompError
from core.games import CalibrationGame, MaskedEvaluator, MaskingPath, instance_values
from core.system import ConformalSystem
from core.typing import FloatArray

BACKGROUND_STREAM = 1
"""Seed stream for the background sample, apart from the split's and the design's."""


@dataclass(frozen=True, eq=False)
class Explanation:
    """Intervals and attributions for a batch of patients under one configuration."""

    decomposition: Decomposition
    prediction: FloatArray
    lower: FloatArray
    upper: FloatArray
    width: FloatArray
    base_width: float
    q_hat: float
    rank: int
    alpha: float
    family: str
    method: str
    budget: int | None
    n_calibration: int
    background_size: int

    @property
    def features(self) -> tuple[str, ...]:
        return self.decomposition.features


def draw_background(training_rows: FloatArray, size: int, seed: int) -> FloatArray:
    """A seeded random subsample of training rows (all of them when there are fewer)."""
    if size < 1:
        raise CpdecompError("the background needs at least 1 row")
    rng = np.random.default_rng((seed, BACKGROUND_STREAM))
    if size >= len(training_rows):
        return training_rows.copy()
    return training_rows[np.sort(rng.choice(len(training_rows), size=size, replace=False))]


class Explainer:
    """Caches designs and calibration games for one conformal system and background."""

    def __init__(self, system: ConformalSystem, background_size: int = 64, seed: int = 0,
                 masking: MaskingPath = "auto") -> None:
        self.system = system
        self.seed = seed
        self.background = draw_background(system.fitted.training_rows, background_size, seed)
        self.evaluator = MaskedEvaluator(system.fitted.components, self.background, path=masking)
        self._designs: dict[tuple, Design] = {}
        self._games: dict[tuple, CalibrationGame] = {}

    @property
    def n_players(self) -> int:
        return len(self.system.feature_names)

    def design(self, method: str, budget: int | None = None) -> Design:
        key = (method, self.n_players, budget, self.seed)
        if key not in self._designs:
            self._designs[key] = build_design(method, self.n_players, budget, self.seed)
        return self._designs[key]

    def calibration_game(self, method: str, budget: int | None = None) -> CalibrationGame:
        """The calibration game on the method's design, computed once per design."""
        key = (method, budget)
        if key not in self._games:
            design = self.design(method, budget)
            self._games[key] = CalibrationGame(
                self.system.family, self.evaluator, self.system.calibration_rows,
                self.system.calibration_targets, design.coalitions,
            )
        return self._games[key]

    def explain_rows(self, rows: FloatArray, method: str = "exact", alpha: float = 0.1,
                     units: Units = "width", budget: int | None = None) -> Explanation:
        """Explain encoded patient rows."""
        family = self.system.family
        if units == "log" and family.scale != "log":
            raise CpdecompError(
                f"log units apply to the log-scale families (normalized, gamma, cqr-r); "
                f"{family.name} attributions are in width units already"
            )
        rank = conformal_rank(self.system.n_calibration, alpha)
        design = self.design(method, budget)
        game = self.calibration_game(method, budget)
        v_c = game.values(alpha)
        v_i = instance_values(family, self.evaluator, rows, design.coalitions)
        decomposition = decompose(design, v_c, v_i, family.scale, units, self.system.feature_names)
        lower, upper = self.system.predict_interval(rows, alpha)
        base = float(np.exp(decomposition.empty_value) if family.scale == "log"
                     else decomposition.empty_value)
        return Explanation(
            decomposition=decomposition, prediction=self.system.predict(rows),
            lower=lower, upper=upper, width=upper - lower, base_width=base,
            q_hat=self.system.quantile(alpha), rank=rank, alpha=float(alpha), family=family.name,
            method=method, budget=design.budget, n_calibration=self.system.n_calibration,
            background_size=len(self.background),
        )

    def explain(self, patients: pd.DataFrame, method: str = "exact", alpha: float = 0.1,
                units: Units = "width", budget: int | None = None) -> Explanation:
        """Explain patients given as a table with the feature columns."""
        return self.explain_rows(self.system.fitted.encode(patients), method, alpha, units, budget)

"""A coalition design: which coalitions to evaluate, and a linear map from their values to φ.

Every method offered is linear in the game, so one design applied to the calibration, instance
and total games gives φ_T = φ_C + φ_I exactly (method page §5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.typing import Coalitions, FloatArray


@dataclass(frozen=True, eq=False)
class Design:
    """Coalitions (n_coalitions, n_players) and weights (n_coalitions, n_players): φ = v @ W."""

    method: str
    coalitions: Coalitions
    weights: FloatArray
    efficient: bool
    """True when Σφ = v(all players) - v(no player) for every game."""
    budget: int | None = None
    seed: int | None = None

    @property
    def n_players(self) -> int:
        return self.coalitions.shape[1]

    def apply(self, values: FloatArray) -> FloatArray:
        """Attributions (..., n_players) of game values (..., n_coalitions)."""
        return np.asarray(values, dtype=float) @ self.weights

    def index_of(self, members: np.ndarray) -> int:
        """Row of the coalition with exactly these members."""
        hits = np.flatnonzero((self.coalitions == members[None, :]).all(axis=1))
        if hits.size == 0:
            raise KeyError("coalition not in design")
        return int(hits[0])

    @property
    def full_index(self) -> int:
        return self.index_of(np.ones(self.n_players, dtype=bool))

    @property
    def empty_index(self) -> int:
        return self.index_of(np.zeros(self.n_players, dtype=bool))


def coalitions_from_bits(bits: np.ndarray, n_players: int) -> Coalitions:
    """Boolean masks from integer bitmasks (player j is bit j)."""
    return ((np.asarray(bits, dtype=np.int64)[:, None] >> np.arange(n_players)) & 1).astype(bool)

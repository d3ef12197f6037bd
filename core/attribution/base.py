"""A coalition design: which coalitions to evaluate, and a linear map from their values to φ.

Every method offered is linear in the game, so one design applied to the calibration, instance
and total games gives φ_T = φ_C + φ_I exactly (method page §5). The map is stored as weighted
marginal contributions, φ_j = Σ w · (v(with) − v(without)), the way Shapley values are
defined: a player that never changes the game gets exactly 0.0, not a rounding residue.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.typing import Coalitions, FloatArray

ROWS_PER_BLOCK = 256
"""Patients per block when applying a design, to bound the (patients × terms) buffer."""


@dataclass(frozen=True, eq=False)
class Design:
    """Coalitions (n_coalitions, n_players) and marginal-contribution terms sorted by player."""

    method: str
    coalitions: Coalitions
    with_index: np.ndarray
    """(n_terms,) row in `coalitions` of S ∪ {j}."""
    without_index: np.ndarray
    """(n_terms,) row of S."""
    player: np.ndarray
    """(n_terms,) j, non-decreasing."""
    weight: FloatArray
    efficient: bool
    """True when Σφ = v(all players) − v(no player) for every game."""
    budget: int | None = None
    seed: int | None = None

    @property
    def n_players(self) -> int:
        return self.coalitions.shape[1]

    def apply(self, values: FloatArray) -> FloatArray:
        """Attributions (..., n_players) of game values (..., n_coalitions)."""
        values = np.asarray(values, dtype=float)
        flat = values.reshape(-1, values.shape[-1])
        out = np.zeros((len(flat), self.n_players))
        bounds = np.searchsorted(self.player, np.arange(self.n_players + 1))
        for start in range(0, len(flat), ROWS_PER_BLOCK):
            block = flat[start:start + ROWS_PER_BLOCK]
            gains = block[:, self.with_index] - block[:, self.without_index]
            for j in range(self.n_players):
                lo, hi = bounds[j], bounds[j + 1]
                out[start:start + len(block), j] = gains[:, lo:hi] @ self.weight[lo:hi]
        return out.reshape((*values.shape[:-1], self.n_players))

    def weight_matrix(self) -> FloatArray:
        """The same map as a dense (n_coalitions, n_players) matrix: φ = v @ W."""
        matrix = np.zeros((len(self.coalitions), self.n_players))
        np.add.at(matrix, (self.with_index, self.player), self.weight)
        np.add.at(matrix, (self.without_index, self.player), -self.weight)
        return matrix

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


def design_from_terms(method: str, with_bits: np.ndarray, without_bits: np.ndarray,
                      player: np.ndarray, weight: FloatArray, n_players: int, efficient: bool,
                      budget: int | None = None, seed: int | None = None) -> Design:
    """Merge repeated (S ∪ {j}, S) terms, index the coalitions they use, sort by player."""
    keys = np.stack([player, with_bits, without_bits], axis=1)
    unique_keys, inverse = np.unique(keys, axis=0, return_inverse=True)
    merged = np.zeros(len(unique_keys))
    np.add.at(merged, inverse.ravel(), weight)
    bits, index = np.unique(unique_keys[:, 1:], return_inverse=True)
    index = index.reshape(-1, 2)
    return Design(
        method=method, coalitions=coalitions_from_bits(bits, n_players),
        with_index=index[:, 0], without_index=index[:, 1], player=unique_keys[:, 0],
        weight=merged, efficient=efficient, budget=budget, seed=seed,
    )

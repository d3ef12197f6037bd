"""Term designs: φ_j = Σ w · (v(S ∪ {j}) − v(S)) over weighted marginal contributions.

The form of every Shapley-type method here (exact and permutation Shapley, Banzhaf,
leave-one-out, shap's PermutationExplainer): a player that never changes the game gets exactly
0.0. `design_from_terms` merges repeated terms and indexes the coalitions they use; a sampled
design keeps its unmerged terms by sampling unit (`Replicates`) for its standard errors. The
kernels that apply the terms are in core/attribution/term_kernels.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import sparse

from cpdecomp.core.attribution.base import Design, as_games
from cpdecomp.core.attribution.term_kernels import ROWS_PER_BLOCK, apply_terms
from cpdecomp.core.coalitions import packed, row_keys, unique_coalitions
from cpdecomp.core.typing import Coalitions, FloatArray


@dataclass(frozen=True, eq=False)
class Replicates:
    """Independent sampling units of a term design: φ is the mean of the units' estimates.

    Unit u's estimate is ψ_u,j = Σ weight · (v(with) − v(without)) over its terms for player j,
    unmerged, so the spread of ψ_u over units gives the standard error sd(ψ)/√n_units.
    """

    with_index: np.ndarray
    without_index: np.ndarray
    player: np.ndarray
    unit: np.ndarray
    weight: FloatArray
    n_units: int

    def standard_errors(self, flat: FloatArray, n_players: int) -> FloatArray:
        """sd over units of ψ_u, divided by √n_units, for each game row of `flat`.

        NaN with a single unit: one draw says nothing about its own spread.
        """
        if self.n_units < 2:
            return np.full((len(flat), n_players), np.nan)
        cells = self.n_units * n_players
        # One sparse (terms → unit, player) sum turns every game's gains into all ψ_u at once.
        to_cells = sparse.csr_array(
            (self.weight, (np.arange(len(self.weight)), self.unit * n_players + self.player)),
            shape=(len(self.weight), cells))
        out = np.zeros((len(flat), n_players))
        block_rows = max(1, ROWS_PER_BLOCK * 256 // max(cells, 1))
        for start in range(0, len(flat), block_rows):
            block = flat[start:start + block_rows]
            gains = block[:, self.with_index] - block[:, self.without_index]
            estimates = (to_cells.T @ gains.T).T.reshape(len(block), self.n_units, n_players)
            out[start:start + len(block)] = estimates.std(axis=1, ddof=1) / np.sqrt(self.n_units)
        return out


@dataclass(frozen=True, eq=False, kw_only=True)
class TermDesign(Design):
    """Marginal-contribution terms sorted by player: φ_j = Σ w (v(with) − v(without))."""

    with_index: np.ndarray
    """(n_terms,) row in `coalitions` of S ∪ {j}."""
    without_index: np.ndarray
    """(n_terms,) row of S."""
    player: np.ndarray
    """(n_terms,) j, non-decreasing."""
    weight: FloatArray
    replicates: Replicates | None = None

    def apply(self, values: FloatArray) -> FloatArray:
        flat, lead = as_games(values)
        plain, _ = apply_terms(flat, np.empty(0), self.compact_terms, self.n_players)
        return plain.reshape((*lead, self.n_players))

    def apply_offset(self, offset: FloatArray, values: FloatArray) -> tuple[FloatArray, FloatArray]:
        flat, _ = as_games(values)
        return apply_terms(flat, offset, self.compact_terms, self.n_players)

    @cached_property
    def compact_terms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, FloatArray]:
        """(with, without, player) as int32 and the weights: fewer bytes read per term."""
        return (self.with_index.astype(np.int32), self.without_index.astype(np.int32),
                self.player.astype(np.int32), np.ascontiguousarray(self.weight, dtype=np.float64))

    def weight_matrix(self) -> FloatArray:
        matrix = np.zeros((len(self.coalitions), self.n_players))
        np.add.at(matrix, (self.with_index, self.player), self.weight)
        np.add.at(matrix, (self.without_index, self.player), -self.weight)
        return matrix

    def standard_errors(self, values: FloatArray) -> FloatArray | None:
        if self.replicates is None:
            return None
        flat, lead = as_games(values)
        return self.replicates.standard_errors(flat, self.n_players).reshape(
            (*lead, self.n_players))


def design_from_terms(method: str, with_members: Coalitions, without_members: Coalitions,
                      player: np.ndarray, weight: FloatArray, efficient: bool,
                      budget: int | None = None, seed: int | None = None,
                      unit: np.ndarray | None = None,
                      unit_weight: FloatArray | None = None) -> TermDesign:
    """Merge repeated (S ∪ {j}, S) terms, index the coalitions they use, sort by player.

    Terms are given as boolean masks (n_terms, d) of S ∪ {j} and S. With `unit` (the sampling
    unit of each term) and `unit_weight` (the term's weight inside its unit's own estimate), the
    design is sampled and keeps the unmerged terms for its errors. Terms and coalitions are
    ordered by (player, bitmask of S ∪ {j}, bitmask of S) whatever the width (core.coalitions).
    """
    with_members = np.asarray(with_members, dtype=bool)
    without_members = np.asarray(without_members, dtype=bool)
    n_players = with_members.shape[1]
    player = np.asarray(player, dtype=np.int64)
    player_bytes = player.astype(">u4").view(np.uint8).reshape(-1, 4)
    keys = row_keys(np.concatenate([player_bytes, packed(with_members), packed(without_members)],
                                   axis=1))
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    merged = np.zeros(len(first))
    np.add.at(merged, inverse, weight)
    # ∅ and the full coalition are always evaluated: every result reports v(N) − v(∅).
    pairs = np.stack([with_members[first], without_members[first]], axis=1).reshape(-1, n_players)
    ends = np.stack([np.zeros(n_players, dtype=bool), np.ones(n_players, dtype=bool)])
    coalitions, index = unique_coalitions(np.concatenate([pairs, ends]))
    index = index[:-2].reshape(-1, 2)
    replicates = None
    if unit is not None:
        replicates = Replicates(
            with_index=index[inverse, 0], without_index=index[inverse, 1], player=player,
            unit=np.asarray(unit, dtype=np.int64), weight=np.asarray(unit_weight, dtype=float),
            n_units=int(np.max(unit)) + 1,
        )
    return TermDesign(
        method=method, coalitions=coalitions,
        with_index=index[:, 0], without_index=index[:, 1], player=player[first],
        weight=merged, efficient=efficient, budget=budget, seed=seed,
        sampled=replicates is not None, replicates=replicates,
    )

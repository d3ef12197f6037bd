"""A coalition design: which coalitions to evaluate, and a linear map from their values to φ.

Every method offered is linear in the game, so one design applied to the calibration, instance
and total games gives φ_T = φ_C + φ_I exactly (method page §5). Two forms share one interface:

* `TermDesign` stores the map as weighted marginal contributions,
  φ_j = Σ w · (v(with) − v(without)), the way Shapley-type values are defined: a player that
  never changes the game gets exactly 0.0, not a rounding residue (exact and permutation
  Shapley, Banzhaf, leave-one-out, shap's PermutationExplainer);
* `MatrixDesign` stores a dense (n_coalitions, n_players) matrix, φ = v @ W, for estimators
  that are a linear solve of the values (KernelSHAP, shap's KernelExplainer).

A sampled design also knows its Monte Carlo standard errors: `standard_errors(values)` has the
shape of `apply(values)` and is None for a design with nothing random in it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property

import numba
import numpy as np
from numba import njit, prange
from scipy import sparse

from core.coalitions import packed, row_keys, unique_coalitions
from core.parallel import parallel_section
from core.typing import Coalitions, FloatArray

ROWS_PER_BLOCK = 256
"""Games (patients) per block when applying a design, to bound the (games × terms) buffer."""


@dataclass(frozen=True, eq=False, kw_only=True)
class Design(ABC):
    """Coalitions (n_coalitions, n_columns) and a linear map from their values to attributions."""

    method: str
    coalitions: Coalitions
    efficient: bool
    """True when Σφ = v(all players) − v(no player) for every game."""
    budget: int | None = None
    """The budget actually spent, in the method's unit (see BUDGET_UNITS); None when unbudgeted."""
    seed: int | None = None
    sampled: bool = False
    """True when the map depends on random draws: it then has standard errors."""
    groups: tuple[tuple[int, ...], ...] | None = None
    """Columns of each player when players are feature groups; None when player = column."""

    @property
    def n_players(self) -> int:
        """Number of attributions per game (features, or groups of them)."""
        return self.coalitions.shape[1] if self.groups is None else len(self.groups)

    @property
    def n_evaluations(self) -> int:
        """Coalitions each game is evaluated on: the real cost of the design."""
        return len(self.coalitions)

    @abstractmethod
    def apply(self, values: FloatArray) -> FloatArray:
        """Attributions (..., n_players) of game values (..., n_coalitions)."""

    @abstractmethod
    def weight_matrix(self) -> FloatArray:
        """The same map as a dense (n_coalitions, n_players) matrix: φ = v @ W."""

    def standard_errors(self, values: FloatArray) -> FloatArray | None:
        """Monte Carlo standard errors (..., n_players) of `apply(values)`; None if not sampled."""
        return None

    def apply_offset(self, offset: FloatArray, values: FloatArray) -> tuple[FloatArray, FloatArray]:
        """(apply(values), apply(offset + values)) for games (n_games, n_coalitions) and one
        game `offset` (n_coalitions,): the instance and total games of a cohort at once."""
        return self.apply(values), self.apply(offset[None, :] + values)

    def index_of(self, members: np.ndarray) -> int:
        """Row of the coalition with exactly these members (a mask over columns)."""
        hits = np.flatnonzero((self.coalitions == members[None, :]).all(axis=1))
        if hits.size == 0:
            raise KeyError("coalition not in design")
        return int(hits[0])

    @cached_property
    def full_index(self) -> int:
        return self.index_of(np.ones(self.coalitions.shape[1], dtype=bool))

    @cached_property
    def empty_index(self) -> int:
        return self.index_of(np.zeros(self.coalitions.shape[1], dtype=bool))


def as_games(values: FloatArray) -> tuple[FloatArray, tuple[int, ...]]:
    """Values as a 2-D (games, n_coalitions) array, and the leading shape to restore."""
    values = np.asarray(values, dtype=float)
    return values.reshape(-1, values.shape[-1]), values.shape[:-1]


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


MAX_GAMES_PER_BLOCK = 64
"""Games whose values are transposed into one (coalitions × games) block: each term's indices
and weight are then read once for all of them, and their differences are vector operations."""
CELLS_PER_BLOCK = 1 << 18
"""(coalitions × games) cells of one block (2 MiB), which bounds the block at large d."""
SERIAL_GAMES = 2
"""Up to this many games the terms run on the calling thread (no thread wake-up)."""


@njit(cache=True, nogil=True)
def _terms_block(values, offset, lo, hi, plain, shifted, with_index, without_index, player,
                 weight):
    """φ[g, j] = Σ over terms of j of w (v[g, with] − v[g, without]) for games lo..hi.

    With a non-empty `offset` (one game over the same coalitions), `shifted` gets the same for
    the games offset + v[g], formed here exactly as numpy would add them, in the same pass over
    the terms. Each term is added on its own, in a fixed order: a player whose values never
    change a game contributes exact zeros, and a game's result does not depend on its block.
    """
    width = hi - lo
    n_coalitions = values.shape[1]
    n_players = plain.shape[1]
    both = offset.size > 0
    if width == 1:
        _terms_one(values[lo], offset, plain[lo], shifted[lo] if both else plain[lo],
                   with_index, without_index, player, weight)
        return
    block = np.empty((n_coalitions, width))
    total = np.empty((n_coalitions if both else 0, width))
    for c in range(n_coalitions):
        for i in range(width):
            block[c, i] = values[lo + i, c]
            if both:
                total[c, i] = offset[c] + values[lo + i, c]
    sums = np.zeros((n_players, width))
    total_sums = np.zeros((n_players, width))
    for t in range(player.size):
        w, a, b, j = weight[t], with_index[t], without_index[t], player[t]
        for i in range(width):
            sums[j, i] += w * (block[a, i] - block[b, i])
        if both:
            for i in range(width):
                total_sums[j, i] += w * (total[a, i] - total[b, i])
    for i in range(width):
        for j in range(n_players):
            plain[lo + i, j] = sums[j, i]
            if both:
                shifted[lo + i, j] = total_sums[j, i]


@njit(cache=True, nogil=True)
def _terms_one(row, offset, plain, shifted, with_index, without_index, player, weight):
    """_terms_block for one game, summing in registers (the same terms in the same order).

    A running sum held in memory waits on its own store at every term; in a register the two
    sums (plain and shifted) are two short dependency chains, several times faster.
    """
    both = offset.size > 0
    plain[:] = 0.0
    shifted[:] = 0.0
    current = player[0] if player.size else 0
    acc = 0.0
    acc_shifted = 0.0
    for t in range(player.size):
        j = player[t]
        if j != current:  # terms of one player are contiguous in a design; resume otherwise
            plain[current] = acc
            acc = plain[j]
            if both:
                shifted[current] = acc_shifted
                acc_shifted = shifted[j]
            current = j
        w, a, b = weight[t], with_index[t], without_index[t]
        acc += w * (row[a] - row[b])
        if both:
            acc_shifted += w * ((offset[a] + row[a]) - (offset[b] + row[b]))
    if player.size:
        plain[current] = acc
        if both:
            shifted[current] = acc_shifted


@njit(cache=True)
def _terms_serial(values, offset, with_index, without_index, player, weight, n_players, width):
    n = values.shape[0]
    plain, shifted = np.empty((n, n_players)), np.empty((n if offset.size else 0, n_players))
    for lo in range(0, n, width):
        _terms_block(values, offset, lo, min(n, lo + width), plain, shifted,
                     with_index, without_index, player, weight)
    return plain, shifted


@njit(cache=True, parallel=True)
def _terms_parallel(values, offset, with_index, without_index, player, weight, n_players,
                    width):
    n = values.shape[0]
    plain, shifted = np.empty((n, n_players)), np.empty((n if offset.size else 0, n_players))
    n_blocks = (n + width - 1) // width
    for block in prange(n_blocks):
        lo = block * width
        _terms_block(values, offset, lo, min(n, lo + width), plain, shifted,
                     with_index, without_index, player, weight)
    return plain, shifted


def _apply_terms(values: FloatArray, offset: FloatArray, design: TermDesign
                 ) -> tuple[FloatArray, FloatArray]:
    """(φ of each game, φ of offset + each game); the second is empty without an offset.

    Blocks are as wide as memory allows, but leave every thread a block.
    """
    n_games, n_coalitions = values.shape
    per_thread = -(-n_games // numba.get_num_threads())
    width = max(1, min(MAX_GAMES_PER_BLOCK, CELLS_PER_BLOCK // max(n_coalitions, 1), per_thread))
    indices = design.compact_terms
    arguments = (np.ascontiguousarray(values, dtype=np.float64),
                 np.ascontiguousarray(offset, dtype=np.float64), *indices, design.n_players,
                 width)
    if n_games <= SERIAL_GAMES:
        return _terms_serial(*arguments)
    with parallel_section():
        return _terms_parallel(*arguments)


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
        plain, _ = _apply_terms(flat, np.empty(0), self)
        return plain.reshape((*lead, self.n_players))

    def apply_offset(self, offset: FloatArray, values: FloatArray) -> tuple[FloatArray, FloatArray]:
        flat, _ = as_games(values)
        return _apply_terms(flat, offset, self)

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


@dataclass(frozen=True, eq=False, kw_only=True)
class MatrixDesign(Design):
    """A dense map φ = v @ matrix, (n_coalitions, n_players)."""

    matrix: FloatArray

    def apply(self, values: FloatArray) -> FloatArray:
        flat, lead = as_games(values)
        return (flat @ self.matrix).reshape((*lead, self.n_players))

    def weight_matrix(self) -> FloatArray:
        return self.matrix.copy()


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

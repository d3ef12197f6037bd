"""Pairwise Shapley interaction values of a game, from its exact lattice of 2^d values.

Two indices of order 2, both linear in the game (so the calibration and instance games' values
add up to the total game's, pair by pair, as the Shapley values do: method page §5):

* SII, the Shapley interaction index (Grabisch and Roubens 1999): for a pair {i, j},

      I_ij = Σ over S ⊆ N \\ {i, j} of  |S|! (d − |S| − 2)! / (d − 1)!  · Δ_ij(S),
      Δ_ij(S) = v(S ∪ {i, j}) − v(S ∪ {i}) − v(S ∪ {j}) + v(S),

  the Shapley-weighted average of how much i and j together change v beyond their separate
  changes. Its order-1 value is the Shapley value φ_i.
* k-SII at k = 2 (Bordt and von Luxburg 2023, as shapiq computes it): the pairs keep I_ij and
  each player's main effect becomes φ_i − ½ Σ_{j ≠ i} I_ij (the Bernoulli number B_1 = −½), so
  that Σ main effects + Σ pairs = v(N) − v(∅), the way Shapley values are efficient.

Matrix convention (one for both indices): a symmetric (d, d) matrix with the pair's full value
in both [i, j] and [j, i] (not halved, unlike shap's TreeExplainer interaction values) and the
index's own order-1 value on the diagonal: φ_i for SII, the main effect for k-SII.

The lattice is indexed by bitmask: value[..., b] is v of the coalition whose player j is bit j.
"""

from __future__ import annotations

from math import factorial
from typing import Literal

import numpy as np
from numba import njit

from cpdecomp.core.attribution.exact import MAX_EXACT_PLAYERS
from cpdecomp.core.coalitions import bits_from_coalitions
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.typing import Coalitions, FloatArray

InteractionIndex = Literal["SII", "k-SII"]
INDICES: tuple[InteractionIndex, ...] = ("SII", "k-SII")


def check_interaction_players(n_players: int) -> None:
    """Interactions need every coalition's value: refuse past the exact method's limit."""
    if n_players > MAX_EXACT_PLAYERS:
        raise CpdecompError(
            f"interaction values are computed from the exact lattice of all 2^d coalitions, "
            f"which is limited to {MAX_EXACT_PLAYERS} features or feature groups (got "
            f"{n_players}); choose fewer features or group them with --group"
        )
    if n_players < 2:
        raise CpdecompError("interaction values need at least two features or feature groups")


def check_index(index: str) -> InteractionIndex:
    if index not in INDICES:
        raise CpdecompError(f"unknown interaction index {index!r}; choose one of "
                            f"{', '.join(INDICES)}")
    return index


def pair_weight(size: int, n_players: int) -> float:
    """|S|!(d − |S| − 2)!/(d − 1)!: the weight of Δ_ij(S) in SII."""
    return factorial(size) * factorial(n_players - size - 2) / factorial(n_players - 1)


def pairs(n_players: int) -> tuple[np.ndarray, np.ndarray]:
    """(first, second) players of every pair i < j, in row-major order."""
    first, second = np.triu_indices(n_players, k=1)
    return first.astype(np.int64), second.astype(np.int64)


def lattice_order(coalitions: Coalitions) -> np.ndarray:
    """Row of each bitmask b = 0 .. 2^d − 1 among `coalitions` (players as columns).

    Refuses coalitions that are not exactly the whole lattice: interactions need every value.
    """
    bits = bits_from_coalitions(coalitions)
    order = np.argsort(bits, kind="stable")
    if not np.array_equal(bits[order], np.arange(1 << coalitions.shape[1])):
        raise CpdecompError("interaction values need the values of all 2^d coalitions")
    return order


def pairwise_sii(lattice: FloatArray) -> FloatArray:
    """I_ij (..., n_pairs) of games given as lattices (..., 2^d), pairs as in `pairs(d)`.

    Each Δ_ij(S) is formed as (v(S∪ij) − v(S∪i)) − (v(S∪j) − v(S)): a pair with a player that
    never changes the game gets exactly 0.0, not a rounding residue.
    """
    values = np.asarray(lattice, dtype=float)
    lead, n_coalitions = values.shape[:-1], values.shape[-1]
    d = int(n_coalitions).bit_length() - 1
    if n_coalitions != 1 << d or d < 2:
        raise ValueError(f"a lattice has 2^d values with d ≥ 2, not {n_coalitions}")
    games = np.ascontiguousarray(values.reshape(-1, n_coalitions))
    weights = np.array([pair_weight(s, d) for s in range(d - 1)])
    sizes = np.bitwise_count(np.arange(n_coalitions, dtype=np.int64))
    first, second = pairs(d)
    out = _pair_sums(games, first, second, weights[np.minimum(sizes, d - 2)])
    return out.reshape((*lead, len(first)))


@njit(cache=True, nogil=True)
def _pair_sums(games, first, second, weight_of_subset):
    """out[g, p] = Σ over S lacking both players of pair p of w(|S|) Δ_ij(S) of game g.

    One game at a time, each sum in the same order: a patient's values do not depend on the
    other games in its batch (numpy's vector sums are ordered by the batch's shape).
    """
    n_games, n_coalitions = games.shape
    out = np.empty((n_games, first.size))
    for g in range(n_games):
        row = games[g]
        for p in range(first.size):
            bit_i, bit_j = 1 << first[p], 1 << second[p]
            both = bit_i | bit_j
            acc = 0.0
            for s in range(n_coalitions):
                if s & both:
                    continue
                gain = (row[s | both] - row[s | bit_i]) - (row[s | bit_j] - row[s])
                acc += weight_of_subset[s] * gain
            out[g, p] = acc
    return out


def interaction_matrices(pair_values: FloatArray, shapley: FloatArray,
                         index: InteractionIndex) -> FloatArray:
    """Symmetric (..., d, d) matrices from pair values (..., n_pairs) and Shapley values
    (..., d), with the index's order-1 values on the diagonal (see the module's convention)."""
    pair_values = np.asarray(pair_values, dtype=float)
    shapley = np.asarray(shapley, dtype=float)
    d = shapley.shape[-1]
    first, second = pairs(d)
    matrices = np.zeros((*shapley.shape[:-1], d, d))
    matrices[..., first, second] = pair_values
    matrices[..., second, first] = pair_values
    diagonal = shapley if index == "SII" else shapley - 0.5 * matrices.sum(axis=-1)
    players = np.arange(d)
    matrices[..., players, players] = diagonal
    return matrices

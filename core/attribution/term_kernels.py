"""The numba kernels that apply a term design to many games at once.

Games are taken in blocks transposed to (coalitions × games), so each term's indices and weight
are read once per block and its differences are vector operations; the instance and total
games of a cohort (offset + each game) come out of one pass.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from cpdecomp.core.parallel import parallel_section
from cpdecomp.core.typing import FloatArray

ROWS_PER_BLOCK = 256
"""Games (patients) per block when applying a design, to bound the (games × terms) buffer."""

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


def apply_terms(values: FloatArray, offset: FloatArray,
                terms: tuple[np.ndarray, np.ndarray, np.ndarray, FloatArray], n_players: int
                ) -> tuple[FloatArray, FloatArray]:
    """(φ of each game, φ of offset + each game); the second is empty without an offset.
    `terms`: (with, without, player, weight) of a term design (TermDesign.compact_terms).

    Blocks are as wide as memory allows, but leave every thread a block.
    """
    n_games, n_coalitions = values.shape
    per_thread = -(-n_games // numba.get_num_threads())
    width = max(1, min(MAX_GAMES_PER_BLOCK, CELLS_PER_BLOCK // max(n_coalitions, 1), per_thread))
    arguments = (np.ascontiguousarray(values, dtype=np.float64),
                 np.ascontiguousarray(offset, dtype=np.float64), *terms, n_players, width)
    if n_games <= SERIAL_GAMES:
        return _terms_serial(*arguments)
    with parallel_section():
        return _terms_parallel(*arguments)

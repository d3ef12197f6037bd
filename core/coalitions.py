"""Coalitions as boolean masks, their keys, and integer bitmasks: the one home of the conversion.

A coalition is a boolean row over players (True: the player keeps the patient's value); the
designs, games and tree tables pass coalitions in this form, which has no width limit. Where a
coalition must be found again (merging a design's repeated terms, looking up a coalition's
parent) it is keyed by its packed bytes (`coalition_keys`), which sort in the order of the
integer bitmasks they stand for (player j is bit j): designs come out in the same order
whatever their width. Integer bitmasks remain only where a coalition indexes the full lattice
of 2^d values (d ≤ 16: exact Shapley, the tree tables' lattice, interactions); they hold at most
MAX_PLAYERS players (bit 63 is the sign, and one more bit of headroom keeps `(1 << n) - 1`
positive).
"""

from __future__ import annotations

import numpy as np

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.typing import Coalitions

MAX_PLAYERS = 62
"""Players an int64 bitmask can hold with `(1 << n) - 1` still positive."""


def check_bit_players(n_players: int, what: str = "this method") -> None:
    """Refuse more players than a bitmask holds, naming who refuses."""
    if n_players > MAX_PLAYERS:
        raise CpdecompError(f"{what} supports at most {MAX_PLAYERS} features or feature groups "
                            f"(got {n_players}); group features with --group to use fewer")


def bits_from_coalitions(coalitions: Coalitions) -> np.ndarray:
    """Integer bitmasks (player j is bit j) of boolean masks; refused past MAX_PLAYERS.

    Refused rather than wrapped: past 63 players the shifts overflow silently, and every
    coalition the overflow merges gets another coalition's value.
    """
    coalitions = np.asarray(coalitions, dtype=bool)
    check_bit_players(coalitions.shape[1], "a coalition bitmask")
    return coalitions.astype(np.int64) @ (np.int64(1) << np.arange(coalitions.shape[1],
                                                                   dtype=np.int64))


def coalitions_from_bits(bits: np.ndarray, n_players: int) -> Coalitions:
    """Boolean masks from integer bitmasks (player j is bit j)."""
    check_bit_players(n_players, "a coalition bitmask")
    return ((np.asarray(bits, dtype=np.int64)[:, None] >> np.arange(n_players)) & 1).astype(bool)


def packed(coalitions: Coalitions) -> np.ndarray:
    """(n, ⌈d/8⌉) uint8: each row's players, the last player first, eight to a byte.

    Byte order is bitmask order: comparing two rows byte by byte compares the integers whose
    bit j is player j (the zero padding sits at the low end, the same for every row).
    """
    coalitions = np.asarray(coalitions, dtype=bool)
    return np.ascontiguousarray(np.packbits(coalitions[:, ::-1], axis=1))


def row_keys(rows: np.ndarray) -> np.ndarray:
    """(n,) void keys of uint8 rows (n, width ≥ 1): sortable byte strings, one per row."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    return rows.view(np.dtype((np.void, rows.shape[1]))).ravel()


def coalition_keys(coalitions: Coalitions) -> np.ndarray:
    """(n,) keys of boolean masks, sorting as their integer bitmasks would (any width)."""
    return row_keys(packed(coalitions))


def unique_coalitions(coalitions: Coalitions) -> tuple[Coalitions, np.ndarray]:
    """(distinct coalitions in bitmask order, row of each given coalition among them)."""
    coalitions = np.asarray(coalitions, dtype=bool)
    _, first, inverse = np.unique(coalition_keys(coalitions), return_index=True,
                                  return_inverse=True)
    return coalitions[first], inverse.ravel().astype(np.int64)


def column_players(coalitions: Coalitions) -> tuple[np.ndarray, Coalitions]:
    """The coarsest players the coalitions' columns form, and the coalitions over them.

    Columns that every coalition keeps or drops together (a feature group's columns) act as
    one player: a masked value depends only on which columns keep the patient's value, so
    evaluating coalitions over these players is exact for every coalition given. Returns
    (player of each column, coalitions over the players); players are numbered in the order
    of their first column, so columns that are all distinct map to themselves.
    """
    coalitions = np.asarray(coalitions, dtype=bool)
    _, first, inverse = np.unique(coalitions.T, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    order = np.argsort(first, kind="stable")  # unique's lexicographic order → first-column order
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    player_of_column = rank[inverse].astype(np.int64)
    return player_of_column, coalitions[:, np.sort(first)]

"""Coalitions as boolean masks and as integer bitmasks: the one home of the conversion.

A coalition is a boolean row over players (True: the player keeps the patient's value). The
designs and the tree tables also index coalitions by bitmask (player j is bit j) in int64, so
a bitmask holds at most MAX_PLAYERS players: bit 63 is the sign, and one more bit of headroom
keeps `(1 << n) - 1` (the full coalition) positive.
"""

from __future__ import annotations

import numpy as np

from core.errors import CpdecompError
from core.typing import Coalitions

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

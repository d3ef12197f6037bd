"""Tree tables: every coalition's masked prediction of a tree ensemble, without hybrid rows.

For prediction = base + Σ_L v_L 1[x reaches L], with path players F_L, the cell C_j of each
path player, and A_L(x) = the path players whose cell holds x_j (performance page):

    g_S(x) = base + Σ_L v_L · 1[S ∩ F_L ⊆ A_L(x)] · P_L(F_L ∖ S)

P_L(U) is the share of background rows inside the cells of all players in U: tabulated once per
model and background (a histogram of cell patterns, then superset sums). Per row, leaves that
share F_L share a buffer t(T) = Σ v_L 1[T ⊆ A_L] P_L(F_L ∖ T); a Möbius transform of each
buffer, scattered into the 2^d lattice, and one subset-sum transform give g_S for all S at
once. Above MAX_LATTICE_PLAYERS the buffers are read per coalition instead.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from core.games.tree_extract import LEFT, MISSING, LeafEnsemble
from core.typing import FloatArray

MAX_LATTICE_PLAYERS = 16
MAX_PATH_PLAYERS = 20
"""A leaf whose path uses more players than this is refused (2^k tables per leaf)."""


class TreeTables:
    """Exact masked predictions of one tree ensemble over one background."""

    def __init__(self, ensemble: LeafEnsemble, background: FloatArray, n_players: int) -> None:
        self.n_players = n_players
        self.base = ensemble.base
        self._flatten(ensemble)
        self.probabilities = _probability_tables(
            np.ascontiguousarray(background, dtype=np.float64), self._paths(),
            self.table_start, int(self.table_start[-1]),
        )

    def _flatten(self, ensemble: LeafEnsemble) -> None:
        group_of: dict[tuple[int, ...], int] = {}
        group_players: list[tuple[int, ...]] = []
        leaf_group, leaf_k, cond_start = [], [], [0]
        cond_player, cond_local, cond_categorical, cond_threshold = [], [], [], []
        cond_missing_left, cond_code_row, cond_go_left, code_rows = [], [], [], []
        cond_single = []
        for conditions in ensemble.conditions:
            players = tuple(sorted({c.player for c in conditions}))
            if len(players) > MAX_PATH_PLAYERS:
                raise ValueError(f"a leaf splits on {len(players)} features; too deep to tabulate")
            if players not in group_of:
                group_of[players] = len(group_players)
                group_players.append(players)
            leaf_group.append(group_of[players])
            leaf_k.append(len(players))
            local = {p: i for i, p in enumerate(players)}
            for c in conditions:
                cond_player.append(c.player)
                cond_local.append(local[c.player])
                cond_categorical.append(c.categorical)
                cond_threshold.append(c.threshold)
                cond_missing_left.append(c.missing_left)
                cond_go_left.append(c.go_left)
                cond_single.append(c.single_precision)
                if c.categorical:
                    cond_code_row.append(len(code_rows))
                    code_rows.append(c.codes)
                else:
                    cond_code_row.append(-1)
            cond_start.append(len(cond_player))
        self.leaf_value = np.asarray(ensemble.values, dtype=np.float64)
        self.leaf_group = np.array(leaf_group, dtype=np.int64)
        self.leaf_k = np.array(leaf_k, dtype=np.int64)
        self.cond_start = np.array(cond_start, dtype=np.int64)
        self.cond_player = np.array(cond_player, dtype=np.int64)
        self.cond_local = np.array(cond_local, dtype=np.int64)
        self.cond_categorical = np.array(cond_categorical, dtype=np.bool_)
        self.cond_threshold = np.array(cond_threshold, dtype=np.float64)
        self.cond_missing_left = np.array(cond_missing_left, dtype=np.bool_)
        self.cond_code_row = np.array(cond_code_row, dtype=np.int64)
        self.cond_go_left = np.array(cond_go_left, dtype=np.bool_)
        self.cond_single = np.array(cond_single, dtype=np.bool_)
        self.code_table = (np.array(code_rows, dtype=np.uint8) if code_rows
                           else np.zeros((1, 256), dtype=np.uint8))
        self.table_start = np.concatenate([[0], np.cumsum(1 << self.leaf_k)]).astype(np.int64)
        sizes = np.array([1 << len(p) for p in group_players], dtype=np.int64)
        self.group_start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.group_k = np.array([len(p) for p in group_players], dtype=np.int64)
        self.group_player_start = np.concatenate(
            [[0], np.cumsum([len(p) for p in group_players])]).astype(np.int64)
        self.group_players = np.array([q for p in group_players for q in p], dtype=np.int64)
        # Global coalition bitmask of every local subset of every group.
        global_masks = np.zeros(int(self.group_start[-1]), dtype=np.int64)
        for g, players in enumerate(group_players):
            local = np.arange(1 << len(players))
            bits = np.zeros(local.size, dtype=np.int64)
            for i, p in enumerate(players):
                bits |= ((local >> i) & 1) << p
            global_masks[self.group_start[g]:self.group_start[g + 1]] = bits
        self.group_global = global_masks

    def _paths(self) -> tuple:
        """Each leaf's path conditions, as one tuple for the compiled kernels."""
        return (self.leaf_k, self.cond_start, self.cond_player, self.cond_local,
                self.cond_categorical, self.cond_threshold, self.cond_missing_left,
                self.cond_code_row, self.code_table, self.cond_go_left, self.cond_single)

    def lattice(self, rows: FloatArray) -> FloatArray:
        """(n_rows, 2^d): g_S(row) for every coalition S (bit j of the index = player j)."""
        if self.n_players > MAX_LATTICE_PLAYERS:
            raise ValueError("too many players for the full lattice; ask for coalitions")
        return _lattice_values(
            np.ascontiguousarray(rows, dtype=np.float64), self.n_players, self.base,
            self.leaf_value, self.leaf_group, self._paths(), self.table_start,
            self.probabilities, self.group_start, self.group_k, self.group_global,
        )

    def predict(self, rows: FloatArray) -> FloatArray:
        """The plain prediction (every feature kept): the leaves each row reaches, summed.

        Equal to the model's own predict to rounding, without its per-call overhead (input
        validation, thread start-up), which dominates when one patient is explained.
        """
        return _plain_values(np.ascontiguousarray(rows, dtype=np.float64), self.base,
                             self.leaf_value, self._paths())

    def coalition_values(self, rows: FloatArray, coalitions: np.ndarray) -> FloatArray:
        """(n_coalitions, n_rows) masked predictions for boolean coalition masks."""
        bits = (coalitions.astype(np.int64) << np.arange(self.n_players)).sum(axis=1)
        if self.n_players <= MAX_LATTICE_PLAYERS:
            return np.ascontiguousarray(self.lattice(rows)[:, bits].T)
        return _coalition_values(
            np.ascontiguousarray(rows, dtype=np.float64), bits, self.base, self.leaf_value,
            self.leaf_group, self._paths(), self.table_start, self.probabilities,
            self.group_start, self.group_k, self.group_player_start, self.group_players,
        ).T.copy()


@njit(cache=True, nogil=True)
def _cell_pattern(row, leaf, paths):
    """Bitmask (local) of the leaf's path players whose cell holds the row's value."""
    (leaf_k, cond_start, cond_player, cond_local, cond_categorical, cond_threshold,
     cond_missing_left, cond_code_row, code_table, cond_go_left, cond_single) = paths
    pattern = (1 << leaf_k[leaf]) - 1
    for c in range(cond_start[leaf], cond_start[leaf + 1]):
        value = row[cond_player[c]]
        if np.isnan(value):
            goes_left = cond_missing_left[c]
        elif cond_categorical[c]:
            if value < 0 or value >= 256:
                goes_left = cond_missing_left[c]
            else:
                code = code_table[cond_code_row[c], int(value)]
                goes_left = cond_missing_left[c] if code == MISSING else code == LEFT
        elif cond_single[c]:
            goes_left = np.float32(value) <= cond_threshold[c]
        else:
            goes_left = value <= cond_threshold[c]
        if goes_left != cond_go_left[c]:
            pattern &= ~(1 << cond_local[c])
    return pattern


@njit(cache=True, parallel=True)
def _plain_values(rows, base, leaf_value, paths):
    leaf_k = paths[0]
    out = np.empty(rows.shape[0])
    for r in prange(rows.shape[0]):
        total = base
        for leaf in range(leaf_value.size):
            if _cell_pattern(rows[r], leaf, paths) == (1 << leaf_k[leaf]) - 1:
                total += leaf_value[leaf]
        out[r] = total
    return out


@njit(cache=True, parallel=True)
def _probability_tables(background, paths, table_start, total):
    """P_L(U) for every leaf L and every subset U of its path players."""
    tables = np.zeros(total)
    leaf_k = paths[0]
    n_background = background.shape[0]
    for leaf in prange(leaf_k.size):
        size = 1 << leaf_k[leaf]
        start = table_start[leaf]
        for b in range(n_background):
            pattern = _cell_pattern(background[b], leaf, paths)
            tables[start + pattern] += 1.0
        # Superset sums: the count of rows whose pattern contains U.
        for bit in range(leaf_k[leaf]):
            step = 1 << bit
            for mask in range(size):
                if not mask & step:
                    tables[start + mask] += tables[start + (mask | step)]
        for mask in range(size):
            tables[start + mask] /= n_background
    return tables


@njit(cache=True, nogil=True)
def _fill_buffers(row, buffers, leaf_value, leaf_group, paths, table_start, probabilities,
                  group_start):
    """t_g(T) = Σ over leaves of group g of v_L 1[T ⊆ A_L(row)] P_L(F_L ∖ T)."""
    buffers[:] = 0.0
    leaf_k = paths[0]
    for leaf in range(leaf_value.size):
        reach = _cell_pattern(row, leaf, paths)
        full = (1 << leaf_k[leaf]) - 1
        offset = group_start[leaf_group[leaf]]
        start = table_start[leaf]
        value = leaf_value[leaf]
        subset = reach
        while True:  # every subset of the reached players
            buffers[offset + subset] += value * probabilities[start + (full ^ subset)]
            if subset == 0:
                break
            subset = (subset - 1) & reach


@njit(cache=True, parallel=True)
def _lattice_values(rows, n_players, base, leaf_value, leaf_group, paths, table_start,
                    probabilities,
                    group_start, group_k, group_global):
    n_subsets = 1 << n_players
    out = np.empty((rows.shape[0], n_subsets))
    for r in prange(rows.shape[0]):
        buffers = np.empty(group_start[-1])
        _fill_buffers(rows[r], buffers, leaf_value, leaf_group, paths, table_start, probabilities,
                      group_start)
        lattice = np.zeros(n_subsets)
        for g in range(group_k.size):
            offset = group_start[g]
            size = 1 << group_k[g]
            for bit in range(group_k[g]):  # Möbius transform of the group's buffer
                step = 1 << bit
                for mask in range(size):
                    if mask & step:
                        buffers[offset + mask] -= buffers[offset + (mask ^ step)]
            for mask in range(size):
                lattice[group_global[offset + mask]] += buffers[offset + mask]
        for bit in range(n_players):  # subset sums over all players
            step = 1 << bit
            for mask in range(n_subsets):
                if mask & step:
                    lattice[mask] += lattice[mask ^ step]
        for mask in range(n_subsets):
            out[r, mask] = base + lattice[mask]
    return out


@njit(cache=True, parallel=True)
def _coalition_values(rows, coalition_bits, base, leaf_value, leaf_group, paths, table_start,
                      probabilities, group_start, group_k, group_player_start, group_players):
    out = np.empty((rows.shape[0], coalition_bits.size))
    for r in prange(rows.shape[0]):
        buffers = np.empty(group_start[-1])
        _fill_buffers(rows[r], buffers, leaf_value, leaf_group, paths, table_start, probabilities,
                      group_start)
        for c in range(coalition_bits.size):
            bits = coalition_bits[c]
            total = base
            for g in range(group_k.size):
                local = 0
                for i in range(group_k[g]):
                    if (bits >> group_players[group_player_start[g] + i]) & 1:
                        local |= 1 << i
                total += buffers[group_start[g] + local]
            out[r, c] = total
    return out

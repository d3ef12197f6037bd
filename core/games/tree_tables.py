"""Tree tables: every coalition's masked prediction of a tree ensemble, without hybrid rows.

For prediction = base + Σ_L v_L 1[x reaches L], with path players F_L, the cell C_j of each
path player, and A_L(x) = the path players whose cell holds x_j (performance page):

    g_S(x) = base + Σ_L v_L · 1[S ∩ F_L ⊆ A_L(x)] · P_L(F_L ∖ S)

P_L(U) is the share of background rows inside the cells of all players in U: tabulated once per
model and background (a histogram of cell patterns, then superset sums), and kept premultiplied
as the leaf's terms Q_L(T) = v_L P_L(F_L ∖ T). Per row, leaves that share F_L share a buffer
t(T) = Σ 1[T ⊆ A_L] Q_L(T); a Möbius transform of each buffer, scattered into the 2^d lattice,
and one subset-sum transform give g_S for all S at once. Above MAX_LATTICE_PLAYERS the buffers
are read per coalition instead.

Speed (the per-patient cost of the instance game is this kernel): every distinct split test is
evaluated once per row and each leaf's A_L is read off those answers; leaves are visited group by
group, so one small buffer per thread serves every group and stays in the L1 cache; the
transforms work on contiguous halves (vectorised) after a radix-4 first pass; one row or two run
on the calling thread, because waking the worker threads costs more than the row.

This module builds the tables (flattening the ensemble into records, grouping leaves, working
out a design's reads); the compiled kernels and their records are in core.games.tree_kernels.
"""

from __future__ import annotations

from math import factorial

import numba
import numpy as np

from cpdecomp.core.bounded import BoundedCache
from cpdecomp.core.coalitions import bits_from_coalitions, packed, row_keys
from cpdecomp.core.games.tree_kernels import (
    Failures,
    LeafGroups,
    LeafPaths,
    SplitTests,
    TreeWalks,
    _coalition_values,
    _group_shapley,
    _lattice_parallel,
    _lattice_serial,
    _leaf_terms,
    _offsets_of,
    _plain_parallel,
    _plain_serial,
    _probability_tables,
)
from cpdecomp.core.games.tree_records import Condition, LeafEnsemble
from cpdecomp.core.parallel import parallel_section
from cpdecomp.core.typing import Coalitions, FloatArray

MAX_LATTICE_PLAYERS = 16
MAX_PATH_PLAYERS = 20
"""A leaf whose path uses more players than this is refused (2^k tables per leaf)."""
HOST_EXTRA_PLAYERS = 1
"""A group of leaves may join a group with this many more players (see _host_groups); more
cut the groups further but enlarge the fill as much as they save (measured at d = 12)."""
SERIAL_ROWS = 2
"""Up to this many rows the kernels run on the calling thread (no thread wake-up)."""
BLOCKS_PER_THREAD = 4
"""Row blocks per worker thread: each block reuses its buffers for all of its rows."""
OFFSET_TABLES_KEPT = 4
"""Coalition designs whose lattice indices or per-group buffer offsets are remembered (a few
are in use at once)."""


def _test_key(condition: Condition) -> tuple:
    """What decides a split's answer (not its direction): equal keys give equal answers."""
    codes = None if condition.codes is None else condition.codes.tobytes()
    return (condition.player, condition.categorical, condition.threshold,
            condition.missing_left, condition.single_precision, codes)


class TreeTables:
    """Exact masked predictions of one tree ensemble over one background.

    Players are the columns, or groups of columns given by `player_of_column`: a split on
    column j is then a split on player player_of_column[j], and a player's cell on a leaf's
    path is the conjunction of the cells of its columns. Bitmasks are local to a group of
    leaves (at most MAX_PATH_PLAYERS bits, local bit i = the group's i-th player), so the
    number of players is not limited; only the full lattice (≤ MAX_LATTICE_PLAYERS players)
    indexes coalitions by a global bitmask.
    """

    def __init__(self, ensemble: LeafEnsemble, background: FloatArray, n_players: int,
                 player_of_column: np.ndarray | None = None) -> None:
        self.n_players = n_players
        self.base = ensemble.base
        self._flatten(ensemble, player_of_column)
        with parallel_section():
            probabilities = _probability_tables(
                np.ascontiguousarray(background, dtype=np.float64), self.tests, self.paths,
                int(self.table_start[-1]),
            )
        self.terms = _leaf_terms(probabilities, self.leaf_value, self.paths)
        """Q_L(T) = v_L P_L(F_L ∖ T) for every leaf L and subset T of its path players."""

    def _flatten(self, ensemble: LeafEnsemble, player_of_column: np.ndarray | None) -> None:
        tests: dict[tuple, int] = {}
        test_of: dict[int, int] = {}  # by id: leaves share their path prefix's Condition objects
        test_rows: list[Condition] = []
        # Conditions keep reading their column (c.player); paths and bits use its player.
        player_of = (list(range(self.n_players)) if player_of_column is None
                     else [int(p) for p in player_of_column])
        if max(player_of, default=-1) >= self.n_players:
            raise ValueError("a column maps to a player outside the tables' players")
        path_players = [tuple(sorted({player_of[c.player] for c in conditions}))
                        for conditions in ensemble.conditions]
        if any(len(players) > MAX_PATH_PLAYERS for players in path_players):
            deepest = max(len(players) for players in path_players)
            raise ValueError(f"a leaf splits on {deepest} features; too deep to tabulate")
        host = _host_groups(path_players)
        group_of: dict[tuple[int, ...], int] = {}
        group_players: list[tuple[int, ...]] = []
        leaf_group, leaf_k, cond_start = [], [], [0]
        cond_test, cond_bit, cond_go_left = [], [], []
        for conditions, own in zip(ensemble.conditions, path_players, strict=True):
            players = host[own]
            group = group_of.setdefault(players, len(group_players))
            if group == len(group_players):
                group_players.append(players)
            leaf_group.append(group)
            leaf_k.append(len(players))
            bit_of = {p: 1 << i for i, p in enumerate(players)}
            for c in conditions:
                test = test_of.get(id(c))
                if test is None:
                    test = tests.setdefault(_test_key(c), len(test_rows))
                    if test == len(test_rows):
                        test_rows.append(c)
                    test_of[id(c)] = test
                cond_test.append(test)
                cond_bit.append(bit_of[player_of[c.player]])
                cond_go_left.append(c.go_left)
            cond_start.append(len(cond_test))
        self.tests = _test_arrays(test_rows)
        self.leaf_value = np.asarray(ensemble.values, dtype=np.float64)
        leaf_k_array = np.array(leaf_k, dtype=np.int64)
        self.table_start = np.concatenate([[0], np.cumsum(1 << leaf_k_array)]).astype(np.int64)
        self.paths = LeafPaths(leaf_k_array, np.array(cond_start, dtype=np.int64),
                               np.array(cond_test, dtype=np.int64),
                               np.array(cond_bit, dtype=np.int64),
                               np.array(cond_go_left, dtype=np.bool_), self.table_start)
        """Each leaf's path (k; its conditions' range, test, local player bit and direction)
        and where its 2^k tables start."""
        self.groups = _group_arrays(group_players, np.array(leaf_group, dtype=np.int64))
        """Leaves by group of path players, each group's buffer layout and its players."""
        self.lattice_masks = (_lattice_masks(self.groups) if self.n_players <= MAX_LATTICE_PLAYERS
                              else np.zeros(0, dtype=np.int64))
        """The lattice's global bitmask of every entry of every group buffer (lattice only)."""
        self.failures = _failure_lists(self.paths)
        """Per test and answer, the (leaf, mask) of every condition that answer fails."""
        self.walks = _tree_walks(np.asarray(ensemble.trees), self.paths)
        """The trees as nodes again, for plain predictions."""
        self._reads: BoundedCache[int, tuple[Coalitions, tuple[np.ndarray, ...]]] = \
            BoundedCache(OFFSET_TABLES_KEPT)

    def lattice(self, rows: FloatArray) -> FloatArray:
        """(n_rows, 2^d): g_S(row) for every coalition S (bit j of the index = player j)."""
        if self.n_players > MAX_LATTICE_PLAYERS:
            raise ValueError("too many players for the full lattice; ask for coalitions")
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        arguments = (rows, self.n_players, self.base, self.tests, self.paths, self.failures,
                     self.groups, self.lattice_masks, self.terms)
        if len(rows) <= SERIAL_ROWS:
            return _lattice_serial(*arguments)
        with parallel_section():
            return _lattice_parallel(*arguments, _blocks(len(rows)))

    def predict(self, rows: FloatArray) -> FloatArray:
        """The plain prediction (every feature kept): the leaf each row reaches in each tree,
        summed in tree order.

        Equal to the model's own predict to rounding, without its per-call overhead (input
        validation, one thread wake-up per tree), which dominates when few rows are predicted.
        """
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        arguments = (rows, self.base, self.leaf_value, self.tests, self.walks)
        if len(rows) <= SERIAL_ROWS:
            return _plain_serial(*arguments)
        with parallel_section():
            return _plain_parallel(*arguments, _blocks(len(rows)))

    def values_by_row(self, rows: FloatArray, coalitions: Coalitions) -> FloatArray:
        """(n_rows, n_coalitions) masked predictions for boolean masks over the players."""
        if self.n_players <= MAX_LATTICE_PLAYERS:
            (bits,) = self._design_reads(coalitions)
            lattice = self.lattice(rows)
            if bits.size == lattice.shape[1] and bool((bits == np.arange(bits.size)).all()):
                return lattice  # the whole lattice in order (exact Shapley): no gather
            return lattice[:, bits]
        offsets, order, parent, start, new, old = self._design_reads(coalitions)
        with parallel_section():
            return _coalition_values(
                np.ascontiguousarray(rows, dtype=np.float64), offsets, order, parent, start, new,
                old, self.base, self.tests, self.paths, self.groups, self.terms,
            )

    def _design_reads(self, coalitions: Coalitions) -> tuple[np.ndarray, ...]:
        """How a design's coalitions read the tables, worked out once per design (by identity).

        Up to MAX_LATTICE_PLAYERS: each coalition's bitmask, its index in the lattice. Past
        that, S ∩ F_g (the group's local bits) does not depend on the row: offsets[c, g] is
        kept per design rather than recomputed per (row, coalition, group). And a coalition
        that is another one plus a player j (every permutation prefix is) differs from it only
        in the groups whose players include j: it is computed as that parent's value plus
        those groups' changes, about k/d of the groups. Returns (offsets, order, parent, change
        start, new reads, old reads); parents come before their children in `order`.
        """
        key = id(coalitions)
        entry = self._reads.get(key)
        if entry is None or entry[0] is not coalitions:
            masks = np.ascontiguousarray(coalitions, dtype=np.bool_)
            if masks.ndim != 2 or masks.shape[1] != self.n_players:
                raise ValueError(f"coalitions must be masks over the tables' {self.n_players} "
                                 f"players")
            if self.n_players <= MAX_LATTICE_PLAYERS:
                reads: tuple[np.ndarray, ...] = (bits_from_coalitions(masks),)
            else:
                groups = self.groups
                offsets = _offsets_of(masks, groups.start, groups.k, groups.players)
                reads = (offsets, *_chains(masks, offsets))
            entry = (coalitions, reads)  # holding the array keeps its id unique
            self._reads[key] = entry
        return entry[1]

    def shapley(self, rows: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Exact Shapley values of the masked prediction over all 2^d coalitions, without
        the lattice: (φ (n_rows, n_players), g_all(row), g_none(row)).

        Each group of leaves is a game on its own k path players, and a Shapley value is
        linear in the game: the groups' small games give φ exactly (_group_shapley), in
        ~groups · k 2^(k−1) operations per row, where the lattice and the Shapley sum over it
        cost ~d 2^d (at d = 16, B = 100, 100 trees of depth 4: about 1/10 of the time).
        """
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        return _group_shapley(rows, self.n_players, self.base, self.tests, self.failures,
                              self.groups, self.terms, self.paths.table_start, _SHAPLEY_WEIGHTS)

    def coalition_values(self, rows: FloatArray, coalitions: Coalitions) -> FloatArray:
        """(n_coalitions, n_rows) masked predictions for boolean masks over the players."""
        return np.ascontiguousarray(self.values_by_row(rows, coalitions).T)


def _shapley_weights(most: int) -> FloatArray:
    """weights[k, s] = s!(k − s − 1)!/k!, the Shapley weight of a size-s coalition in a
    k-player game (0 where s ≥ k)."""
    weights = np.zeros((most + 1, most + 1))
    for k in range(1, most + 1):
        for s in range(k):
            weights[k, s] = factorial(s) * factorial(k - s - 1) / factorial(k)
    return weights


_SHAPLEY_WEIGHTS = _shapley_weights(MAX_PATH_PLAYERS)


def _host_groups(path_players: list[tuple[int, ...]]) -> dict[tuple[int, ...], tuple[int, ...]]:
    """For each set of path players F, the players F' ⊇ F its leaves are tabulated over.

    Every group of leaves costs a Möbius transform and a scatter per row, whatever its number
    of leaves, and most groups hold one to three leaves. A leaf may equally be tabulated over a
    superset F' of its own players: a player of F' it never splits on is always 'reached', so
    its table just repeats along that player (exactly, as the superset sums copy the counts).
    So a group joins a group with at most HOST_EXTRA_PLAYERS more players (the smallest such),
    trading a larger fill of its leaves for one transform fewer: at d = 12, 834 groups become
    345, and a row's lattice costs ~15 % less. Larger sets are kept first.
    """
    host: dict[tuple[int, ...], tuple[int, ...]] = {}
    kept: list[tuple[int, int, tuple[int, ...]]] = []  # (mask, size, players)
    for players in sorted(set(path_players), key=len, reverse=True):
        mask = sum(1 << p for p in players)
        chosen = min(((size, other) for other_mask, size, other in kept
                      if other_mask & mask == mask and size - len(players) <= HOST_EXTRA_PLAYERS),
                     default=None)
        if chosen is None:
            kept.append((mask, len(players), players))
            host[players] = players
        else:
            host[players] = chosen[1]
    return host


def _chains(coalitions: Coalitions, offsets: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(order, parent, change start, new reads, old reads) of coalitions as one-player
    extensions.

    parent[c] is a coalition of the design equal to c without one of its players (the lowest
    such player; -1 when none is in the design, or when its changes would cost more than
    summing every group); order lists coalitions by size, so a parent comes first; the buffer
    reads that differ between c and its parent are new[start[c]:start[c+1]] (c's) and
    old[...] (the parent's), stored as offsets so a row reads them in sequence. Coalitions are
    found by their packed bytes (core.coalitions), so any number of players works.
    """
    n, n_players = coalitions.shape
    parent = np.full(n, -1, dtype=np.int64)
    rows = packed(coalitions)
    keys = row_keys(rows)
    ranked = np.argsort(keys, kind="stable")
    sorted_keys = keys[ranked]
    for j in range(n_players):
        # packed() puts player j at reversed position d − 1 − j, most significant bit first.
        position = n_players - 1 - j
        byte, bit = position // 8, np.uint8(0x80 >> (position % 8))
        holders = np.flatnonzero((rows[:, byte] & bit) != 0)
        if holders.size == 0:
            continue
        without = rows[holders].copy()
        without[:, byte] &= ~bit
        wanted = row_keys(without)
        found = np.minimum(np.searchsorted(sorted_keys, wanted), n - 1)
        hit = (sorted_keys[found] == wanted) & (parent[holders] < 0)
        parent[holders[hit]] = ranked[found[hit]]
    sizes = coalitions.sum(axis=1)
    order = np.argsort(sizes, kind="stable").astype(np.int64)
    has_parent = parent >= 0
    differs = np.zeros(offsets.shape, dtype=np.bool_)
    differs[has_parent] = offsets[has_parent] != offsets[parent[has_parent]]
    # A change costs two reads where a plain sum costs one per group: keep the parent only
    # where fewer than half of the groups change (measured: KernelSHAP's designs at d = 20
    # were 0.7x as fast when every available parent was used).
    costly = differs.sum(axis=1) * 2 >= offsets.shape[1]
    parent[costly] = -1
    differs[costly] = False
    coalition, changed = np.nonzero(differs)
    start = np.concatenate([[0], np.cumsum(np.bincount(coalition, minlength=n))])
    return (order, parent, start.astype(np.int64), offsets[coalition, changed],
            offsets[parent[coalition], changed])


def _blocks(n_rows: int) -> int:
    return max(1, min(n_rows, numba.get_num_threads() * BLOCKS_PER_THREAD))


def _test_arrays(conditions: list[Condition]) -> SplitTests:
    """The distinct split tests as arrays, one record for the compiled kernels."""
    code_rows = [c.codes for c in conditions if c.categorical]
    code_row = np.full(len(conditions), -1, dtype=np.int64)
    code_row[[i for i, c in enumerate(conditions) if c.categorical]] = np.arange(len(code_rows))
    return SplitTests(np.array([c.player for c in conditions], dtype=np.int64),
            np.array([c.categorical for c in conditions], dtype=np.bool_),
            np.array([c.threshold for c in conditions], dtype=np.float64),
            np.array([c.missing_left for c in conditions], dtype=np.bool_),
            code_row,
            (np.array(code_rows, dtype=np.uint8) if code_rows
             else np.zeros((1, 256), dtype=np.uint8)),
            np.array([c.single_precision for c in conditions], dtype=np.bool_))


def _tree_walks(trees: np.ndarray, paths: LeafPaths) -> TreeWalks:
    """(root, test, left, right) node arrays rebuilt from the leaves' root-first paths.

    A child (or root) c < 0 is the leaf -c - 1; a tree without splits is its one leaf.
    """
    cond_start, cond_test, cond_go_left = paths.cond_start, paths.cond_test, paths.cond_go_left
    roots: list[int] = []
    tests: list[int] = []
    children: list[list[int]] = []  # [right, left] per node, indexed by go_left
    for leaf, tree in enumerate(trees.tolist()):
        if leaf == 0 or tree != trees[leaf - 1]:
            roots.append(-leaf - 1)  # becomes a node when the tree has a split
        conditions = range(int(cond_start[leaf]), int(cond_start[leaf + 1]))
        if not conditions:
            continue
        if roots[-1] < 0:
            roots[-1] = len(tests)
            tests.append(int(cond_test[conditions[0]]))
            children.append([0, 0])
        node = roots[-1]
        for c in conditions:
            side = int(cond_go_left[c])
            if c == conditions[-1]:
                children[node][side] = -leaf - 1
                break
            if children[node][side] == 0:  # 0 is never a child: node 0 is a root
                children[node][side] = len(tests)
                tests.append(int(cond_test[c + 1]))
                children.append([0, 0])
            node = children[node][side]
    pairs = np.array(children, dtype=np.int64).reshape(-1, 2)
    return TreeWalks(np.array(roots, dtype=np.int64), np.array(tests, dtype=np.int64),
                     np.ascontiguousarray(pairs[:, 1]), np.ascontiguousarray(pairs[:, 0]))


def _failure_lists(paths: LeafPaths) -> Failures:
    """Conditions listed by the answer that fails them: slot 2u + a holds every condition on
    test u that a row answering a (1 = goes left) fails, as (leaf, mask that clears its bit).

    A row then clears only the bits its answers fail (about half of all conditions), with no
    test of a condition against its answer.
    """
    leaf_k, cond_start, cond_test = paths.k, paths.cond_start, paths.cond_test
    cond_bit, cond_go_left = paths.cond_bit, paths.cond_go_left
    cond_leaf = np.repeat(np.arange(leaf_k.size, dtype=np.int64), np.diff(cond_start))
    slot = 2 * cond_test + (~cond_go_left).astype(np.int64)
    order = np.argsort(slot, kind="stable")
    n_slots = 2 * (int(cond_test.max(initial=-1)) + 1)
    starts = np.concatenate([[0], np.cumsum(np.bincount(slot, minlength=n_slots))])
    full = (np.int64(1) << leaf_k) - 1
    return Failures(starts.astype(np.int64), cond_leaf[order], ~cond_bit[order], full)


def _group_arrays(group_players: list[tuple[int, ...]], leaf_group: np.ndarray) -> LeafGroups:
    """Leaves sorted by group, each group's buffer offset and k, and its players: row g of
    the (n_groups, max k) player table holds group g's players by local bit (-1 pads)."""
    group_k = np.array([len(p) for p in group_players], dtype=np.int64)
    sizes = np.int64(1) << group_k
    group_start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    padded = np.full((len(group_players), max(int(group_k.max(initial=0)), 1)), -1,
                     dtype=np.int64)
    for g, players in enumerate(group_players):
        padded[g, :len(players)] = players
    group_leaves = np.argsort(leaf_group, kind="stable").astype(np.int64)
    counts = np.bincount(leaf_group, minlength=len(group_players))
    group_leaf_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return LeafGroups(group_leaves, group_leaf_start, group_start, group_k, padded)


def _lattice_masks(groups: LeafGroups) -> np.ndarray:
    """The global bitmask of every group buffer entry, for scattering into the lattice.

    All groups at once: entry e is local subset `local[e]` of group `owner[e]`; its global
    mask gets player p_i(owner) for every local bit i that is set.
    """
    group_start, group_k, padded = groups.start, groups.k, groups.players
    owner = np.repeat(np.arange(group_k.size), np.int64(1) << group_k)
    local = np.arange(int(group_start[-1]), dtype=np.int64) - group_start[owner]
    global_masks = np.zeros(local.size, dtype=np.int64)
    for i in range(padded.shape[1]):
        player = padded[owner, i]
        set_bit = ((local >> i) & 1).astype(bool) & (player >= 0)
        global_masks[set_bit] |= np.int64(1) << player[set_bit]
    return global_masks

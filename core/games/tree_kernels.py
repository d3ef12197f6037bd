"""The tree tables' compiled kernels, and the named records they take.

The builders (core/games/tree_tables.py) flatten an ensemble into these records once per model
and background; the kernels read them per row. Records are typing.NamedTuples of arrays, which
numba takes as arguments and reads by field name (`paths.table_start`, not a position).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from cpdecomp.core.games.tree_records import LEFT, MISSING


class SplitTests(NamedTuple):
    """The distinct split tests (one entry per test u)."""

    player: np.ndarray
    """Column the test reads."""
    categorical: np.ndarray
    threshold: np.ndarray
    missing_left: np.ndarray
    code_row: np.ndarray
    """Row of a categorical test in code_table (-1 for numeric tests)."""
    code_table: np.ndarray
    """(n_categorical, 256) uint8: LEFT, right or MISSING per category code."""
    single: np.ndarray
    """True where the threshold compares in float32 (the booster's precision)."""


class LeafPaths(NamedTuple):
    """Each leaf's path: k, its conditions' range, test, local player bit and direction, and
    where its 2^k tables start."""

    k: np.ndarray
    cond_start: np.ndarray
    cond_test: np.ndarray
    cond_bit: np.ndarray
    cond_go_left: np.ndarray
    table_start: np.ndarray


class Failures(NamedTuple):
    """Conditions by the answer that fails them: slot 2u + a lists (leaf, mask clearing its
    bit) of every condition on test u that answer a fails; `full` is each leaf's full mask."""

    starts: np.ndarray
    leaf: np.ndarray
    clear: np.ndarray
    full: np.ndarray


class LeafGroups(NamedTuple):
    """Leaves by group of path players, each group's buffer layout and its players."""

    leaves: np.ndarray
    leaf_start: np.ndarray
    start: np.ndarray
    """Offset of each group's 2^k buffer entries."""
    k: np.ndarray
    players: np.ndarray
    """(n_groups, max k): group g's players by local bit (-1 pads)."""


class TreeWalks(NamedTuple):
    """The trees as nodes: a child (or root) c < 0 is the leaf -c - 1."""

    roots: np.ndarray
    test: np.ndarray
    left: np.ndarray
    right: np.ndarray


@njit(cache=True, nogil=True)
def _answers(row, tests, out):
    """Whether the row goes left at every distinct split test."""
    player, categorical, threshold = tests.player, tests.categorical, tests.threshold
    missing_left, code_row, code_table, single = (tests.missing_left, tests.code_row,
                                                  tests.code_table, tests.single)
    for u in range(player.size):
        value = row[player[u]]
        if np.isnan(value):
            goes_left = missing_left[u]
        elif categorical[u]:
            if value < 0 or value >= 256:
                goes_left = missing_left[u]
            else:
                code = code_table[code_row[u], int(value)]
                goes_left = missing_left[u] if code == MISSING else code == LEFT
        elif single[u]:
            goes_left = np.float32(value) <= threshold[u]
        else:
            goes_left = value <= threshold[u]
        out[u] = goes_left


@njit(cache=True, nogil=True, inline="always")
def _reach(answers, leaf, paths):
    """A_L as a local bitmask: the leaf's path players whose every split the row passes."""
    leaf_k, cond_start, cond_test = paths.k, paths.cond_start, paths.cond_test
    cond_bit, cond_go_left = paths.cond_bit, paths.cond_go_left
    reach = (1 << leaf_k[leaf]) - 1
    for c in range(cond_start[leaf], cond_start[leaf + 1]):
        # branch-free: which way the row goes is unpredictable
        reach &= ~(cond_bit[c] * (answers[cond_test[c]] != cond_go_left[c]))
    return reach


@njit(cache=True, nogil=True)
def _reach_all(answers, failures, reach):
    """A_L of every leaf (local bitmasks): start full, clear the bits the answers fail."""
    starts, leaf, clear, full = failures.starts, failures.leaf, failures.clear, failures.full
    reach[:] = full
    for u in range(answers.size):
        slot = 2 * u + answers[u]
        for e in range(starts[slot], starts[slot + 1]):
            reach[leaf[e]] &= clear[e]


@njit(cache=True, nogil=True)
def _plain_block(rows, lo, hi, out, base, leaf_value, tests, walks):
    roots, node_test, node_left, node_right = walks.roots, walks.test, walks.left, walks.right
    answers = np.empty(tests.player.size, dtype=np.bool_)
    for r in range(lo, hi):
        _answers(rows[r], tests, answers)
        total = base
        for tree in range(roots.size):
            node = roots[tree]
            while node >= 0:
                node = node_left[node] if answers[node_test[node]] else node_right[node]
            total += leaf_value[-node - 1]
        out[r] = total


@njit(cache=True)
def _plain_serial(rows, base, leaf_value, tests, walks):
    out = np.empty(rows.shape[0])
    _plain_block(rows, 0, rows.shape[0], out, base, leaf_value, tests, walks)
    return out


@njit(cache=True, parallel=True)
def _plain_parallel(rows, base, leaf_value, tests, walks, n_blocks):
    n = rows.shape[0]
    out = np.empty(n)
    for block in prange(n_blocks):
        _plain_block(rows, block * n // n_blocks, (block + 1) * n // n_blocks, out, base,
                     leaf_value, tests, walks)
    return out


@njit(cache=True, parallel=True)
def _probability_tables(background, tests, paths, total):
    """P_L(U) for every leaf L and every subset U of its path players."""
    leaf_k, table_start = paths.k, paths.table_start
    n_background = background.shape[0]
    answers = np.empty((n_background, tests.player.size), dtype=np.bool_)
    for b in prange(n_background):
        _answers(background[b], tests, answers[b])
    tables = np.zeros(total)
    for leaf in prange(leaf_k.size):
        size = 1 << leaf_k[leaf]
        start = table_start[leaf]
        for b in range(n_background):
            tables[start + _reach(answers[b], leaf, paths)] += 1.0
        # Superset sums: the count of rows whose pattern contains U.
        for bit in range(leaf_k[leaf]):
            step = 1 << bit
            for mask in range(size):
                if not mask & step:
                    tables[start + mask] += tables[start + (mask | step)]
        for mask in range(size):
            tables[start + mask] /= n_background
    return tables


@njit(cache=True)
def _leaf_terms(probabilities, leaf_value, paths):
    """Q_L(T) = v_L P_L(F_L ∖ T), indexed by T."""
    leaf_k, table_start = paths.k, paths.table_start
    terms = np.empty_like(probabilities)
    for leaf in range(leaf_k.size):
        start = table_start[leaf]
        full = (1 << leaf_k[leaf]) - 1
        for subset in range(full + 1):
            terms[start + subset] = leaf_value[leaf] * probabilities[start + (full ^ subset)]
    return terms


@njit(cache=True, nogil=True, inline="always")
def _add_reached_terms(buffer, offset, reach, terms, start):
    """buffer[T] += Q_L(T) for every subset T of the reached players."""
    subset = reach
    while True:
        buffer[offset + subset] += terms[start + subset]
        if subset == 0:
            break
        subset = (subset - 1) & reach


@njit(cache=True, nogil=True, inline="always")
def _mobius(buffer, size):
    """In place: m(T) = Σ_{U ⊆ T} (-1)^|T∖U| t(U) over a buffer of `size` = 2^k entries."""
    if size == 1:
        return
    if size == 2:
        buffer[1] -= buffer[0]
        return
    for b in range(0, size, 4):  # the two lowest bits at once
        a0 = buffer[b]
        a1 = buffer[b + 1] - a0
        buffer[b + 3] = buffer[b + 3] - buffer[b + 2] - a1
        buffer[b + 2] -= a0
        buffer[b + 1] = a1
    step = 4
    while step < size:  # then contiguous halves, which vectorise
        for start in range(0, size, 2 * step):
            low = buffer[start:start + step]
            high = buffer[start + step:start + 2 * step]
            for i in range(step):
                high[i] -= low[i]
        step <<= 1


@njit(cache=True, nogil=True, inline="always")
def _subset_sums(lattice, size):
    """In place: h(S) = Σ_{T ⊆ S} m(T), the inverse of _mobius."""
    if size == 1:
        return
    if size == 2:
        lattice[1] += lattice[0]
        return
    for b in range(0, size, 4):
        a0 = lattice[b]
        a1 = lattice[b + 1] + a0
        lattice[b + 3] = lattice[b + 3] + lattice[b + 2] + a1
        lattice[b + 2] += a0
        lattice[b + 1] = a1
    step = 4
    while step < size:
        for start in range(0, size, 2 * step):
            low = lattice[start:start + step]
            high = lattice[start + step:start + 2 * step]
            for i in range(step):
                high[i] += low[i]
        step <<= 1


@njit(cache=True, nogil=True)
def _lattice_block(rows, lo, hi, out, base, tests, paths, failures, groups, group_global,
                   terms):
    """Rows lo..hi of the lattice, with one answer array and one group buffer for all."""
    group_leaves, group_leaf_start = groups.leaves, groups.leaf_start
    group_start, group_k = groups.start, groups.k
    answers = np.empty(tests.player.size, dtype=np.bool_)
    reach = np.empty(paths.k.size, dtype=np.int64)
    buffer = np.zeros(1 << group_k.max())
    table_start = paths.table_start
    for r in range(lo, hi):
        _answers(rows[r], tests, answers)
        _reach_all(answers, failures, reach)
        lattice = out[r]
        lattice[:] = 0.0
        for g in range(group_k.size):
            size = 1 << group_k[g]
            for i in range(group_leaf_start[g], group_leaf_start[g + 1]):
                leaf = group_leaves[i]
                _add_reached_terms(buffer, 0, reach[leaf], terms, table_start[leaf])
            _mobius(buffer, size)
            offset = group_start[g]
            for mask in range(size):
                lattice[group_global[offset + mask]] += buffer[mask]
                buffer[mask] = 0.0
        _subset_sums(lattice, lattice.size)
        for mask in range(lattice.size):
            lattice[mask] += base


@njit(cache=True)
def _lattice_serial(rows, n_players, base, tests, paths, failures, groups, group_global, terms):
    out = np.empty((rows.shape[0], 1 << n_players))
    _lattice_block(rows, 0, rows.shape[0], out, base, tests, paths, failures, groups,
                   group_global, terms)
    return out


@njit(cache=True, parallel=True)
def _lattice_parallel(rows, n_players, base, tests, paths, failures, groups, group_global,
                      terms, n_blocks):
    n = rows.shape[0]
    out = np.empty((n, 1 << n_players))
    for block in prange(n_blocks):
        _lattice_block(rows, block * n // n_blocks, (block + 1) * n // n_blocks, out, base,
                       tests, paths, failures, groups, group_global, terms)
    return out


@njit(cache=True, parallel=True)
def _offsets_of(coalitions, group_start, group_k, group_players):
    """offsets[c, g] = group g's buffer offset plus S_c ∩ F_g in its local bits (local bit i
    is the group's i-th player, read from the coalition's mask: no width limit)."""
    n_coalitions = coalitions.shape[0]
    out = np.empty((n_coalitions, group_k.size), dtype=np.int32)  # < 2^31 entries
    for c in prange(n_coalitions):
        members = coalitions[c]
        for g in range(group_k.size):
            local = 0
            for i in range(group_k[g]):
                if members[group_players[g, i]]:
                    local |= 1 << i
            out[c, g] = group_start[g] + local
    return out


@njit(cache=True, parallel=True)
def _coalition_values(rows, offsets, order, parent, change_start, new_reads, old_reads, base,
                      tests, paths, groups, terms):
    """Per coalition instead of the lattice: g_S = base + Σ_g buffer_g[S ∩ F_g], each
    coalition with a parent in the design as the parent's value plus its changed groups."""
    group_leaves, group_leaf_start = groups.leaves, groups.leaf_start
    group_start, group_k = groups.start, groups.k
    table_start = paths.table_start
    n_coalitions, n_groups = offsets.shape
    out = np.empty((rows.shape[0], n_coalitions))
    for r in prange(rows.shape[0]):
        answers = np.empty(tests.player.size, dtype=np.bool_)
        _answers(rows[r], tests, answers)
        buffers = np.zeros(group_start[-1])
        for g in range(group_k.size):
            for i in range(group_leaf_start[g], group_leaf_start[g + 1]):
                leaf = group_leaves[i]
                _add_reached_terms(buffers, group_start[g], _reach(answers, leaf, paths), terms,
                                   table_start[leaf])
        values = out[r]
        for c in order:
            p = parent[c]
            if p < 0:
                total = base
                for g in range(n_groups):
                    total += buffers[offsets[c, g]]
            else:
                total = values[p]
                for e in range(change_start[c], change_start[c + 1]):
                    total += buffers[new_reads[e]] - buffers[old_reads[e]]
            values[c] = total
    return out


@njit(cache=True, nogil=True)
def _group_shapley(rows, n_players, base, tests, failures, groups, terms, table_start, weights):
    """Exact Shapley values of g_S per row, with no lattice: (φ (n_rows, d), g_full, g_empty).

    g_S = base + Σ_g u_g(S ∩ F_g), where u_g(T) is group g's buffer (the sum over its leaves
    of 1[T ⊆ A_L] Q_L(T)). A Shapley value is linear in the game, and u_g's players outside F_g
    are null, so φ_j = Σ_{g ∋ j} Σ_{T ⊆ F_g ∖ j} w_k(|T|) (u_g(T ∪ j) − u_g(T)) with
    k = |F_g| and w_k(s) = s!(k − s − 1)!/k! (weights[k, s]): k 2^(k−1) terms per group,
    whatever d, where the lattice costs 2^d per row and its Shapley sum d 2^(d−1).
    """
    group_leaves, group_leaf_start = groups.leaves, groups.leaf_start
    group_k, group_players = groups.k, groups.players
    n_rows = rows.shape[0]
    phi = np.zeros((n_rows, n_players))
    full = np.empty(n_rows)
    empty = np.empty(n_rows)
    answers = np.empty(tests.player.size, dtype=np.bool_)
    reach = np.empty(failures.full.size, dtype=np.int64)
    buffer = np.zeros(1 << group_k.max())
    for r in range(n_rows):
        _answers(rows[r], tests, answers)
        _reach_all(answers, failures, reach)
        at_full = base
        at_empty = base
        for g in range(group_k.size):
            k = group_k[g]
            size = 1 << k
            for i in range(group_leaf_start[g], group_leaf_start[g + 1]):
                leaf = group_leaves[i]
                _add_reached_terms(buffer, 0, reach[leaf], terms, table_start[leaf])
            at_full += buffer[size - 1]
            at_empty += buffer[0]
            for i in range(k):
                step = 1 << i
                total = 0.0
                for subset in range(size):
                    if not subset & step:
                        size_of = 0
                        rest = subset
                        while rest:
                            rest &= rest - 1
                            size_of += 1
                        total += weights[k, size_of] * (buffer[subset | step] - buffer[subset])
                phi[r, group_players[g, i]] += total
            for mask in range(size):
                buffer[mask] = 0.0
        full[r] = at_full
        empty[r] = at_empty
    return phi, full, empty

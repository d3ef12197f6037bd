"""Exact Shapley values over all 2^d coalitions."""

from __future__ import annotations

from math import factorial

import numpy as np

from cpdecomp.core.attribution.base import Design
from cpdecomp.core.attribution.terms import design_from_terms
from cpdecomp.core.coalitions import coalitions_from_bits
from cpdecomp.core.errors import CpdecompError

MAX_EXACT_PLAYERS = 16
"""2^16 = 65,536 coalitions: beyond this, enumeration costs more than sampling is worth."""


def shapley_weight(size: int, n_players: int) -> float:
    """|S|!(d − |S| − 1)!/d!: the weight of v(S ∪ {j}) − v(S) in φ_j."""
    return factorial(size) * factorial(n_players - size - 1) / factorial(n_players)


def exact_shapley_design(n_players: int, budget: int | None = None, seed: int = 0) -> Design:
    """All coalitions; φ_j = Σ over S not containing j of w(|S|)(v(S ∪ {j}) − v(S))."""
    if n_players > MAX_EXACT_PLAYERS:
        raise CpdecompError(
            f"exact Shapley enumerates 2^{n_players} coalitions; it is limited to "
            f"{MAX_EXACT_PLAYERS} features: use --method permutation or fewer --features"
        )
    d = n_players
    subsets = np.arange(2**d, dtype=np.int64)
    sizes = np.bitwise_count(subsets)
    weights = np.array([shapley_weight(s, d) for s in range(d)])
    players, without = [], []
    for j in range(d):
        lacking = subsets[(subsets >> j) & 1 == 0]
        players.append(np.full(lacking.size, j))
        without.append(lacking)
    player = np.concatenate(players)
    without_bits = np.concatenate(without)
    with_bits = without_bits | (np.int64(1) << player)
    return design_from_terms("exact", coalitions_from_bits(with_bits, d),
                             coalitions_from_bits(without_bits, d), player,
                             weights[sizes[without_bits]], efficient=True)

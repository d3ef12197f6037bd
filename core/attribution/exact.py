"""Exact Shapley values over all 2^d coalitions."""

from __future__ import annotations

from math import factorial

import numpy as np

from core.attribution.base import Design, coalitions_from_bits
from core.errors import CpdecompError

MAX_EXACT_PLAYERS = 16
"""2^16 = 65,536 coalitions: beyond this, enumeration costs more than sampling is worth."""


def shapley_weight(size: int, n_players: int) -> float:
    """|S|!(d - |S| - 1)!/d!: the weight of v(S ∪ {j}) - v(S) in φ_j."""
    return factorial(size) * factorial(n_players - size - 1) / factorial(n_players)


def exact_shapley_design(n_players: int, budget: int | None = None, seed: int = 0) -> Design:
    """All coalitions with the Shapley weights: φ_j = Σ_S w(S, j) v(S)."""
    if n_players > MAX_EXACT_PLAYERS:
        raise CpdecompError(
            f"exact Shapley enumerates 2^{n_players} coalitions; it is limited to "
            f"{MAX_EXACT_PLAYERS} features: use --method permutation or fewer --features"
        )
    d = n_players
    coalitions = coalitions_from_bits(np.arange(2**d), d)
    sizes = coalitions.sum(axis=1)
    w = np.array([shapley_weight(s, d) for s in range(d)] + [0.0])
    # j in S: +w(|S| - 1) (S is S' ∪ {j}); j not in S: -w(|S|).
    weights = np.where(coalitions, w[np.maximum(sizes - 1, 0)][:, None], -w[sizes][:, None])
    return Design("exact", coalitions, weights, efficient=True)

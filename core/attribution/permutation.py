"""Permutation-sampling Shapley with antithetic pairs (each permutation and its reverse).

φ_j = mean over the sampled permutations of v(prefix ∪ {j}) − v(prefix). Every game uses the
same permutations, so the split is exact, and each permutation telescopes, so Σφ = v(N) − v(∅).
A permutation and its reverse form one sampling unit: the standard error is the spread of the
pairs' estimates over √(number of pairs).
"""

from __future__ import annotations

import numpy as np

from cpdecomp.core.attribution.terms import TermDesign, design_from_terms
from cpdecomp.core.errors import CpdecompError

DEFAULT_PERMUTATIONS = 64


def prefix_masks(orders: np.ndarray) -> np.ndarray:
    """(n_orders, d + 1, d) masks of every order's prefixes: [o, k] holds its first k players."""
    n_orders, d = orders.shape
    position = np.empty_like(orders)
    position[np.arange(n_orders)[:, None], orders] = np.arange(d)
    return position[:, None, :] < np.arange(d + 1)[None, :, None]


def design_from_orders(method: str, forward: np.ndarray, seed: int | None) -> TermDesign:
    """The antithetic design of `forward` orders (n_pairs, d), each with its reverse."""
    n_pairs, d = forward.shape
    orders = np.concatenate([forward, forward[:, ::-1]])
    prefixes = prefix_masks(orders)
    share = np.full(orders.size, 1.0 / len(orders))
    # Row r and row r + n_pairs are one pair; inside the pair each permutation counts half.
    unit = np.repeat(np.arange(len(orders)) % n_pairs, d)
    return design_from_terms(
        method, prefixes[:, 1:].reshape(-1, d), prefixes[:, :-1].reshape(-1, d), orders.ravel(),
        share, efficient=True, budget=len(orders), seed=seed,
        unit=unit, unit_weight=np.full(orders.size, 0.5),
    )


def permutation_design(n_players: int, budget: int | None = None, seed: int = 0) -> TermDesign:
    """A design from `budget` permutations (rounded up to an even number for the pairs)."""
    n_permutations = DEFAULT_PERMUTATIONS if budget is None else int(budget)
    if n_permutations < 2:
        raise CpdecompError("permutation sampling needs a budget of at least 2 permutations")
    n_pairs = (n_permutations + 1) // 2
    rng = np.random.default_rng(seed)
    forward = np.argsort(rng.random((n_pairs, n_players)), axis=1)
    return design_from_orders("permutation", forward, seed)

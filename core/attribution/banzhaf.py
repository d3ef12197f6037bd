"""Banzhaf values: every coalition counts the same, φ_j = mean over S ∌ j of v(S ∪ {j}) − v(S).

Linear, symmetric, null players exactly 0, but not efficient: Σφ ≠ v(N) − v(∅) in general,
so the attributions do not add up to the width gap (the calibration/instance split is still
exact). The sampled estimator draws coalitions S uniformly (each player in with probability
½) and, for every player j, takes v(S ∪ {j}) − v(S ∖ {j}): d + 1 coalitions per draw, the draws
shared by every player and every game; its standard error is the spread over draws.
"""

from __future__ import annotations

import numpy as np

from cpdecomp.core.attribution.exact import MAX_EXACT_PLAYERS
from cpdecomp.core.attribution.terms import TermDesign, design_from_terms
from cpdecomp.core.coalitions import coalitions_from_bits
from cpdecomp.core.errors import CpdecompError

DEFAULT_BANZHAF_SAMPLES = 128


def banzhaf_design(n_players: int, budget: int | None = None, seed: int = 0) -> TermDesign:
    """Exact Banzhaf values over all 2^d coalitions."""
    d = n_players
    if d > MAX_EXACT_PLAYERS:
        raise CpdecompError(
            f"exact Banzhaf enumerates 2^{d} coalitions; it is limited to {MAX_EXACT_PLAYERS} "
            f"features: use --method banzhaf-sampled or fewer --features"
        )
    subsets = np.arange(2**d, dtype=np.int64)
    player = np.repeat(np.arange(d), 2 ** (d - 1))
    without = np.concatenate([subsets[(subsets >> j) & 1 == 0] for j in range(d)])
    with_bits = without | (np.int64(1) << player)
    weight = np.full(len(player), 0.5 ** (d - 1))
    return design_from_terms("banzhaf", coalitions_from_bits(with_bits, d),
                             coalitions_from_bits(without, d), player, weight, efficient=False)


def sampled_banzhaf_design(n_players: int, budget: int | None = None,
                           seed: int = 0) -> TermDesign:
    """Banzhaf values from `budget` uniform coalitions, each compared with and without j."""
    d = n_players
    n_samples = DEFAULT_BANZHAF_SAMPLES if budget is None else int(budget)
    if n_samples < 2:
        raise CpdecompError("sampled Banzhaf needs a budget of at least 2 coalitions")
    rng = np.random.default_rng(seed)
    members = rng.random((n_samples, d)) < 0.5
    player = np.tile(np.arange(d), n_samples)
    sample = np.repeat(members, d, axis=0)
    alone = np.tile(np.eye(d, dtype=bool), (n_samples, 1))
    unit = np.repeat(np.arange(n_samples), d)
    return design_from_terms(
        "banzhaf-sampled", sample | alone, sample & ~alone, player,
        np.full(len(player), 1.0 / n_samples), efficient=False, budget=n_samples, seed=seed,
        unit=unit, unit_weight=np.ones(len(player)),
    )

"""shap's PermutationExplainer as a design: the permutations it draws, as marginal terms.

shap walks each drawn permutation forwards (adding features) and backwards (removing them in
the same order, which is the reverse permutation's prefixes) and averages the marginal
contributions: the antithetic estimator of `core.attribution.permutation`, on shap's draws.
PermutationExplainer(seed=s) seeds NumPy's global state with s and shuffles arange(d) in place
once per forward/backward pair; `shap_permutation_design` replays that stream with
RandomState(s), because running shap costs a numba compilation of tens of seconds on first use.
`run_shap_permutation` runs shap itself on a game and reads the permutations off the masks it
evaluates; the tests run it on the stacked game [v_C, v_I] and check both the permutations and
the numbers against the design.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cpdecomp.core.attribution.permutation import DEFAULT_PERMUTATIONS, design_from_orders
from cpdecomp.core.attribution.shap_backend import global_numpy_seed, mask_instance
from cpdecomp.core.attribution.terms import TermDesign
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.optional import require


def shap_permutation_design(n_players: int, budget: int | None = None,
                            seed: int = 0) -> TermDesign:
    """shap's permutations for `budget` permutations (forward/backward pairs, rounded up)."""
    d = n_players
    n_permutations = DEFAULT_PERMUTATIONS if budget is None else int(budget)
    if n_permutations < 2:
        raise CpdecompError("shap's PermutationExplainer needs a budget of at least 2 permutations")
    if not 0 <= seed < 2**32:
        raise CpdecompError(f"shap's explainers take a seed in [0, 2^32); got {seed}")
    n_pairs = (n_permutations + 1) // 2
    return design_from_orders("shap-permutation", replayed_permutations(d, n_pairs, seed), seed)


def replayed_permutations(n_players: int, n_pairs: int, seed: int) -> np.ndarray:
    """The forward orders (n_pairs, d) shap draws: in-place shuffles of arange(d) after seed."""
    state = np.random.RandomState(seed)  # shap draws from the legacy global stream
    order = np.arange(n_players)
    forward = np.empty((n_pairs, n_players), dtype=np.int64)
    for p in range(n_pairs):
        state.shuffle(order)
        forward[p] = order
    return forward


def run_shap_permutation(game: Callable[[np.ndarray], np.ndarray], n_players: int,
                         n_pairs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """shap's PermutationExplainer on a game of 0/1 masks: its φ and the orders it walked.

    `game` maps masks (n, d) to values (n, k); shap's φ is (d, k). The forward orders (n_pairs,
    d) are read off the masks shap evaluates, and checked to be walks of whole permutations.
    """
    shap = require("shap", "the shap-permutation method")  # on first use: it costs seconds

    d = n_players
    steps = 2 * d + 1  # ∅, d prefixes forwards, d removals backwards
    seen: list[np.ndarray] = []

    def record(rows: np.ndarray) -> np.ndarray:
        masks = np.asarray(rows) > 0.5
        seen.append(masks)
        return game(masks)

    x, background = mask_instance(d)
    with global_numpy_seed(seed):
        explainer = shap.PermutationExplainer(record, background, seed=seed)
        phi = explainer(x, max_evals=n_pairs * steps, silent=True).values[0]
    masks = np.concatenate(seen).reshape(n_pairs, steps, d)
    forward = np.diff(masks[:, :d + 1].astype(np.int8), axis=1).argmax(axis=2)
    if not np.array_equal(masks, walk(forward)):
        raise CpdecompError("shap's PermutationExplainer evaluated an unexpected mask sequence")
    return phi, forward


def walk(forward: np.ndarray) -> np.ndarray:
    """The masks shap evaluates for each order: ∅, prefixes up to N, then removals in order."""
    n_pairs, d = forward.shape
    steps = np.zeros((n_pairs, d, d), dtype=bool)
    steps[np.arange(n_pairs)[:, None], np.arange(d)[None, :], forward] = True
    adding = np.cumsum(steps, axis=1) > 0
    empty = np.zeros((n_pairs, 1, d), dtype=bool)
    return np.concatenate([empty, adding, ~adding], axis=1)

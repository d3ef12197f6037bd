"""Attribution methods that are not linear in the game, kept to measure why core refuses them.

φ_T = φ_C + φ_I needs φ(v_C + v_I) = φ(v_C) + φ(v_I). Each method below breaks that: its
answer depends on the values through a ratio or a data-driven selection, so the three vectors
it gives do not add up and no design can make them. They are not in core's METHODS registry;
its build_design names the reason (core.attribution.NOT_DECOMPOSABLE), and `additivity_error`
measures the gap on any game (docs/attribution.md shows it on real data). They work on the full
lattice of 2^d coalition values (index = bitmask, player j is bit j), small d only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cpdecomp.core.attribution.shap_backend import global_numpy_seed, mask_instance
from cpdecomp.core.coalitions import coalitions_from_bits
from cpdecomp.core.optional import require
from cpdecomp.core.typing import FloatArray

LIME_SAMPLES = 1000
LIME_KERNEL_WIDTH = 25.0
"""LIME's text-explainer kernel on cosine distance × 100 (its defaults)."""


def selected_count(n_players: int) -> int:
    """Features kept by the selecting methods: half of them, at least one."""
    return max(1, n_players // 2)


def proportional_shapley(lattice: FloatArray, n_players: int, seed: int = 0) -> FloatArray:
    """Béal et al.'s proportional Shapley value: dividends split in proportion to v({j}).

    φ_j = Σ_{S ∋ j} Δ(S) · w_j / Σ_{k ∈ S} w_k, with Δ the Harsanyi dividends of v − v(∅) and
    w_j = v({j}) − v(∅) (an equal split where the w of S sum to 0). Efficient, not linear.
    """
    d = n_players
    lattice = np.atleast_2d(np.asarray(lattice, dtype=float))
    dividends = lattice - lattice[:, :1]
    for j in range(d):  # Möbius transform: dividends from values
        has_j = (np.arange(2**d) >> j) & 1 == 1
        dividends[:, has_j] -= dividends[:, ~has_j]
    members = coalitions_from_bits(np.arange(2**d), d).astype(float)
    stand_alone = dividends[:, 1 << np.arange(d)]
    totals = stand_alone @ members.T
    equal = members / np.maximum(members.sum(axis=1), 1)[:, None]
    shares = np.where(np.abs(totals)[..., None] > 1e-300,
                      stand_alone[:, None, :] * members[None] / np.where(
                          totals == 0, 1.0, totals)[..., None], equal[None])
    return np.einsum("gs,gsd->gd", dividends, shares)


def kernel_shap_l1(lattice: FloatArray, n_players: int, seed: int = 0) -> FloatArray:
    """shap's KernelExplainer on every coalition with l1_reg='num_features(k)', k = d // 2."""
    shap = require("shap", "kernel SHAP with l1_reg")  # on first use: it costs seconds

    d = n_players
    lattice = np.atleast_2d(np.asarray(lattice, dtype=float))
    weights = np.int64(1) << np.arange(d, dtype=np.int64)
    x, background = mask_instance(d)
    out = np.zeros((len(lattice), d))
    for g, values in enumerate(lattice):
        def game(rows: np.ndarray, values: np.ndarray = values) -> np.ndarray:
            return values[(np.asarray(rows) > 0.5).astype(np.int64) @ weights]

        with global_numpy_seed(seed):
            explainer = shap.KernelExplainer(game, background)
            out[g] = explainer.shap_values(x, nsamples=2**d - 2, silent=True,
                                           l1_reg=f"num_features({selected_count(d)})")[0]
    return out


def lime_selected(lattice: FloatArray, n_players: int, seed: int = 0) -> FloatArray:
    """LIME on the 0/1 mask: kernel-weighted ridge on the k = d // 2 highest-weight features."""
    from sklearn.linear_model import Ridge  # on first use: scikit-learn costs a second to import

    d = n_players
    lattice = np.atleast_2d(np.asarray(lattice, dtype=float))
    rng = np.random.default_rng(seed)
    removed = rng.integers(1, d, size=LIME_SAMPLES) if d > 1 else np.zeros(LIME_SAMPLES, int)
    order = np.argsort(rng.random((LIME_SAMPLES, d)), axis=1)
    masks = ~(np.argsort(order, axis=1) < removed[:, None])
    masks[0] = True  # LIME keeps the instance itself as the first sample
    cosine = masks.sum(axis=1) / np.sqrt(np.maximum(masks.sum(axis=1), 1) * d)
    distance = (1.0 - cosine) * 100
    kernel = np.sqrt(np.exp(-(distance**2) / LIME_KERNEL_WIDTH**2))
    rows = masks.astype(np.int64) @ (np.int64(1) << np.arange(d, dtype=np.int64))
    out = np.zeros((len(lattice), d))
    for g, values in enumerate(lattice):
        y = values[rows]
        full_fit = Ridge(alpha=0.01).fit(masks, y, sample_weight=kernel)
        keep = np.argsort(-np.abs(full_fit.coef_))[:selected_count(d)]
        out[g, keep] = Ridge(alpha=1.0).fit(masks[:, keep], y, sample_weight=kernel).coef_
    return out


ATTRIBUTE: dict[str, Callable[[FloatArray, int, int], FloatArray]] = {
    "proportional": proportional_shapley,
    "kernel-l1": kernel_shap_l1,
    "lime": lime_selected,
}
"""How each method core refuses (core.attribution.NOT_DECOMPOSABLE) would attribute a game."""


def additivity_error(method: str, calibration: FloatArray, instance: FloatArray,
                     n_players: int, seed: int = 0) -> float:
    """max |φ(v_C + v_I) − φ(v_C) − φ(v_I)| of a refused method on lattice values."""
    attribute = ATTRIBUTE[method]
    instance = np.atleast_2d(instance)
    total = calibration[None, :] + instance
    phi_c = attribute(calibration, n_players, seed)
    gap = attribute(total, n_players, seed) - phi_c - attribute(instance, n_players, seed)
    return float(np.abs(gap).max())

"""shap's KernelExplainer (l1_reg=False) as a design: its coalitions and weights, our solve.

shap is run once per (d, budget, seed) on a stand-in game to record which coalitions it
evaluates and with which kernel weights; those depend on d, the budget and the random draws
only, never on game values, so the design is fixed before any game is seen. The map from values
to φ is then the same constrained least squares shap solves (it eliminates one variable; we
solve the KKT system: the same minimiser), applied to the calibration, instance and total games
alike. Running shap itself on the stacked game [v_C, v_I] gives the same numbers (tested), up
to shap zeroing any |φ| < 1e-10.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from cpdecomp.core.attribution.kernel import (
    Schedule,
    checked_kernel_budget,
    kernel_schedule,
)
from cpdecomp.core.attribution.regression import Draws, RegressionDesign, regression_design
from cpdecomp.core.attribution.shap_backend import global_numpy_seed, mask_instance
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.optional import require

METHOD_NAME = "shap's KernelExplainer"


class _WeightLog(np.ndarray):
    """shap's kernelWeights, also keeping every value written element by element.

    shap writes 1.0 for a new sampled coalition and adds 1.0 per repeat, element by element,
    then rescales the sampled part with one slice write: the element writes are the draw counts.
    """

    log: np.ndarray | None

    def __array_finalize__(self, obj: object) -> None:
        self.log = None  # views (slices) never log: only the array shap owns does

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        if self.log is not None and isinstance(key, (int, np.integer)):
            self.log[key] = value


@cache
def recording_kernel_explainer() -> type:
    """shap's KernelExplainer that keeps the raw weights and skips the solve.

    Built on first use: importing shap costs seconds that only its methods should pay.
    """
    shap = require("shap", "the shap-kernel method")

    class RecordingKernelExplainer(shap.KernelExplainer):  # type: ignore[name-defined]
        def allocate(self) -> None:
            super().allocate()
            weights = self.kernelWeights.view(_WeightLog)  # type: ignore[has-type]
            weights.log = np.zeros(len(weights))
            self.kernelWeights = weights

        def solve(self, fraction_evaluated: float, dim: int) -> tuple[np.ndarray, np.ndarray]:
            return np.zeros(self.M), np.ones(self.M)

    return RecordingKernelExplainer


def shap_kernel_design(n_players: int, budget: int | None = None,
                       seed: int = 0) -> RegressionDesign:
    """The coalitions and weights shap's KernelExplainer uses with nsamples = budget − 2."""
    d = n_players
    requested = checked_kernel_budget(d, budget, METHOD_NAME)
    n_samples = min(requested, 2**d) - 2
    if d == 1:  # shap skips the regression for one feature: φ = v(N) − v(∅)
        return regression_design("shap-kernel", np.zeros((0, d), dtype=bool), np.zeros(0),
                                 budget=2, seed=seed)
    x, background = mask_instance(d)
    with global_numpy_seed(seed):
        explainer = recording_kernel_explainer()(lambda rows: np.zeros(len(rows)), background)
        explainer.shap_values(x, nsamples=n_samples, l1_reg=False, silent=True)
    n = explainer.nsamplesAdded
    masks = explainer.maskMatrix[:n] > 0.5
    weights = np.asarray(explainer.kernelWeights[:n], dtype=float)
    counts = explainer.kernelWeights.log[:n]
    schedule = kernel_schedule(d, n_samples)
    draws = recorded_draws(masks, counts, schedule, d)
    return regression_design("shap-kernel", masks, weights, draws=draws, budget=n + 2,
                             seed=seed)


def recorded_draws(masks: np.ndarray, counts: np.ndarray, schedule: Schedule,
                   n_players: int) -> Draws | None:
    """Group shap's sampled rows into draws: a paired draw is a row then its complement."""
    n_fixed = sum(c.n_coalitions for c in schedule.enumerated)
    sizes = masks.sum(axis=1)
    enumerated_sizes = {c.size for c in schedule.enumerated} | {
        n_players - c.size for c in schedule.enumerated}
    if not set(sizes[:n_fixed].tolist()) <= enumerated_sizes:
        raise CpdecompError("shap's KernelExplainer enumerated other coalitions than expected")
    if n_fixed >= len(masks):
        return None
    paired_sizes = {c.size for c in schedule.drawn if c.paired}
    first, second, count = [], [], []
    i = n_fixed
    while i < len(masks):
        is_pair = (sizes[i] in paired_sizes and i + 1 < len(masks)
                   and bool(np.all(masks[i + 1] == ~masks[i])))
        first.append(i)
        second.append(i + 1 if is_pair else -1)
        count.append(counts[i])
        i += 2 if is_pair else 1
    count_array = np.asarray(count)
    if np.any(count_array < 1) or not np.allclose(count_array, np.round(count_array)):
        raise CpdecompError("shap's KernelExplainer recorded non-integer draw counts")
    return Draws(first=np.asarray(first), second=np.asarray(second),
                 count=np.round(count_array).astype(np.int64), mass=schedule.drawn_mass)

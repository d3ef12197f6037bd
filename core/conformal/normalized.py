"""Normalized residual: s = |y - f| / sigma, width 2 q sigma(x), split on the log scale."""

from __future__ import annotations

import numpy as np

from cpdecomp.core.conformal.base import Components, Scale, require_finite, require_positive
from cpdecomp.core.typing import FloatArray

SIGMA_NOT_POSITIVE_FIX = (
    "sigma is the patient's expected spread, so it must stay above 0. Give a difficulty model "
    "that cannot predict 0 or less (one with a log link, such as "
    "HistGradientBoostingRegressor(loss='poisson') fitted to |y - f|, or a model of "
    "log |y - f| whose prediction is exponentiated); or give no difficulty model, and cpdecomp "
    "fits its own; or floor yours from Python (system_from_models(..., "
    "floors={'sigma': 0.01})); or use the absolute family, which needs no sigma"
)
"""What a user whose own sigma model predicts 0 or less can do (there is no floor setting in
the command line or the dashboard: a user's model is used as given)."""


class NormalizedResidual:
    name = "normalized"
    label = "Normalized residual"
    scale: Scale = "log"
    components: tuple[str, ...] = ("f", "sigma")
    instance_components: tuple[str, ...] = ("sigma",)
    uses_quantile_level = False
    positive_point = False
    refuses_crossing = False

    def scores(self, y: FloatArray, comps: Components) -> FloatArray:
        return np.abs(y - comps["f"]) / comps["sigma"]

    def calibration_value(self, q: FloatArray) -> FloatArray:
        return np.log(2.0 * np.asarray(q, dtype=float))

    def instance_value(self, comps: Components) -> FloatArray:
        return np.log(comps["sigma"])

    def interval(self, q: float | FloatArray, comps: Components) -> tuple[FloatArray, FloatArray]:
        half = q * comps["sigma"]
        return comps["f"] - half, comps["f"] + half

    def check_targets(self, y: FloatArray, where: str) -> None:
        pass  # every real target has a score

    def check_components(self, comps: Components, where: str) -> None:
        if "f" in comps:
            require_finite(comps["f"], "the point prediction f", where)
        require_positive(
            comps["sigma"], "the difficulty model sigma", where,
            SIGMA_NOT_POSITIVE_FIX,
        )

    def check_quantile(self, q: FloatArray, where: str) -> None:
        require_positive(
            q, "the conformal quantile", where,
            "the log split needs q > 0: use the absolute family or a smaller alpha",
        )

"""Gamma (symmetric): s = |y - f| / f with f, y > 0; interval f(1 ± q), width 2 q f(x)."""

from __future__ import annotations

import numpy as np

from cpdecomp.core.conformal.base import Components, Scale, require_positive
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.typing import FloatArray


class GammaResidual:
    name = "gamma"
    label = "Gamma (relative residual)"
    scale: Scale = "log"
    components: tuple[str, ...] = ("f",)
    instance_components: tuple[str, ...] = ("f",)
    uses_quantile_level = False
    positive_point = True
    refuses_crossing = False

    def scores(self, y: FloatArray, comps: Components) -> FloatArray:
        return np.abs(y - comps["f"]) / comps["f"]

    def calibration_value(self, q: FloatArray) -> FloatArray:
        return np.log(2.0 * np.asarray(q, dtype=float))

    def instance_value(self, comps: Components) -> FloatArray:
        return np.log(comps["f"])

    def interval(self, q: float | FloatArray, comps: Components) -> tuple[FloatArray, FloatArray]:
        f = comps["f"]
        return f * (1.0 - q), f * (1.0 + q)

    def check_targets(self, y: FloatArray, where: str) -> None:
        if (np.asarray(y) <= 0).any():
            raise CpdecompError(
                f"the gamma family needs a positive target, but {where} has values <= 0; "
                "use the absolute or normalized family"
            )

    def check_components(self, comps: Components, where: str) -> None:
        require_positive(
            comps["f"], "the point prediction f", where,
            "the gamma family needs a positive prediction: use a positive target",
        )

    def check_quantile(self, q: FloatArray, where: str) -> None:
        require_positive(
            q, "the conformal quantile", where,
            "the log split needs q > 0: use the absolute family or a smaller alpha",
        )

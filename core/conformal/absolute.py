"""Absolute residual: s = |y - f(x)|, interval f(x) ± q, width 2q (the patient does not matter)."""

from __future__ import annotations

import numpy as np

from cpdecomp.core.conformal.base import Components, Scale, require_finite
from cpdecomp.core.typing import FloatArray


class AbsoluteResidual:
    name = "absolute"
    label = "Absolute residual"
    scale: Scale = "identity"
    components: tuple[str, ...] = ("f",)
    instance_components: tuple[str, ...] = ()
    uses_quantile_level = False
    positive_point = False
    refuses_crossing = False

    def scores(self, y: FloatArray, comps: Components) -> FloatArray:
        return np.abs(y - comps["f"])

    def calibration_value(self, q: FloatArray) -> FloatArray:
        return 2.0 * np.asarray(q, dtype=float)

    def instance_value(self, comps: Components) -> FloatArray:
        return np.zeros_like(np.asarray(comps["f"], dtype=float))

    def interval(self, q: float | FloatArray, comps: Components) -> tuple[FloatArray, FloatArray]:
        f = comps["f"]
        return f - q, f + q

    def check_targets(self, y: FloatArray, where: str) -> None:
        pass  # every real target has a score

    def check_components(self, comps: Components, where: str) -> None:
        require_finite(comps["f"], "the point prediction f", where)

    def check_quantile(self, q: FloatArray, where: str) -> None:
        require_finite(q, "the conformal quantile", where)

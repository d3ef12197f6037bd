"""Conformalized quantile regression (Romano et al.): s = max(f_lo - y, y - f_hi).

Interval [f_lo - q, f_hi + q], width f_hi - f_lo + 2q on the identity scale. q may be negative,
and a crossing (f_hi < f_lo) keeps its signed width: re-sorting the quantiles would break the
separation.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from cpdecomp.core.conformal.base import Components, Scale, require_finite
from cpdecomp.core.typing import FloatArray


class ConformalizedQuantile:
    name = "cqr"
    label = "CQR"
    scale: Scale = "identity"
    components: tuple[str, ...] = ("lo", "hi")
    instance_components: tuple[str, ...] = ("lo", "hi")
    instance_coefficients: ClassVar[dict[str, float]] = {"lo": -1.0, "hi": 1.0}
    """B(h) = hi − lo is linear in the components: φ_I is φ(hi) − φ(lo) (core.games.instance)."""
    uses_quantile_level = True
    positive_point = False
    refuses_crossing = False

    def scores(self, y: FloatArray, comps: Components) -> FloatArray:
        return np.maximum(comps["lo"] - y, y - comps["hi"])

    def calibration_value(self, q: FloatArray) -> FloatArray:
        return 2.0 * np.asarray(q, dtype=float)

    def instance_value(self, comps: Components) -> FloatArray:
        return comps["hi"] - comps["lo"]

    def interval(self, q: float | FloatArray, comps: Components) -> tuple[FloatArray, FloatArray]:
        return comps["lo"] - q, comps["hi"] + q

    def check_targets(self, y: FloatArray, where: str) -> None:
        pass  # every real target has a score

    def check_components(self, comps: Components, where: str) -> None:
        require_finite(comps["lo"], "the lower quantile model", where)
        require_finite(comps["hi"], "the upper quantile model", where)

    def check_quantile(self, q: FloatArray, where: str) -> None:
        require_finite(q, "the conformal quantile", where)

"""CQR-r (range-scaled): s = max(f_lo - y, y - f_hi) / (f_hi - f_lo), width Δ(x)(1 + 2q)."""

from __future__ import annotations

import numpy as np

from cpdecomp.core.conformal.base import Components, Scale, require_positive
from cpdecomp.core.typing import FloatArray


class RangeScaledQuantile:
    name = "cqr-r"
    label = "CQR-r (range-scaled)"
    scale: Scale = "log"
    components: tuple[str, ...] = ("lo", "hi")
    instance_components: tuple[str, ...] = ("lo", "hi")
    uses_quantile_level = True
    positive_point = False
    refuses_crossing = True

    def scores(self, y: FloatArray, comps: Components) -> FloatArray:
        spread = comps["hi"] - comps["lo"]
        return np.maximum(comps["lo"] - y, y - comps["hi"]) / spread

    def calibration_value(self, q: FloatArray) -> FloatArray:
        return np.log(1.0 + 2.0 * np.asarray(q, dtype=float))

    def instance_value(self, comps: Components) -> FloatArray:
        return np.log(comps["hi"] - comps["lo"])

    def interval(self, q: float | FloatArray, comps: Components) -> tuple[FloatArray, FloatArray]:
        spread = comps["hi"] - comps["lo"]
        return comps["lo"] - q * spread, comps["hi"] + q * spread

    def check_targets(self, y: FloatArray, where: str) -> None:
        pass  # every real target has a score

    def check_components(self, comps: Components, where: str) -> None:
        require_positive(
            comps["hi"] - comps["lo"], "the quantile range f_hi - f_lo", where,
            "the quantile models cross there; use the cqr family, which allows crossing",
        )

    def check_quantile(self, q: FloatArray, where: str) -> None:
        require_positive(
            1.0 + 2.0 * np.asarray(q, dtype=float), "1 + 2q", where,
            "the calibration scores are too negative for the log split; use the cqr family",
        )

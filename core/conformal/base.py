"""What a separable split-conformal family provides.

A family maps fitted components (f, sigma, f_lo, f_hi) and a conformal quantile q-hat to
intervals, and splits its width on its scale T as T(U(x)) = A(q-hat) + B(h(x)). A family knows
nothing about games: the games hand it arrays of masked components whose last axis is rows,
with any leading axes (coalitions), and it answers elementwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Protocol

import numpy as np

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.typing import FloatArray

Scale = Literal["identity", "log"]
Components = Mapping[str, FloatArray]


class Family(Protocol):
    """A separable split-conformal family (method page §2)."""

    name: str
    label: str
    scale: Scale
    components: tuple[str, ...]
    """Fitted components its scores and widths use, in the order they are fitted."""
    instance_components: tuple[str, ...]
    """The subset its instance summary h(x) uses (empty when the width ignores x)."""
    uses_quantile_level: bool
    """Whether its fit depends on the quantile level (quantile models at alpha/2 and
    1 - alpha/2); the other families fit the same components at any level."""
    positive_point: bool
    """Whether the point model must predict positive values (it is fitted with a positive link)."""
    refuses_crossing: bool
    """Whether it is undefined where the quantile models cross (f_hi <= f_lo at a row or a
    masked row), so a fit whose training rows show crossing is warned about."""

    def scores(self, y: FloatArray, comps: Components) -> FloatArray:
        """Conformity scores s(x, y); y broadcasts against the components' last axis."""
        ...

    def calibration_value(self, q: FloatArray) -> FloatArray:
        """A(c(q)): the calibration-only term of T(width)."""
        ...

    def instance_value(self, comps: Components) -> FloatArray:
        """B(h(x)): the instance-only term of T(width)."""
        ...

    def interval(self, q: float | FloatArray, comps: Components) -> tuple[FloatArray, FloatArray]:
        """Lower and upper interval bounds."""
        ...

    def check_targets(self, y: FloatArray, where: str) -> None:
        """Refuse targets on which the family is undefined (y <= 0 on gamma), naming the fix.

        `where` names the rows in the message ("training", "calibration").
        """
        ...

    def check_components(self, comps: Components, where: str) -> None:
        """Refuse components on which the family is undefined (sigma <= 0, f <= 0, ...).

        `comps` may hold only the instance components (the instance game checks those).
        """
        ...

    def check_quantile(self, q: FloatArray, where: str) -> None:
        """Refuse a quantile on which A is undefined (q = 0 on a log family, ...)."""
        ...


def to_width_scale(scale: Scale, value: FloatArray) -> FloatArray:
    """Invert T: the width whose T-value is `value`."""
    return np.exp(value) if scale == "log" else value


def from_width_scale(scale: Scale, width: FloatArray) -> FloatArray:
    """Apply T to a width."""
    return np.log(width) if scale == "log" else width


def require_positive(values: FloatArray, what: str, where: str, hint: str) -> None:
    """Refuse when any value is not strictly positive and finite."""
    values = np.asarray(values)
    bad = ~(np.isfinite(values) & (values > 0))
    if bad.any():
        worst = float(np.nanmin(np.where(np.isfinite(values), values, -np.inf)))
        raise CpdecompError(
            f"{what} must be positive on every {where}, but {int(bad.sum())} of {bad.size} "
            f"values are not (smallest {worst:.4g}); {hint}"
        )


def require_finite(values: FloatArray, what: str, where: str) -> None:
    """Refuse NaN or infinite values (a broken model or data), never pass them on."""
    bad = ~np.isfinite(np.asarray(values))
    if bad.any():
        raise CpdecompError(
            f"{what} is not finite on {int(bad.sum())} {where} values; "
            "check the data for infinities or extreme values"
        )

"""Separable split-conformal families; the registry's keys are the labels users type."""

from cpdecomp.core.conformal.absolute import AbsoluteResidual
from cpdecomp.core.conformal.base import Family, Scale, from_width_scale, to_width_scale
from cpdecomp.core.conformal.cqr import ConformalizedQuantile
from cpdecomp.core.conformal.cqr_range import RangeScaledQuantile
from cpdecomp.core.conformal.gamma import GammaResidual
from cpdecomp.core.conformal.normalized import NormalizedResidual
from cpdecomp.core.conformal.rank import (
    alpha_fraction,
    conformal_rank,
    kth_smallest,
    minimum_calibration_size,
)
from cpdecomp.core.errors import CpdecompError

FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        AbsoluteResidual(),
        NormalizedResidual(),
        GammaResidual(),
        ConformalizedQuantile(),
        RangeScaledQuantile(),
    )
}
"""The conformal families by name, in menu order: `absolute`, `normalized`, `gamma`, `cqr` and
`cqr-r`. Each is a `Family` (core/conformal/base.py): its score, how its width separates into a
calibration term and an instance term, and what it refuses."""


def get_family(name: str) -> Family:
    """The family registered under `name`, or a message listing the choices."""
    try:
        return FAMILIES[name]
    except KeyError:
        choices = ", ".join(FAMILIES)
        raise CpdecompError(f"unknown CP family {name!r}; choose one of {choices}") from None


__all__ = [
    "FAMILIES",
    "Family",
    "Scale",
    "alpha_fraction",
    "conformal_rank",
    "from_width_scale",
    "get_family",
    "kth_smallest",
    "minimum_calibration_size",
    "to_width_scale",
]

"""The split-conformal rank rule, in exact integer arithmetic.

k = ceil((n + 1)(1 - alpha)) = n + 1 - floor((n + 1) alpha). Floating point gets this wrong
exactly when (n + 1)(1 - alpha) is an integer (e.g. n = 9, alpha = 0.1), so alpha is read as
the fraction its decimal string denotes.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.typing import FloatArray


def alpha_fraction(alpha: float | str | Fraction) -> Fraction:
    """Alpha as the exact fraction its shortest decimal spelling denotes (0.1 -> 1/10)."""
    if isinstance(alpha, Fraction):
        value = alpha
    else:
        try:
            # repr(float) is the shortest string that round-trips, so 0.1 -> "0.1" -> 1/10.
            value = Fraction(alpha if isinstance(alpha, str) else repr(float(alpha)))
        except (ValueError, ZeroDivisionError) as exc:
            raise CpdecompError(f"alpha must be a number between 0 and 1, got {alpha!r}") from exc
        # A float artifact (0.30000000000000004, or 1/3 as a float) has 16+ significant digits:
        # read it as the nearest fraction with a denominator up to 1e9. Short spellings such
        # as "1e-12" are exact as written.
        digits = len(str(abs(value.numerator)))
        if value.denominator > 10**9 and digits >= 12:
            value = value.limit_denominator(10**9)
    if not 0 < value < 1:
        raise CpdecompError(f"alpha must be strictly between 0 and 1, got {float(value):g}")
    return value


def minimum_calibration_size(alpha: float | str | Fraction) -> int:
    """Smallest n with a finite conformal quantile: the least n with floor((n + 1) alpha) >= 1."""
    a = alpha_fraction(alpha)
    return max(1, math.ceil(1 / a) - 1)


def conformal_rank(n: int, alpha: float | str | Fraction) -> int:
    """1-based rank k of the conformal quantile among n scores; refuses when q-hat is infinite."""
    a = alpha_fraction(alpha)
    if n < 1:
        raise CpdecompError("the calibration set is empty; it needs at least one row")
    k = n + 1 - math.floor((n + 1) * a)
    if k > n:
        need = minimum_calibration_size(a)
        raise CpdecompError(
            f"calibration set has {n} rows; alpha = {float(a):g} needs at least {need} "
            f"(n >= 1/alpha - 1), so use more calibration rows or a larger alpha"
        )
    return k


def kth_smallest(scores: FloatArray, k: int) -> FloatArray:
    """The k-th smallest value (1-based) along the last axis, without a full sort."""
    return np.partition(scores, k - 1, axis=-1)[..., k - 1]

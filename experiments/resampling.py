"""Intervals over resplits (claim 1); claim 2's paired bootstrap over draws is in
experiments.decision_task."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
from scipy.stats import t as t_dist

LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """A point estimate with a percentile interval."""

    estimate: float
    low: float
    high: float

    def text(self, digits: int = 2, percent: bool = False) -> str:
        scale, suffix = (100.0, "%") if percent else (1.0, "")
        d = max(digits - 2, 0) if percent else digits
        return (f"{self.estimate * scale:.{d}f}{suffix} "
                f"[{self.low * scale:.{d}f}, {self.high * scale:.{d}f}]")


def bootstrap_mean(values: Sequence[float], replicates: int, rng: np.random.Generator,
                   level: float = LEVEL) -> Interval:
    """Mean of per-resplit values with a percentile bootstrap interval over resplits."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return Interval(np.nan, np.nan, np.nan)
    if values.size == 1:
        return Interval(float(values[0]), float(values[0]), float(values[0]))
    draws = rng.integers(0, values.size, size=(replicates, values.size))
    means = values[draws].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return Interval(float(values.mean()), float(low), float(high))


def mean_interval(values: Sequence[float], level: float = LEVEL) -> Interval:
    """Mean with a two-sided t interval: honest at the few resplits a run affords, where a
    percentile bootstrap of 3 values is no wider than their range."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return Interval(np.nan, np.nan, np.nan)
    mean = float(values.mean())
    if values.size == 1:
        return Interval(mean, -np.inf, np.inf)  # one resplit says nothing about its spread
    half = float(t_dist.ppf(1 - (1 - level) / 2, values.size - 1)
                 * values.std(ddof=1) / np.sqrt(values.size))
    return Interval(mean, mean - half, mean + half)


def share_interval(flags: Sequence[bool], level: float = LEVEL) -> Interval:
    """Share of True with a Wilson score interval: inside [0, 1] and not of zero width at 0 %
    or 100 %, where a t interval over 0/1 values is both."""
    flags = np.asarray(flags, dtype=bool)
    n = flags.size
    if n == 0:
        return Interval(np.nan, np.nan, np.nan)
    p = float(flags.mean())
    z = float(norm.ppf(1 - (1 - level) / 2))
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half))

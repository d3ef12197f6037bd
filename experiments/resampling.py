"""Intervals over resplits and paired bootstrap intervals over patients."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import t as t_dist

from core.typing import FloatArray

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


def stratified_indices(groups: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One bootstrap draw of row positions, resampling rows within each group (resplit)."""
    picks = []
    for group in np.unique(groups):
        members = np.flatnonzero(groups == group)
        picks.append(members[rng.integers(0, members.size, members.size)])
    return np.concatenate(picks)


Ratio = tuple[FloatArray, FloatArray]
"""(numerator, denominator) per row: a metric is Σ numerator / Σ denominator."""


Pair = tuple[str, str]


def paired_bootstrap(metrics: dict[str, Ratio], groups: np.ndarray, pairs: Sequence[Pair],
                     replicates: int, rng: np.random.Generator, level: float = LEVEL
                     ) -> tuple[dict[str, Interval], dict[Pair, Interval]]:
    """Ratio metrics and paired differences, all computed on the same resampled rows.

    Pairing is what makes a difference between two rules meaningful: both are scored on the
    same patients in every replicate, so patient-to-patient variation cancels.
    """
    def ratio(parts: Ratio, index: np.ndarray | slice) -> float:
        denominator = parts[1][index].sum()
        return float(parts[0][index].sum() / denominator) if denominator > 0 else np.nan

    point = {name: ratio(parts, slice(None)) for name, parts in metrics.items()}
    draws = {name: np.empty(replicates) for name in metrics}
    for b in range(replicates):
        index = stratified_indices(groups, rng)
        for name, parts in metrics.items():
            draws[name][b] = ratio(parts, index)
    tail = (1 - level) / 2

    def interval(estimate: float, values: FloatArray) -> Interval:
        finite = values[np.isfinite(values)]
        if finite.size == 0:
            return Interval(estimate, np.nan, np.nan)
        low, high = np.quantile(finite, [tail, 1 - tail])
        return Interval(estimate, float(low), float(high))

    singles = {name: interval(point[name], draws[name]) for name in metrics}
    differences = {
        (a, b): interval(point[a] - point[b], draws[a] - draws[b]) for a, b in pairs
    }
    return singles, differences


"""Coverage of the explained rows with an observed outcome, overall and by width.

Split conformal guarantees 1 - alpha on average over patients, not for the patients whose
intervals are narrowest: a difficulty model (sigma) that is too sure of some patients gives
them intervals that miss more often (issue 34 measured 80-81 % on the narrowest tenth at a
90 % target, normalized family). Coverage by width group (tenths of the rows, narrowest
first) says where that happens, each with an exact binomial range, so a shortfall on a few
rows is not read as one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from cpdecomp.core.typing import FloatArray

WIDTH_GROUPS = 10
"""Tenths of the rows by width (deciles)."""
MIN_GROUP_ROWS = 20
"""Fewer rows than this per group and the groups are fewer (at least two, or none)."""
RANGE_LEVEL = 0.95


def binomial_range(successes: int, n: int, level: float = RANGE_LEVEL) -> tuple[float, float]:
    """Clopper-Pearson (exact) interval for a proportion: never narrower than nominal."""
    from scipy.stats import beta

    if n == 0:
        return float("nan"), float("nan")
    tail = (1 - level) / 2
    low = 0.0 if successes == 0 else float(beta.ppf(tail, successes, n - successes + 1))
    high = 1.0 if successes == n else float(beta.ppf(1 - tail, successes + 1, n - successes))
    return low, high


@dataclass(frozen=True)
class WidthGroup:
    """One group of rows by width: its widths, rows, covered rows and coverage's range."""

    group: int
    """1 = the narrowest intervals."""
    of: int
    width_low: float
    width_high: float
    n: int
    covered: int
    coverage: float
    coverage_low: float
    coverage_high: float


def coverage_by_width(width: FloatArray, lower: FloatArray, upper: FloatArray,
                      targets: FloatArray | None, groups: int = WIDTH_GROUPS,
                      min_rows: int = MIN_GROUP_ROWS) -> list[WidthGroup]:
    """Coverage per equal-count group of the rows with an observed target, narrowest first.

    Empty when there are no targets, too few rows for two groups, or one width for all (the
    absolute family: every interval is as wide as the next).
    """
    if targets is None:
        return []
    y = np.asarray(targets, dtype=float)
    known = ~np.isnan(y)
    count = min(groups, int(known.sum()) // min_rows)
    w = np.asarray(width, dtype=float)[known]
    if count < 2 or np.ptp(w) <= 1e-12 * max(float(np.max(np.abs(w))), 1.0):
        return []
    inside = (y[known] >= np.asarray(lower)[known]) & (y[known] <= np.asarray(upper)[known])
    order = np.argsort(w, kind="stable")
    out = []
    for k, rows in enumerate(np.array_split(order, count)):
        covered, n = int(inside[rows].sum()), len(rows)
        low, high = binomial_range(covered, n)
        out.append(WidthGroup(k + 1, count, float(w[rows].min()), float(w[rows].max()), n,
                              covered, covered / n, low, high))
    return out


def narrowest_undercovered(groups: list[WidthGroup], target: float) -> WidthGroup | None:
    """The narrowest group when even the top of its 95 % range is below the target coverage
    (a shortfall its rows' noise does not explain), else None."""
    if groups and groups[0].coverage_high < target:
        return groups[0]
    return None


SHARE_NAMES = {10: "tenth", 9: "ninth", 8: "eighth", 7: "seventh", 6: "sixth", 5: "fifth",
               4: "quarter", 3: "third", 2: "half"}


def undercoverage_warning(groups: list[WidthGroup], target: float) -> str | None:
    """One plain sentence for reports when the narrowest intervals are under-covered."""
    group = narrowest_undercovered(groups, target)
    if group is None:
        return None
    share = SHARE_NAMES.get(group.of, f"1/{group.of}")
    return (f"the narrowest {share} of intervals held the observed value for "
            f"{group.coverage:.0%} of {group.n} rows (95% range {group.coverage_low:.0%} to "
            f"{group.coverage_high:.0%}), below the {target:.0%} intended: these patients' "
            "intervals are too narrow")


def width_group_records(groups: list[WidthGroup]) -> list[dict]:
    """The groups as plain records (a report's meta, a table)."""
    return [asdict(g) for g in groups]

"""Reading a report for people: coverage, sign disagreements, drivers and the review queue.

Everything here rearranges or counts numbers that core computed; no attribution is computed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from cpdecomp import Report
from cpdecomp.app.reviews import ReviewEvent
from cpdecomp.core.coverage import SHARE_NAMES, WidthGroup, binomial_range
from cpdecomp.core.decomposition import Decomposition

ZERO_SHARE = 1e-9
"""An attribution smaller than this fraction of the patient's largest one is rounding noise."""

SIGN_CUT = 0.02
"""A part smaller than 2 % of the patient's largest attribution is too small to matter: it
has no sign when disagreements are counted or marked ⇄ (stated beside the rates)."""

TOTAL_TOP = 3
"""A driver that is not among the total view's top three widening features is hidden by it."""

FlagRule = Literal["percentile", "absolute"]


@dataclass(frozen=True)
class Coverage:
    """Held-out rows whose observed target falls inside their interval."""

    covered: int
    n: int
    target: float

    @property
    def rate(self) -> float:
        return self.covered / self.n if self.n else float("nan")


def coverage(report: Report) -> Coverage:
    """Empirical coverage on the explained rows that have an observed target."""
    e = report.explanation
    return interval_coverage(report.targets, e.lower, e.upper, e.alpha)


def interval_coverage(targets: np.ndarray | None, lower: np.ndarray, upper: np.ndarray,
                      alpha: float) -> Coverage:
    """`coverage` from the arrays themselves (the rows with an observed target)."""
    target = 1.0 - alpha
    if targets is None:
        return Coverage(0, 0, target)
    y = np.asarray(targets, dtype=float)
    known = ~np.isnan(y)
    inside = (y[known] >= lower[known]) & (y[known] <= upper[known])
    return Coverage(int(inside.sum()), int(known.sum()), target)


def signs(values: np.ndarray, scale: np.ndarray, share: float = ZERO_SHARE) -> np.ndarray:
    """-1, 0 or +1 per entry of (patients, features); entries within `share` of the patient's
    `scale` count as 0, so float noise (or, with SIGN_CUT, a negligible part) is not a sign."""
    tolerance = share * np.asarray(scale, dtype=float)[:, None]
    return np.where(np.abs(values) <= tolerance, 0, np.sign(values)).astype(int)


def attribution_scale(calibration: np.ndarray, instance: np.ndarray,
                      total: np.ndarray) -> np.ndarray:
    """Per patient, the largest magnitude among the three views (patients x features, in
    their units)."""
    return np.max(np.abs(np.stack([calibration, instance, total])), axis=(0, 2))


def either(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    """a | b where both are known; the known one alone; None when neither is."""
    if a is None:
        return None if b is None else np.asarray(b, dtype=bool)
    return np.asarray(a, dtype=bool) if b is None else np.asarray(a, bool) | np.asarray(b, bool)


def calibration_unsettled(d: Decomposition) -> np.ndarray | None:
    """Per patient and feature: the calibration-driven part's direction is not settled, its
    interval over resampled calibration sets or over redrawn backgrounds holding 0 (None: the
    run computed neither interval). The one rule every page and count uses."""
    return either(d.calibration_sign_uncertain, d.background_sign_uncertain)


def instance_unsettled(d: Decomposition) -> np.ndarray | None:
    """Per patient and feature: the instance-driven part's interval over redrawn backgrounds
    holds 0, so another background could turn its direction (None: no redraws)."""
    if d.instance_background_low is None or d.instance_background_high is None:
        return None
    return (d.instance_background_low <= 0) & (d.instance_background_high >= 0)


def opposite(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """True where both signs are non-zero and differ."""
    return (a * b) < 0


def sign_disagreement(report: Report) -> pd.DataFrame:
    """Per feature: the share of patients whose views have opposite signs. A part whose
    interval holds 0 (direction not settled: `calibration_unsettled`, `instance_unsettled`)
    has no sign, so it is never counted as opposing the other."""
    d = report.explanation.decomposition
    return disagreement_shares(d.features, d.calibration, d.instance, d.total,
                               calibration_unsettled(d), instance_unsettled(d))


def disagreement_shares(features: Sequence[str], calibration: np.ndarray,
                        instance: np.ndarray, total: np.ndarray,
                        c_unsettled: np.ndarray | None,
                        i_unsettled: np.ndarray | None) -> pd.DataFrame:
    """`sign_disagreement` from the arrays themselves (patients x features) and the
    unsettled flags (None: the run computed no interval)."""
    scale = attribution_scale(calibration, instance, total)
    s_c, s_i, s_t = (signs(v, scale, SIGN_CUT) for v in (calibration, instance, total))
    if c_unsettled is not None:
        s_c = np.where(c_unsettled, 0, s_c)
    if i_unsettled is not None:
        s_i = np.where(i_unsettled, 0, s_i)
    n = max(len(total), 1)
    return pd.DataFrame({
        "feature": list(features),
        "calibration_vs_instance": opposite(s_c, s_i).sum(axis=0) / n,
        "total_vs_instance": opposite(s_t, s_i).sum(axis=0) / n,
    })


WIDTH_TIE = 1e-9
"""Widths closer than this fraction of the largest width are the same width. Under the
absolute family every width is 2q, yet rounding leaves a spread of ~1e-15; compared exactly,
that spread flagged patients and split one histogram bar into many."""


def comparable_widths(widths: np.ndarray) -> np.ndarray:
    """Widths with near-ties made exact ties: each run of sorted widths whose steps are within
    WIDTH_TIE of the largest width takes the run's first value. Flags, percentiles, the
    histogram and the queue's order all compare these."""
    widths = np.asarray(widths, dtype=float)
    if widths.size == 0:
        return widths
    tolerance = WIDTH_TIE * max(float(np.max(np.abs(widths))), np.finfo(float).tiny)
    order = np.argsort(widths, kind="stable")
    ordered = widths[order]
    starts = np.concatenate([[True], np.diff(ordered) > tolerance])
    snapped = ordered[np.flatnonzero(starts)[np.cumsum(starts) - 1]]
    result = np.empty_like(widths)
    result[order] = snapped
    return result


def widths_tied(widths: np.ndarray) -> bool:
    """True when every patient has the same width (within WIDTH_TIE)."""
    comparable = comparable_widths(widths)
    return comparable.size > 0 and bool(np.all(comparable == comparable[0]))


def percentile_ranks(widths: np.ndarray) -> np.ndarray:
    """Each width's percentile among all widths (share of patients with a width at most it,
    near-ties counted as ties)."""
    widths = comparable_widths(widths)
    if widths.size == 0:
        return widths
    ordered = np.sort(widths)
    return 100.0 * np.searchsorted(ordered, widths, side="right") / widths.size


def flag_threshold(widths: np.ndarray, rule: FlagRule, value: float) -> float:
    """The width above which a patient is flagged: a percentile of the widths, or `value`."""
    if rule == "percentile":
        return float(np.percentile(comparable_widths(widths), value))
    return float(value)


def flagged_positions(widths: np.ndarray, threshold: float) -> np.ndarray:
    """Patients whose width is above `threshold` by more than a near-tie."""
    widths = comparable_widths(widths)
    tolerance = WIDTH_TIE * max(float(np.max(np.abs(widths), initial=0.0)), abs(threshold),
                                np.finfo(float).tiny)
    return np.flatnonzero(widths > threshold + tolerance)


@dataclass(frozen=True)
class Driver:
    """The feature that widens a patient's interval most in one view, and what the total shows."""

    view: Literal["instance", "calibration"]
    feature: str | None
    value: float
    total: float
    effect: Literal["shows", "hides", "flips", "unsettled", "none"]
    """"unsettled": the total would hide or flip the driver, but the feature's
    calibration-driven direction is not settled, so neither is what the total does to it."""

    def describe(self) -> str:
        """One line for the queue: what the total view does to this driver."""
        if self.feature is None:
            return ""
        if self.effect == "flips":
            return f"total flips {self.feature} ({self.view}): shown as narrowing"
        if self.effect == "hides":
            return f"total hides {self.feature} ({self.view}): not in its top {TOTAL_TOP}"
        return ""

    def short(self) -> str:
        """A few words for the queue's column ("total hides s2"); describe() is the sentence."""
        if self.feature is None or self.effect not in ("flips", "hides"):
            return ""
        return f"total {self.effect} {self.feature}"


def top_driver(view: Literal["instance", "calibration"], features: tuple[str, ...],
               part: np.ndarray, total: np.ndarray,
               unsettled: np.ndarray | None = None) -> Driver:
    """The largest positive attribution of `part`, and whether `total` shows it.

    The total view flips the driver when it gives the feature a negative total (it reads as
    reassuring), and hides it when the total is not negative but the feature is not among the
    total view's top widening features. Where the feature's calibration-driven part is not
    settled (`unsettled`: its interval holds 0), a flip or a hide is "unsettled" and raises no
    warning: the total differs from the instance-driven part by that very part.
    """
    if part.size == 0 or not np.any(part > 0):
        return Driver(view, None, 0.0, 0.0, "none")
    j = int(np.argmax(part))
    total_j = float(total[j])
    widening = [k for k in np.argsort(-total, kind="stable") if total[k] > 0][:TOTAL_TOP]
    if total_j < 0:
        effect = "flips"
    elif j not in widening:
        effect = "hides"
    else:
        effect = "shows"
    if effect != "shows" and unsettled is not None and bool(unsettled[j]):
        effect = "unsettled"
    return Driver(view, features[j], float(part[j]), total_j, effect)  # type: ignore[arg-type]


def patient_drivers(report: Report, position: int) -> tuple[Driver, Driver]:
    """The top instance-driven and calibration-driven drivers of one patient."""
    d = report.explanation.decomposition
    total = d.total[position]
    uncertain = calibration_unsettled(d)
    unsettled = None if uncertain is None else uncertain[position]
    return (
        top_driver("instance", d.features, d.instance[position], total, unsettled),
        top_driver("calibration", d.features, d.calibration[position], total, unsettled),
    )


def queue_frame(report: Report, positions: np.ndarray,
                latest_reviews: Mapping[str, ReviewEvent]) -> pd.DataFrame:
    """One row per flagged patient: interval, drivers, total-view warning, review state.

    latest_reviews maps a patient id (as text) to its latest review event. Widths are the
    comparable ones (near-ties made ties), so the order and the shown width agree.
    """
    e = report.explanation
    ranks = percentile_ranks(e.width)
    widths = comparable_widths(e.width)
    rows = []
    for i in positions:
        i = int(i)
        instance, calibration = patient_drivers(report, i)
        warnings = [w for w in (instance.describe(), calibration.describe()) if w]
        short = [w for w in (instance.short(), calibration.short()) if w]
        patient = str(report.patient_ids[i])
        review = latest_reviews.get(patient)
        reviewed = review is not None and review.status == "reviewed"
        rows.append({
            "position": i,
            "patient_id": patient,
            "width": float(widths[i]),
            "status": "reviewed" if reviewed else "open",
            "warnings": ", ".join(short),
            "width_percentile": float(ranks[i]),
            "prediction": float(e.prediction[i]),
            "lower": float(e.lower[i]),
            "upper": float(e.upper[i]),
            "top_instance_driver": instance.feature or "",
            "instance_part": instance.value,
            "top_calibration_driver": calibration.feature or "",
            "calibration_part": calibration.value,
            "total_view": "; ".join(warnings) if warnings else "agrees",
            "unsettled_driver": "unsettled" in (instance.effect, calibration.effect),
            "reviewed": reviewed,
            "note": review.note if review else "",
            "reviewer": review.reviewer if review else "",
            "reviewed_at": review.created_at if review else "",
        })
    columns = ["position", "patient_id", "width", "status", "warnings", "width_percentile",
               "prediction", "lower",
               "upper", "top_instance_driver", "instance_part", "top_calibration_driver",
               "calibration_part", "total_view", "unsettled_driver", "reviewed", "note",
               "reviewer", "reviewed_at"]
    return pd.DataFrame(rows, columns=columns)


SORTS: dict[str, tuple[str, bool]] = {
    "widest first": ("width", False),
    "narrowest first": ("width", True),
    "patient id": ("patient_id", True),
    "not reviewed first": ("reviewed", True),
    "total view warnings first": ("total_view", True),
}
"""Queue orders offered in the menu: column and ascending."""


def sort_queue(frame: pd.DataFrame, order: str) -> pd.DataFrame:
    """The queue in one of the SORTS orders, ties broken by width (widest first)."""
    column, ascending = SORTS[order]
    if column == "total_view":
        key = frame["total_view"].eq("agrees")
        return frame.assign(_key=key).sort_values(
            ["_key", "width"], ascending=[True, False], kind="stable").drop(columns="_key")
    if column == "width":
        return frame.sort_values("width", ascending=ascending, kind="stable")
    return frame.sort_values([column, "width"], ascending=[ascending, False], kind="stable")


SUBGROUP_CATEGORIES = 6
"""A numeric feature with at most this many distinct values is grouped by value, not by
quartile (a 0/1 flag or a small score)."""


def subgroup_labels(values: pd.Series) -> pd.Series:
    """A group name per patient: the category (or the value of a feature with few values),
    or the quartile range of a numeric feature; missing values form a group of their own."""
    numeric = pd.to_numeric(values, errors="coerce")
    present = values.notna()
    if numeric[present].notna().all() and numeric.nunique() > SUBGROUP_CATEGORIES:
        bins = pd.qcut(numeric, 4, duplicates="drop")
        labels = bins.map(lambda b: f"{b.left:.4g} to {b.right:.4g}").astype(object)
    elif numeric[present].notna().all():
        labels = numeric.map(lambda v: f"{v:.6g}").astype(object)
    else:
        labels = values.astype(object).map(str)
    return labels.where(present, "(missing)")


def binomial_interval(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson (exact) interval for a proportion: never narrower than nominal."""
    return binomial_range(successes, n, level)


def coverage_word(low: float, high: float, aim: float) -> str:
    """Whether a coverage's 95 % range says the intervals are too narrow or too wide for
    these rows, or are as aimed."""
    if not np.isfinite(low):
        return ""
    if high < aim:
        return f"too narrow (below {aim:.0%})"
    if low > aim:
        return f"wider than needed (above {aim:.0%})"
    return "as aimed"


def width_group_name(group: WidthGroup) -> str:
    """'narrowest tenth', '2nd tenth', ..., 'widest tenth' (fifths, ... on fewer rows)."""
    share = SHARE_NAMES.get(group.of, f"1/{group.of}")
    if group.group == 1:
        return f"narrowest {share}"
    if group.group == group.of:
        return f"widest {share}"
    suffix = {2: "nd", 3: "rd"}.get(group.group, "th")
    return f"{group.group}{suffix} {share}"


def width_coverage_frame(groups: Sequence[WidthGroup], aim: float,
                         number: Callable[[float], str]) -> pd.DataFrame:
    """Coverage by width group for people: which intervals, their widths (rounded by
    `number`), the rows checked, coverage % with its 95 % range, and the reading."""
    return pd.DataFrame([{
        "intervals": width_group_name(g),
        "widths": f"{number(g.width_low)} to {number(g.width_high)}",
        "n": g.n, "coverage": 100 * g.coverage,
        "range": f"{100 * g.coverage_low:.0f} to {100 * g.coverage_high:.0f}",
        "reading": coverage_word(g.coverage_low, g.coverage_high, aim),
    } for g in groups], columns=["intervals", "widths", "n", "coverage", "range", "reading"])


def subgroup_summary(report: Report, feature: str) -> pd.DataFrame:
    """Per subgroup of `feature`: patients, coverage on the held-out rows with an observed
    target (with a 95 % exact interval), median width and the mean sums of the
    calibration-driven and instance-driven parts (in the report's units).

    The parts are those of the cohort's one conformal system: a group-conditional (Mondrian)
    calibration is not a sum of feature parts, so this is a report, not a separate system.
    """
    e = report.explanation
    d = e.decomposition
    groups = subgroup_labels(report.feature_values[feature].reset_index(drop=True))
    targets = (np.full(len(groups), np.nan) if report.targets is None
               else np.asarray(report.targets, dtype=float))
    known = ~np.isnan(targets)
    inside = known & (targets >= e.lower) & (targets <= e.upper)
    rows = []
    # Quartiles in their order on the axis, categories alphabetically, missing last.
    names = sorted(set(groups), key=lambda g: (g == "(missing)", _group_key(g)))
    for name in names:
        member = (groups == name).to_numpy()
        n_known, n_inside = int((member & known).sum()), int((member & inside).sum())
        low, high = binomial_interval(n_inside, n_known)
        rows.append({
            "group": name,
            "patients": int(member.sum()),
            "with observed target": n_known,
            "coverage": n_inside / n_known if n_known else float("nan"),
            "coverage, 95% low": low,
            "coverage, 95% high": high,
            "median width": float(np.median(e.width[member])),
            "mean calibration-driven": float(d.calibration[member].sum(axis=1).mean()),
            "mean instance-driven": float(d.instance[member].sum(axis=1).mean()),
        })
    return pd.DataFrame(rows)


def _group_key(name: str) -> tuple:
    """Numeric group names (values, quartile ranges) by their first number, others by text."""
    first = name.split(" to ")[0]
    try:
        return (0, float(first), name)
    except ValueError:
        return (1, 0.0, name)

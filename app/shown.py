"""What the result pages show of one run: a flat, frozen record of arrays and numbers.

Pages and figure builders read `Shown` and never walk core's records
(`report.explanation.decomposition.calibration`): the chain lives here once. No Streamlit:
a `Shown` is plain data, so the figures built from it can be kept per (run, units, patient).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Hashable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from cpdecomp import FAMILIES, Report
from cpdecomp.app import summaries
from cpdecomp.app.charts import feature_order
from cpdecomp.core.bounded import BoundedCache
from cpdecomp.core.coverage import WidthGroup, coverage_by_width


@dataclass(frozen=True, eq=False)
class Shown:
    """One run's report in the units on show, one row per patient (arrays of patients or of
    patients x features, in `features` order)."""

    key: Hashable
    """What fixes every number below (the run's configuration and the units): it keys the
    figures and tables kept per patient."""
    units: str
    """"width" or "log"."""
    units_label: str
    family: str
    method: str
    has_instance_part: bool
    """False for a family whose width ignores the patient (absolute): the instance-driven part
    is then zero for everyone."""

    patient_ids: list
    feature_values: pd.DataFrame
    targets: np.ndarray | None
    prediction: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    width: np.ndarray
    base_width: float
    alpha: float
    q_hat: float
    n_calibration: int
    background_size: int
    n_evaluations: int
    budget: int | None
    calibration_bootstrap: int

    features: tuple[str, ...]
    calibration: np.ndarray
    instance: np.ndarray
    total: np.ndarray
    calibration_se: np.ndarray | None
    instance_se: np.ndarray | None
    total_se: np.ndarray | None
    calibration_low: np.ndarray | None
    calibration_high: np.ndarray | None
    calibration_level: float | None
    calibration_unsettled: np.ndarray | None
    """Per patient and feature: the calibration-driven part's interval over resampled
    calibration sets, or over redrawn backgrounds, holds 0 (`summaries.calibration_unsettled`;
    None: the run computed neither)."""
    background_low: np.ndarray | None
    """The calibration-driven part's interval over redrawn backgrounds, per patient and
    feature (None: the run redrew none)."""
    background_high: np.ndarray | None
    instance_background_low: np.ndarray | None
    """The instance-driven part's interval over the same redrawn backgrounds."""
    instance_background_high: np.ndarray | None
    background_level: float | None
    background_bootstrap: int
    """Backgrounds drawn afresh behind the four arrays above (0: none)."""
    instance_unsettled: np.ndarray | None
    """Per patient and feature: the instance-driven part's background interval holds 0."""
    disagree: np.ndarray
    """Per patient and feature: the calibration-driven and instance-driven parts have opposite
    signs (parts under SIGN_CUT of the patient's largest attribution, and parts whose sign is
    not settled, have none)."""
    fixed_quantile: np.ndarray | None
    """The width's Shapley values at a fixed conformal quantile, in width units (None: not
    computed)."""
    efficient: bool
    empty_value: float
    full_value: np.ndarray
    number_scale: float
    """The scale every part on show is rounded at (`people_number`): the featureless width in
    width units; in log units the featureless log width or the largest total, the larger (a
    log width can be near 0)."""

    @property
    def n(self) -> int:
        return len(self.patient_ids)

    @property
    def sampled(self) -> bool:
        """The parts carry Monte Carlo standard errors (a sampled method)."""
        return (self.total_se is not None and self.calibration_se is not None
                and self.instance_se is not None)

    @cached_property
    def cohort(self) -> Cohort:
        """The Cohort page's numbers, worked out once per record (the run's worker does it as
        the run ends, so the page's first visit only draws)."""
        return cohort_summary(self)


@dataclass(frozen=True, eq=False)
class Cohort:
    """What the Cohort page reads of a run besides the record's arrays: counts, the
    comparable widths and the calibration-driven vector it draws."""

    coverage: summaries.Coverage
    by_width: list[WidthGroup]
    """Coverage by width group (tenths), narrowest first; empty without enough outcomes."""
    widths: np.ndarray
    """The comparable widths (near-ties made ties): the histogram's and the flags' widths."""
    tied: bool
    wider: float
    """Share of patients whose width is above the featureless one (beyond a near-tie)."""
    one_vector: bool
    """The calibration-driven part is one vector for the whole cohort (the additive scale);
    in width units a multiplicative family rescales it per patient."""
    vector: np.ndarray
    """That vector, or the cohort's mean of the per-patient ones."""
    order: np.ndarray
    """One feature order for the page: by the mean |total| over the patients."""
    disagreement: pd.DataFrame
    """Per feature, in `order`: the shares of patients whose views have opposite signs."""


def cohort_summary(shown: Shown) -> Cohort:
    widths = summaries.comparable_widths(shown.width)
    calibration = shown.calibration
    spread = float(np.ptp(calibration, axis=0).max()) if len(calibration) else 0.0
    one_vector = spread <= 1e-9 * max(float(np.abs(calibration).max(initial=0.0)), 1.0)
    vector = calibration[0] if one_vector else calibration.mean(axis=0)
    order = feature_order(np.abs(shown.total).mean(axis=0))
    disagreement = summaries.disagreement_shares(
        shown.features, calibration, shown.instance, shown.total,
        shown.calibration_unsettled, shown.instance_unsettled).iloc[order]
    return Cohort(
        coverage=summaries.interval_coverage(shown.targets, shown.lower, shown.upper,
                                             shown.alpha),
        by_width=coverage_by_width(shown.width, shown.lower, shown.upper, shown.targets),
        widths=widths, tied=summaries.widths_tied(shown.width),
        wider=float(np.mean(widths > shown.base_width * (1 + summaries.WIDTH_TIE))),
        one_vector=one_vector, vector=vector, order=order, disagreement=disagreement)


def disagreement_flags(calibration: np.ndarray, instance: np.ndarray, total: np.ndarray,
                       unsettled: np.ndarray | None,
                       instance_unsettled: np.ndarray | None = None) -> np.ndarray:
    """Per patient and feature (2-d arrays): calibration-driven and instance-driven parts of
    opposite signs; a part under SIGN_CUT of the patient's largest attribution has no sign, nor
    has a part whose interval holds 0 (`unsettled`, `instance_unsettled`)."""
    scale = summaries.attribution_scale(calibration, instance, total)
    flags = summaries.opposite(summaries.signs(calibration, scale, summaries.SIGN_CUT),
                               summaries.signs(instance, scale, summaries.SIGN_CUT))
    unsettled = summaries.either(unsettled, instance_unsettled)
    return flags if unsettled is None else flags & ~unsettled


def shown_report(report: Report, key: Hashable, target: str) -> Shown:
    """The flat record of `report` (in its own units); `target` names the width's units."""
    e = report.explanation
    d = e.decomposition
    units = d.units
    unsettled = summaries.calibration_unsettled(d)
    instance_unsettled = summaries.instance_unsettled(d)
    if units == "log":
        scale = max(abs(float(d.empty_value)), float(np.max(np.abs(d.total), initial=0.0)))
    else:
        scale = float(e.base_width)
    return Shown(
        key=key, units=units,
        units_label="log width" if units == "log" else f"width ({target} units)",
        family=e.family, method=e.method,
        has_instance_part=bool(FAMILIES[e.family].instance_components),
        patient_ids=list(report.patient_ids), feature_values=report.feature_values,
        targets=report.targets, prediction=e.prediction, lower=e.lower, upper=e.upper,
        width=e.width, base_width=float(e.base_width), alpha=float(e.alpha),
        q_hat=float(e.q_hat), n_calibration=e.n_calibration,
        background_size=e.background_size, n_evaluations=e.n_evaluations, budget=e.budget,
        calibration_bootstrap=e.calibration_bootstrap,
        features=tuple(d.features), calibration=d.calibration, instance=d.instance,
        total=d.total, calibration_se=d.calibration_se, instance_se=d.instance_se,
        total_se=d.total_se, calibration_low=d.calibration_low,
        calibration_high=d.calibration_high, calibration_level=d.calibration_level,
        calibration_unsettled=unsettled,
        background_low=d.background_low, background_high=d.background_high,
        instance_background_low=d.instance_background_low,
        instance_background_high=d.instance_background_high,
        background_level=d.background_level, background_bootstrap=e.background_bootstrap,
        instance_unsettled=instance_unsettled,
        disagree=disagreement_flags(d.calibration, d.instance, d.total, unsettled,
                                    instance_unsettled),
        fixed_quantile=d.fixed_quantile, efficient=bool(d.efficient),
        empty_value=float(d.empty_value), full_value=d.full_value, number_scale=scale,
    )


KEPT_RECORDS = 16
"""Records kept, shared by the sessions: one per (run, units) in use."""
_records: BoundedCache[Hashable, tuple[weakref.ref[Report], Shown]] = BoundedCache(KEPT_RECORDS)
_records_lock = threading.Lock()


def shown_for(report: Report, key: Hashable, target: str) -> Shown:
    """`shown_report`, built once per report: every script run of every session showing the
    same run gets the same record (and what was kept with it: the Cohort page's numbers).

    Kept by `key` and checked against the report itself, so a report computed again (its study
    refitted after it left the cache) gets a record of its own. The record goes when its report
    does: the cache holds the report weakly, so a study the housekeeping released (a session
    that left) is not kept alive through its records' arrays."""
    with _records_lock:
        found = _records.get(key)
        if found is not None and found[0]() is report:
            return found[1]
    record = shown_report(report, key, target)
    with _records_lock:
        found = _records.get(key)
        if found is not None and found[0]() is report:
            return found[1]  # another session built it meanwhile: one record for all
        _records[key] = (weakref.ref(report), record)
    weakref.finalize(report, _forget, key, record)
    return record


def _forget(key: Hashable, record: Shown) -> None:
    """Drop `record` once its report is gone (unless a newer record took its key)."""
    with _records_lock:
        found = _records.get(key)
        if found is not None and found[1] is record:
            _records.pop(key)

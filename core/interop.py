"""A report in other libraries' shapes: shap.Explanation objects, and pandas frames.

    views = report.to_shap()            # {"calibration": ..., "instance": ..., "total": ...}
    shap.plots.waterfall(views["total"][0])
    frame = report.to_frame()           # the CLI's tidy columns, one row per patient x feature

Every view starts from the same base value, the featureless pipeline's width (its log in log
units), so the total view ends at the patient's width and base + Σ calibration + Σ instance is
that width too (φ_T = φ_C + φ_I).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.optional import require

if TYPE_CHECKING:
    from cpdecomp.core.workflow import Report

VIEWS = ("calibration", "instance", "total")

OPTIONAL_PARTS = ("calibration_se", "instance_se", "total_se", "calibration_low",
                  "calibration_high", "calibration_sign_uncertain", "fixed_quantile",
                  "background_low", "background_high", "instance_background_low",
                  "instance_background_high", "calibration_background_se",
                  "instance_background_se", "total_background_se")
"""Per (patient, feature) arrays a run has only when asked for (or for sampled methods, or
where brute force masks a component): Monte Carlo standard errors, φ_C's bootstrap interval and
its sign mark, the fixed-q̂ view, φ_C's and φ_I's intervals over redrawn backgrounds, and the
background's Monte Carlo standard errors from its batches."""


def optional_parts(report: Report) -> dict[str, np.ndarray]:
    """The optional per (patient, feature) arrays this report has, by output column name."""
    d = report.explanation.decomposition
    found = {name: getattr(d, name) for name in OPTIONAL_PARTS}
    return {name: values for name, values in found.items() if values is not None}


def tidy_frame(report: Report) -> pd.DataFrame:
    """One row per (patient, feature)."""
    e = report.explanation
    d = e.decomposition
    n_patients, n_features = d.total.shape
    repeat = lambda values: np.repeat(np.asarray(values), n_features)  # noqa: E731
    frame = pd.DataFrame({
        "patient_id": repeat(np.array(report.patient_ids, dtype=object)),
        "feature": np.tile(np.array(d.features, dtype=object), n_patients),
        "feature_value": report.feature_values.to_numpy(dtype=object).ravel(),
        "calibration": d.calibration.ravel(),
        "instance": d.instance.ravel(),
        "total": d.total.ravel(),
        "prediction": repeat(e.prediction),
        "lower": repeat(e.lower),
        "upper": repeat(e.upper),
        "width": repeat(e.width),
        "base_width": np.full(n_patients * n_features, e.base_width),
    })
    if report.targets is not None:
        frame["y"] = repeat(report.targets)
    for name, values in optional_parts(report).items():
        frame[name] = values.ravel()
    return frame

Layout = Literal["long", "wide"]


def shap_explanations(report: Report) -> dict[str, Any]:
    """One shap.Explanation per view (calibration-driven, instance-driven, total)."""
    shap = require("shap", "shap.Explanation output")
    d = report.explanation.decomposition
    # empty_value is on the family's scale (a log width for log families)
    start = report.explanation.base_width if d.units == "width" else d.empty_value
    base = np.full(len(report.patient_ids), float(start))
    shown = report.feature_values.to_numpy(dtype=object)
    numbers = report.feature_values.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    names = [str(i) for i in report.patient_ids]
    return {
        view: shap.Explanation(
            values=np.array(getattr(d, view), dtype=float), base_values=base, data=numbers,
            display_data=shown, feature_names=list(d.features), instance_names=names,
            output_names=f"{view} attribution of the interval width ({d.units} units)",
            error_std=getattr(d, f"{view}_se"),
        )
        for view in VIEWS
    }


def report_frame(report: Report, layout: Layout = "long") -> pd.DataFrame:
    """The CLI's tidy frame (long), or one row per patient with a column per view and feature."""
    long = tidy_frame(report)
    if layout == "long":
        return long
    if layout != "wide":
        raise CpdecompError(f"layout must be 'long' or 'wide', got {layout!r}")
    per_patient = [c for c in ("patient_id", "prediction", "lower", "upper", "width",
                               "base_width", "y") if c in long.columns]
    n_features = len(report.explanation.features)
    wide = long[per_patient].iloc[::n_features].reset_index(drop=True)
    d = report.explanation.decomposition
    for view in VIEWS:
        values = getattr(d, view)
        for j, name in enumerate(d.features):
            wide[f"{view}:{name}"] = values[:, j]
    return wide

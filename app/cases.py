"""One patient's case: the table, figures and facts the Patient page and the HTML summary share."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import charts, export, planning, summaries
from app.reading import patient_reading
from app.reviews import ReviewEvent
from app.state import Results, results_in_width_units, units_label
from app.text import people_number
from core import FAMILIES, MODELS
from core.attribution import METHOD_LABELS
from core.decomposition import Decomposition
from core.missing import is_missing

T = TypeVar("T")

KEPT_PER_PROCESS = 512
"""Patient figures and tables kept, shared by the sessions (a few tens of kB each)."""
_kept: OrderedDict[tuple, object] = OrderedDict()
_kept_lock = threading.Lock()


def kept(kind: str, results: Results, position: int, build: Callable[[], T]) -> T:
    """One patient's figure or table, built once per (run, units, patient, kind): going back to
    a patient, or a rerun of the page that does not change the patient, reuses it.

    The run's configuration and the units fix the report (a refitted study is the same, the
    fit being seeded), so they key the cache with the position. Callers never change what
    they get back."""
    key = (kind, results.config, results.units, position)
    with _kept_lock:
        if key in _kept:
            _kept.move_to_end(key)
            return _kept[key]  # type: ignore[return-value]
    value = build()
    with _kept_lock:
        _kept[key] = value
        while len(_kept) > KEPT_PER_PROCESS:
            _kept.popitem(last=False)
    return value


def disagreements(results: Results, position: int) -> np.ndarray:
    """Features whose calibration-driven and instance-driven parts have opposite signs (parts
    under SIGN_CUT of the patient's largest attribution have none)."""
    return decomposition_disagreements(results.report.explanation.decomposition, position)


def decomposition_disagreements(d: Decomposition, position: int) -> np.ndarray:
    """disagreements for one row of a decomposition. A calibration-driven part whose sign is
    not settled (its interval holds 0) has no sign to oppose."""
    scale = summaries.attribution_scale(d)[position:position + 1]
    flags = summaries.opposite(
        summaries.signs(d.calibration[position:position + 1], scale, summaries.SIGN_CUT),
        summaries.signs(d.instance[position:position + 1], scale, summaries.SIGN_CUT))[0]
    unsettled = calibration_unsettled(d, position)
    return flags if unsettled is None else flags & ~unsettled


def calibration_unsettled(d: Decomposition, position: int) -> np.ndarray | None:
    """Per feature: does the calibration-driven part's interval hold 0 (None: no interval)?"""
    uncertain = d.calibration_sign_uncertain
    return None if uncertain is None else np.asarray(uncertain[position], dtype=bool)


def calibration_range(d: Decomposition, position: int
                      ) -> tuple[np.ndarray, np.ndarray] | None:
    if d.calibration_low is None or d.calibration_high is None:
        return None
    return d.calibration_low[position], d.calibration_high[position]


def display_value(value: object) -> str:
    """A feature value as text: numbers to 6 significant digits, missing as empty."""
    if is_missing(value):
        return ""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, int | float | np.integer | np.floating):
        return f"{float(value):.6g}"
    return str(value)


def patient_table(results: Results, position: int) -> pd.DataFrame:
    """Per feature: the patient's value and the three attributions (kept: do not change it)."""
    return kept("table", results, position, lambda: _patient_table(results, position))


def _patient_table(results: Results, position: int) -> pd.DataFrame:
    report = results.report
    d = report.explanation.decomposition
    flags = disagreements(results, position)
    order = charts.feature_order(d.total[position])  # the charts' order
    span = calibration_range(d, position)
    unsettled = calibration_unsettled(d, position)
    return pd.DataFrame({
        "feature": list(d.features),
        # As text: a column mixing numbers and category names cannot go to Arrow, and
        # Streamlit's fallback logs the offending cell value.
        "value": feature_texts(results, position),
        "calibration-driven": d.calibration[position],
        "instance-driven": d.instance[position],
        "total": d.total[position],
        **({f"{name} ± SE": getattr(d, f"{part}_se")[position]
            for part, name in (("calibration", "calibration-driven"),
                               ("instance", "instance-driven"), ("total", "total"))}
           if d.total_se is not None else {}),
        **({"calibration-driven, low end": span[0], "calibration-driven, high end": span[1],
            "calibration-driven direction": ["not settled" if u else "settled"
                                             for u in unsettled]}
           if span is not None and unsettled is not None else {}),
        "signs differ": ["yes" if f else "" for f in flags],
    }).iloc[order].reset_index(drop=True)


def feature_texts(results: Results, position: int) -> list[str]:
    """The patient's value of each feature, as text."""
    values = results.report.feature_values.iloc[position]
    return [display_value(values[f]) for f in results.report.explanation.decomposition.features]


def number_scale(results: Results) -> float:
    """The width scale every number on show is rounded at (`people_number`): the featureless
    width in width units; in log units the featureless log width or the largest total, the
    larger (a log width can be near 0)."""
    e = results.report.explanation
    if results.units != "log":
        return float(e.base_width)
    d = e.decomposition
    return max(abs(float(d.empty_value)), float(np.max(np.abs(d.total), initial=0.0)))


def bars_figure(results: Results, position: int) -> go.Figure:
    """The patient's three panels (kept: do not change the figure)."""
    return kept("bars", results, position, lambda: decomposition_bars(
        results.report.explanation.decomposition, position, units_label(results),
        feature_texts(results, position), number_scale(results)))


def decomposition_bars(d: Decomposition, position: int, units: str,
                       values: Sequence[str], scale: float | None = None) -> go.Figure:
    """The three panels for one row of a decomposition (a cohort's patient or an edited one)."""
    return charts.side_by_side_bars(
        d.features, d.calibration[position], d.instance[position], d.total[position],
        units=units, disagree=decomposition_disagreements(d, position),
        errors=None if (d.total_se is None or d.calibration_se is None or d.instance_se is None)
        else (d.calibration_se[position], d.instance_se[position], d.total_se[position]),
        values=values, calibration_range=calibration_range(d, position), scale=scale,
    )


def fixed_quantile_figure(results: Results, position: int) -> go.Figure | None:
    """The practitioners' comparator for one patient, in the bars' feature order; None when
    the run did not compute it."""
    d = results.report.explanation.decomposition
    if d.fixed_quantile is None:
        return None
    order = charts.feature_order(d.total[position])
    fixed = d.fixed_quantile[position]
    # Always in width units, whatever the units on show: q̂ held fixed has no log scale.
    return kept("fixed_quantile", results, position, lambda: charts.vector_bars(
        d.features, fixed, order, view="fixed",
        units=units_label(replace(results, units="width")),
        scale=float(results.report.explanation.base_width),
        title="What a standard SHAP of the interval shows<br><sup>the width's Shapley values "
              "with the calibration set's quantile held fixed</sup>"))


def has_instance_part(results: Results) -> bool:
    """False for a family whose width ignores the patient (absolute): the instance-driven part
    is then zero for everyone."""
    return bool(FAMILIES[results.config.options.family].instance_components)


def case_reading(results: Results, position: int, unit: str = "") -> str:
    """The patient's case in one paragraph, in width units whatever the units on show."""
    width = results_in_width_units(results)
    e = width.report.explanation
    d = e.decomposition
    return patient_reading(d.features, d.calibration[position], d.instance[position],
                           d.total[position], float(e.width[position]), e.base_width,
                           unit=unit, has_instance_part=has_instance_part(results),
                           calibration_unsettled=calibration_unsettled(d, position))


def waterfall_figure(results: Results, position: int) -> go.Figure:
    """Steps from the featureless width to the patient's (log widths in log units; kept: do not
    change the figure)."""
    return kept("waterfall", results, position, lambda: _waterfall_figure(results, position))


def _waterfall_figure(results: Results, position: int) -> go.Figure:
    e = results.report.explanation
    d = e.decomposition
    if results.units == "log":
        start, end = d.empty_value, float(d.full_value[position])
        labels = ("featureless log width", "this patient's log width")
    else:
        start, end = e.base_width, float(e.width[position])
        labels = ("featureless width", "this patient's width")
    return charts.width_waterfall(d.features, d.total[position], start, end,
                                  units=units_label(results), start_label=labels[0],
                                  end_label=labels[1], scale=number_scale(results))


def configuration_facts(results: Results) -> dict[str, str]:
    """What the numbers depend on, for captions and the HTML summary."""
    config = results.config
    e = results.report.explanation
    options = config.options
    method = METHOD_LABELS.get(config.method, config.method)
    # The user's fitted models, when the run used them (its dataset carries them).
    dataset = st.session_state.get("run_dataset") if (
        st.session_state.get("last_run") == config) else None
    user_models = getattr(dataset, "models", None)
    if e.budget is not None and config.method != "exact":
        method += f", budget {e.budget}"
    return {
        "dataset": config.dataset_name,
        "target": options.target,
        "model": planning.model_name(options.model, user_models) if user_models else (
            MODELS[options.model].label if options.model in MODELS else options.model),
        "conformal family": f"{options.family} ({FAMILIES[options.family].label})",
        "α (miscoverage)": f"{e.alpha:g} (confidence {1 - e.alpha:.0%})",
        "calibration rows": str(e.n_calibration),
        "background rows": str(e.background_size),
        "attribution method": method,
        "seed": str(options.seed),
        "units": units_label(results),
    }


def case_html(results: Results, position: int, reviews: Sequence[ReviewEvent]) -> str:
    """A standalone HTML summary of one patient's case."""
    report = results.report
    e = report.explanation
    patient = str(report.patient_ids[position])
    scale = float(e.base_width)

    def num(value: float) -> str:
        return people_number(value, scale)

    facts = {
        "patient": patient,
        "prediction": num(e.prediction[position]),
        "interval": f"[{num(e.lower[position])}, {num(e.upper[position])}]",
        "width": f"{num(e.width[position])} (featureless width {num(e.base_width)})",
        "width percentile in the cohort":
            f"{summaries.percentile_ranks(e.width)[position]:.0f}",
    }
    if report.targets is not None and not np.isnan(report.targets[position]):
        facts["observed target"] = num(report.targets[position])
    facts.update(configuration_facts(results))
    notes = [
        "Calibration-driven: set by the calibration set through the conformal quantile. "
        "Instance-driven: set by this patient's own values. Total = calibration + instance. "
        f"Features marked {charts.DISAGREE_MARK} have parts of opposite signs.",
    ]
    if e.decomposition.calibration_low is not None:
        notes.append(
            "Whiskers on the calibration-driven bars: its 90% interval over "
            f"{e.calibration_bootstrap} resampled calibration sets. Features marked "
            f"{charts.UNSETTLED_MARK} (pale bars) have an interval holding 0: whether the "
            "calibration set makes them widen or narrow the interval is not settled.")
    return export.case_summary_html(
        title=f"cpdecomp case summary: patient {patient}", facts=facts,
        figures=[bars_figure(results, position), waterfall_figure(results, position)],
        table=patient_table(results, position),
        reviews=[{"created_at": r.created_at, "status": r.status, "note": r.note,
                  "reviewer": r.reviewer} for r in reviews],
        notes=notes,
    )

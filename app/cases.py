"""One patient's case: the table, figures and facts the Patient page and the HTML summary share;
and the Cohort page's figures.

Every function here takes data (a `Shown`, a decomposition) and never the session: the page
passes in what it read from the session, so a figure is a pure function of its inputs and is
kept per (run, units, patient), or per (run, units) for the cohort's.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from cpdecomp.app import charts, export, html_charts, summaries
from cpdecomp.app.reading import patient_reading
from cpdecomp.app.reviews import ReviewEvent
from cpdecomp.app.shown import Shown, disagreement_flags
from cpdecomp.app.text import decimals_for, people_number
from cpdecomp.core.decomposition import Decomposition
from cpdecomp.core.missing import is_missing

T = TypeVar("T")

KEPT_PER_PROCESS = 1024
"""Patient figures, tables and their HTML kept, shared by the sessions (a few tens of kB each;
six per patient)."""
_kept: OrderedDict[tuple, object] = OrderedDict()
_kept_lock = threading.Lock()


COHORT = -1
"""The position the cohort's own figures are kept under (no patient's)."""


def kept(kind: str, shown: Shown, position: int, build: Callable[[], T]) -> T:
    """One patient's figure or table, built once per (run, units, patient, kind): going back to
    a patient, or a rerun of the page that does not change the patient, reuses it (position
    COHORT: the cohort's figures, once per run and units).

    `shown.key` (the run's configuration and the units) fixes the report (a refitted study is
    the same, the fit being seeded), so it keys the cache with the position. Callers never
    change what they get back."""
    key = (kind, shown.key, position)
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


def decomposition_disagreements(d: Decomposition, position: int) -> np.ndarray:
    """`Shown.disagree` for one row of a decomposition (an edited patient's)."""
    row = slice(position, position + 1)
    unsettled, instance_unsettled = (summaries.calibration_unsettled(d),
                                     summaries.instance_unsettled(d))
    return disagreement_flags(d.calibration[row], d.instance[row], d.total[row],
                              None if unsettled is None else unsettled[row],
                              None if instance_unsettled is None else instance_unsettled[row])[0]


def calibration_range(shown: Shown, position: int) -> tuple[np.ndarray, np.ndarray] | None:
    if shown.calibration_low is None or shown.calibration_high is None:
        return None
    return shown.calibration_low[position], shown.calibration_high[position]


Range = tuple[np.ndarray, np.ndarray]


def background_ranges(low: np.ndarray | None, high: np.ndarray | None,
                      instance_low: np.ndarray | None, instance_high: np.ndarray | None,
                      position: int) -> tuple[Range, Range] | None:
    """One patient's ranges over redrawn backgrounds, (calibration-driven, instance-driven),
    as the bars take them; None when the run redrew no background."""
    if low is None or high is None or instance_low is None or instance_high is None:
        return None
    return (low[position], high[position]), (instance_low[position], instance_high[position])


def shown_background_ranges(shown: Shown, position: int) -> tuple[Range, Range] | None:
    return background_ranges(shown.background_low, shown.background_high,
                             shown.instance_background_low, shown.instance_background_high,
                             position)


def display_value(value: object) -> str:
    """A feature value as text: numbers to 6 significant digits, missing as empty."""
    if is_missing(value):
        return ""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, int | float | np.integer | np.floating):
        return f"{float(value):.6g}"
    return str(value)


def patient_table(shown: Shown, position: int) -> pd.DataFrame:
    """Per feature: the patient's value and the three attributions (kept: do not change it)."""
    return kept("table", shown, position, lambda: _patient_table(shown, position))


def patient_table_html(shown: Shown, position: int) -> str:
    """patient_table as the Patient page shows it: an HTML table with short headers, each
    header's full words when pointed at, numbers at the view's decimals (kept)."""
    return kept("table_html", shown, position, lambda: html_charts.table(
        patient_table(shown, position), table_columns(shown)))


def table_columns(shown: Shown) -> dict[str, html_charts.Column]:
    """Every column patient_table can have, as the Patient page shows it. Short headers with
    the full words in their help: at 1280 px every column shows without a scroll bar."""
    decimals = decimals_for(shown.number_scale)

    def number(header: str, help: str | None = None) -> html_charts.Column:
        return html_charts.Column(header, help, decimals)

    return {
        "feature": html_charts.Column("feature"),
        "value": html_charts.Column("value", "This patient's value of the feature."),
        "calibration-driven": number("calibration", "The calibration-driven part."),
        "instance-driven": number("instance", "The instance-driven part."),
        "total": number("total", "Calibration-driven + instance-driven."),
        **{f"{name} ± SE": number(f"{short} ± SE",
                                  f"One Monte Carlo standard error of the {name} part.")
           for name, short in (("calibration-driven", "calibration"),
                               ("instance-driven", "instance"), ("total", "total"))},
        "calibration-driven, low end": number(
            "calibration low", "Low end of the calibration-driven part's range with another "
                               "calibration set."),
        "calibration-driven, high end": number(
            "calibration high", "High end of the calibration-driven part's range with another "
                                "calibration set."),
        **{f"{name}, reference-sample {end}": number(
            f"{short} ref. {end}",
            f"{end.capitalize()} end of the {name} part's range with another reference sample "
            "(the training rows a left-out feature is averaged over).")
           for name, short in (("calibration-driven", "calibration"),
                               ("instance-driven", "instance")) for end in ("low", "high")},
        "calibration-driven direction": html_charts.Column(
            "direction", "Whether the calibration set settles if the feature widens or narrows "
                         "the interval (not settled: its range holds 0)."
            if shown.background_low is None else
            "Whether the calibration set and the reference sample settle if the feature "
            "widens or narrows the interval through the calibration set (not settled: a range "
            "holds 0)."),
        "instance-driven direction": html_charts.Column(
            "instance direction", "Whether the reference sample settles if the feature's "
                                  "instance-driven part widens or narrows the interval (not "
                                  "settled: its range holds 0)."),
        "signs differ": html_charts.Column(
            charts.DISAGREE_MARK, "The calibration-driven and instance-driven parts pull in "
                                  "opposite directions."),
    }


def _patient_table(shown: Shown, position: int) -> pd.DataFrame:
    flags = shown.disagree[position]
    order = charts.feature_order(shown.total[position])  # the charts' order
    span = calibration_range(shown, position)
    redrawn = shown_background_ranges(shown, position)
    unsettled = shown.calibration_unsettled
    errors = (shown.calibration_se, shown.instance_se, shown.total_se)
    return pd.DataFrame({
        "feature": list(shown.features),
        # As text: a column mixing numbers and category names cannot go to Arrow, and
        # Streamlit's fallback logs the offending cell value.
        "value": feature_texts(shown, position),
        "calibration-driven": shown.calibration[position],
        "instance-driven": shown.instance[position],
        "total": shown.total[position],
        **({f"{name} ± SE": se[position]
            for se, name in zip(errors, ("calibration-driven", "instance-driven", "total"),
                                strict=True) if se is not None}
           if shown.sampled else {}),
        **({"calibration-driven, low end": span[0], "calibration-driven, high end": span[1]}
           if span is not None else {}),
        **({"calibration-driven, reference-sample low": redrawn[0][0],
            "calibration-driven, reference-sample high": redrawn[0][1],
            "instance-driven, reference-sample low": redrawn[1][0],
            "instance-driven, reference-sample high": redrawn[1][1]}
           if redrawn is not None else {}),
        **({"calibration-driven direction": ["not settled" if u else "settled"
                                             for u in unsettled[position]]}
           if unsettled is not None else {}),
        **({"instance-driven direction": ["not settled" if u else "settled"
                                          for u in shown.instance_unsettled[position]]}
           if shown.instance_unsettled is not None else {}),
        "signs differ": ["yes" if f else "" for f in flags],
    }).iloc[order].reset_index(drop=True)


def feature_texts(shown: Shown, position: int) -> list[str]:
    """The patient's value of each feature, as text."""
    values = shown.feature_values.iloc[position]
    return [display_value(values[f]) for f in shown.features]


def part_errors(shown: Shown, position: int) -> tuple[np.ndarray, ...] | None:
    """The patient's Monte Carlo standard errors (calibration, instance, total), or None."""
    errors = (shown.calibration_se, shown.instance_se, shown.total_se)
    return None if any(se is None for se in errors) else tuple(
        se[position] for se in errors if se is not None)


def bars_figure(shown: Shown, position: int) -> go.Figure:
    """The patient's three panels (kept: do not change the figure)."""
    return kept("bars", shown, position, lambda: charts.side_by_side_bars(
        shown.features, shown.calibration[position], shown.instance[position],
        shown.total[position], units=shown.units_label, disagree=shown.disagree[position],
        errors=part_errors(shown, position),
        values=feature_texts(shown, position), calibration_range=calibration_range(
            shown, position), scale=shown.number_scale,
        background_ranges=shown_background_ranges(shown, position)))


def bars_chart(shown: Shown, position: int) -> str:
    """The patient's three panels as the page draws them, HTML (app/html_charts.py; kept:
    drawing the HTML from the figure took 5-12 ms of the interpreter per switch)."""
    return kept("bars_chart", shown, position,
                lambda: html_charts.chart(bars_figure(shown, position)))


def waterfall_chart(shown: Shown, position: int) -> str:
    """The patient's waterfall as HTML (kept, as bars_chart)."""
    return kept("waterfall_chart", shown, position,
                lambda: html_charts.chart(waterfall_figure(shown, position)))


def decomposition_bars(d: Decomposition, position: int, units: str,
                       values: Sequence[str], scale: float | None = None) -> go.Figure:
    """The three panels for one row of a decomposition (an edited patient's)."""
    return charts.side_by_side_bars(
        d.features, d.calibration[position], d.instance[position], d.total[position],
        units=units, disagree=decomposition_disagreements(d, position),
        errors=None if (d.total_se is None or d.calibration_se is None or d.instance_se is None)
        else (d.calibration_se[position], d.instance_se[position], d.total_se[position]),
        values=values, calibration_range=None if (
            d.calibration_low is None or d.calibration_high is None)
        else (d.calibration_low[position], d.calibration_high[position]), scale=scale,
        background_ranges=background_ranges(d.background_low, d.background_high,
                                            d.instance_background_low,
                                            d.instance_background_high, position),
    )


def fixed_quantile_figure(shown: Shown, position: int, width_units_label: str
                          ) -> go.Figure | None:
    """The practitioners' comparator for one patient, in the bars' feature order; None when
    the run did not compute it. `width_units_label`: its axis title (always width units)."""
    if shown.fixed_quantile is None:
        return None
    order = charts.feature_order(shown.total[position])
    fixed = shown.fixed_quantile[position]
    # Always in width units, whatever the units on show: q̂ held fixed has no log scale.
    return kept("fixed_quantile", shown, position, lambda: charts.vector_bars(
        shown.features, fixed, order, view="fixed", units=width_units_label,
        scale=shown.base_width,
        title="What a standard SHAP of the interval shows<br><sup>the width's Shapley values "
              "with the calibration set's quantile held fixed</sup>"))


def case_reading(width: Shown, position: int, unit: str = "") -> str:
    """The patient's case in one paragraph; `width`: the run in width units (the reading
    speaks in widths whatever the units on show)."""
    return patient_reading(width.features, width.calibration[position],
                           width.instance[position], width.total[position],
                           float(width.width[position]), width.base_width, unit=unit,
                           has_instance_part=width.has_instance_part,
                           calibration_unsettled=None if width.calibration_unsettled is None
                           else width.calibration_unsettled[position],
                           instance_unsettled=None if width.instance_unsettled is None
                           else width.instance_unsettled[position],
                           reference_sample=width.background_low is not None)


def background_note(shown: Shown) -> str:
    """What the green band says, in plain words (the Patient page and the HTML summary)."""
    level = shown.background_level or 0.9
    return (f"Green band on the calibration-driven and instance-driven bars: how much each part "
            f"could move with another reference sample (the training rows a left-out feature "
            f"is averaged over), its {level:.0%} range over {shown.background_bootstrap} "
            "reference samples drawn afresh. A pale bar whose band crosses zero has no settled "
            f"direction either; such calibration-driven parts are marked {charts.UNSETTLED_MARK}.")


def waterfall_figure(shown: Shown, position: int) -> go.Figure:
    """Steps from the featureless width to the patient's (log widths in log units; kept: do not
    change the figure)."""
    return kept("waterfall", shown, position, lambda: _waterfall_figure(shown, position))


def _waterfall_figure(shown: Shown, position: int) -> go.Figure:
    if shown.units == "log":
        start, end = shown.empty_value, float(shown.full_value[position])
        labels = ("featureless log width", "this patient's log width")
    else:
        start, end = shown.base_width, float(shown.width[position])
        labels = ("featureless width", "this patient's width")
    return charts.width_waterfall(shown.features, shown.total[position], start, end,
                                  units=shown.units_label, start_label=labels[0],
                                  end_label=labels[1], scale=shown.number_scale)


def case_html(shown: Shown, position: int, facts: Mapping[str, str],
              reviews: Sequence[ReviewEvent]) -> str:
    """A standalone HTML summary of one patient's case; `facts`: what the numbers depend on
    (`state.run_facts`)."""
    patient = str(shown.patient_ids[position])

    def num(value: float) -> str:
        return people_number(value, shown.base_width)

    case = {
        "patient": patient,
        "prediction": num(shown.prediction[position]),
        "interval": f"[{num(shown.lower[position])}, {num(shown.upper[position])}]",
        "width": f"{num(shown.width[position])} (featureless width {num(shown.base_width)})",
        "width percentile in the cohort":
            f"{summaries.percentile_ranks(shown.width)[position]:.0f}",
    }
    if shown.targets is not None and not np.isnan(shown.targets[position]):
        case["observed target"] = num(shown.targets[position])
    case.update(facts)
    notes = [
        "Calibration-driven: set by the calibration set through the conformal quantile. "
        "Instance-driven: set by this patient's own values. Total = calibration + instance. "
        f"Features marked {charts.DISAGREE_MARK} have parts of opposite signs.",
    ]
    if shown.calibration_low is not None:
        notes.append(
            "Whiskers on the calibration-driven bars: its 90% interval over "
            f"{shown.calibration_bootstrap} resampled calibration sets. Features marked "
            f"{charts.UNSETTLED_MARK} (pale bars) have an interval holding 0: whether the "
            "calibration set makes them widen or narrow the interval is not settled.")
    if shown.background_low is not None:
        notes.append(background_note(shown))
    return export.case_summary_html(
        title=f"cpdecomp case summary: patient {patient}", facts=case,
        figures=[bars_figure(shown, position), waterfall_figure(shown, position)],
        table=patient_table(shown, position),
        reviews=[{"created_at": r.created_at, "status": r.status, "note": r.note,
                  "reviewer": r.reviewer} for r in reviews],
        notes=notes,
    )


@dataclass(frozen=True)
class CohortFigures:
    """The Cohort page's four charts (kept: do not change them)."""

    widths: go.Figure
    calibration: go.Figure
    instance: go.Figure
    disagreement: go.Figure
    calibration_whiskers: bool
    """The calibration-driven chart has its bootstrap whiskers (one vector for the cohort and
    a run with the bootstrap)."""
    calibration_band: bool
    """... and the green band of redrawn backgrounds."""
    pages: Mapping[str, str]
    """The four as the page draws them, HTML by name (widths, calibration, instance,
    disagreement; app/html_charts.py)."""
    disagreement_table: str
    """The disagreement chart's numbers as an HTML table (app/html_charts.table)."""


DISAGREEMENT_COLUMNS = {
    "feature": html_charts.Column("feature"),
    "calibration_vs_instance": html_charts.Column(
        "% calibration vs instance", "Patients whose calibration-driven and instance-driven "
                                     "parts of the feature pull in opposite directions.", 1),
    "total_vs_instance": html_charts.Column(
        "% total vs instance", "Patients for whom the total shows the feature's own "
                               "(instance-driven) effect with the wrong sign.", 1)}
"""The Cohort page's disagreement table: percent of patients, one decimal."""


def cohort_figures(shown: Shown) -> CohortFigures:
    """The cohort's charts, built once per (run, units): the run's worker builds them as the run
    ends (`prepare`), so the page's first visit only draws."""
    return kept("cohort", shown, COHORT, lambda: _cohort_figures(shown))


def _cohort_figures(shown: Shown) -> CohortFigures:
    cohort = shown.cohort
    one_vector = cohort.one_vector
    # The bootstrap interval is one per feature only where the vector is (a mean over patients
    # of rescaled intervals would be no interval).
    span = (shown.calibration_low[0], shown.calibration_high[0]) if (
        one_vector and shown.calibration_low is not None
        and shown.calibration_high is not None) else None
    band = (shown.background_low[0], shown.background_high[0]) if (
        one_vector and shown.background_low is not None
        and shown.background_high is not None) else None
    # The part's name alone on the title line: with its qualifier it was cut at 1280 px.
    qualifier = "one vector for the cohort" if one_vector else "cohort mean"
    label = (f"α = {shown.alpha:g} · calibration n = {shown.n_calibration} · background "
             f"{shown.background_size}")
    heading = f"Calibration-driven<br><sup>{qualifier}</sup><br><sup>{label}</sup>"
    disagreement = cohort.disagreement
    figures = {
        "widths": charts.width_histogram(cohort.widths, base_width=shown.base_width),
        "calibration": charts.vector_bars(shown.features, cohort.vector, cohort.order,
                                          view="calibration", units=shown.units_label,
                                          title=heading, span=span, scale=shown.number_scale,
                                          band=band),
        "instance": charts.instance_distribution(shown.features, shown.instance, cohort.order,
                                                 units=shown.units_label),
        "disagreement": charts.sign_disagreement_bars(
            disagreement["feature"], disagreement["calibration_vs_instance"],
            disagreement["total_vs_instance"])}
    return CohortFigures(
        **figures, calibration_whiskers=span is not None, calibration_band=band is not None,
        pages={name: html_charts.chart(figure) for name, figure in figures.items()},
        disagreement_table=html_charts.table(
            disagreement.assign(calibration_vs_instance=100 * disagreement[
                "calibration_vs_instance"], total_vs_instance=100 * disagreement[
                "total_vs_instance"]), DISAGREEMENT_COLUMNS))


WARM_PATIENTS = 200
"""Patients whose figures and table `prepare` builds ahead (the first, in the select box's
order); past them a patient's are built on its first visit."""


_prepared: weakref.WeakSet[Shown] = weakref.WeakSet()
"""Records `prepare` has been called with (held weakly: a record goes with its report)."""

WARM_PACE = 0.02
"""Seconds `prepare` rests between two patients: it never holds the interpreter for more than
one build (a figure and its HTML, about 10 ms), so a page another session (or this one) runs
meanwhile waits for it by that much at most."""


def prepare(shown: Shown, patients: int = WARM_PATIENTS, pace: float = WARM_PACE,
            wait: Callable[[], None] = lambda: None) -> None:
    """Build what the result pages draw of a run before anyone asks: the Cohort page's numbers
    and charts, then the first `patients` patients' bars, waterfall and table, resting `pace`
    seconds between patients. Called by the run's worker as the run ends; a page finds them
    kept and only draws. Once per record: the workers of other sessions that waited for the same
    run find it prepared, or being prepared, and leave it.

    `wait()` is called before each build and returns when it may go on (the worker's
    `runs.QuietWaiter`: while no session's script runs): the first visits after a Run are script
    runs of their own, which this work would otherwise slow down by holding the interpreter."""
    cohort_figures(shown)
    with _kept_lock:
        if shown in _prepared:
            return
        _prepared.add(shown)
    for position in range(min(shown.n, patients, KEPT_PER_PROCESS // 6 - 1)):
        for build in (bars_chart, waterfall_chart, patient_table_html):  # and their data
            wait()
            build(shown, position)
        time.sleep(pace)

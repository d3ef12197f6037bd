"""The Recalibration page's logic: the calibration sets to compare, the comparison, its charts,
its coverage table and its reading in plain words. No Streamlit here (app/views/recalibration.py
draws the page); the computation is core's (Study.compare, core/recalibration.py).

    "Under site_b, intervals are 18% wider for the median patient than under the current
    calibration set (26 vs 22). Most of the change comes through age's calibration-driven part:
    +2.1 [+1.4 to +2.9]. The instance-driven parts come from the patients' own values and do not
    change with the calibration set."
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from cpdecomp import Comparison, Study
from cpdecomp.app import charts, html_charts, summaries
from cpdecomp.app.text import people_number, plotly_text
from cpdecomp.core.conformal import minimum_calibration_size
from cpdecomp.core.decomposition import Units
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.recalibration import MAX_SETS, split_calibration

OWN = "this run's set"
"""The run's own calibration set, as the page names it."""
SPLIT_NAME = "{column} {value}"
"""A group of the run's calibration rows, as the page names it: "site B", "sex 2"."""
MAX_CELLS = 100_000_000
"""Most (calibration rows of the new sets × feature combinations) one comparison may mask: the
Run's own limit (app/runs.py MAX_RUN_CELLS); each cell is one masked calibration score."""


@dataclass(frozen=True)
class Request:
    """What a comparison depends on beyond the run: where the other sets come from (an
    uploaded file's id, or the column that splits the run's calibration rows) and the
    reference set."""

    mode: str
    """"upload" or "split"."""
    source: str
    reference: str | None = None


def set_name(file_name: str) -> str:
    """An uploaded calibration file's set name: its name without folder or extension."""
    stem = Path(file_name.replace("\\", "/")).stem.strip()
    return stem if stem and stem != OWN else "uploaded set"


def split_columns(study: Study, alpha: float) -> list[str]:
    """Columns of the run's calibration rows that split them into a few groups (2 to
    MAX_SETS values, such as a site, a period, or a category such as sex), each group with
    the rows alpha needs (minimum_calibration_size): a column with a group too small for
    alpha is not offered."""
    table = study.calibration_table
    if table is None:
        return []
    need = minimum_calibration_size(alpha)
    found = []
    for column in table.columns:
        if column in (study.columns.target, study.columns.id_column):
            continue
        counts = table[column].dropna().value_counts()
        if 2 <= len(counts) <= MAX_SETS and counts.min() >= need:
            found.append(str(column))
    return found


def set_names(study: Study, request: Request, upload_name: str = "") -> list[str]:
    """The sets a request compares, in their order (the first is the default reference)."""
    if request.mode == "upload":
        return [OWN, set_name(upload_name)]
    if study.calibration_table is None:
        return []
    sets, _ = split_calibration(study.calibration_table, request.source, study.columns.target,
                                SPLIT_NAME)
    return list(sets)


def check_size(n_rows: int, n_coalitions: int) -> None:
    """Refuse a comparison whose new sets' masked scores would cost more than a Run may."""
    cells = n_rows * n_coalitions
    if cells > MAX_CELLS:
        raise CpdecompError(
            f"the new calibration rows ({n_rows:,}) times the run's {n_coalitions:,} feature "
            f"combinations make {cells:,} masked scores, more than the dashboard computes at "
            f"once ({MAX_CELLS:,}); use fewer rows, or `cpdecomp compare` on the command line")


def compare(study: Study, request: Request, *, method: str, alpha: float, units: Units,
            budget: int | None, bootstrap: int, upload: pd.DataFrame | None = None,
            upload_name: str = "", n_coalitions: int = 1) -> Comparison:
    """The comparison a request asks for on the run's study (its fitted models, background
    and patients): the uploaded table against the run's calibration set, or the run's
    calibration rows split by a column."""
    if request.mode == "upload":
        if upload is None:
            raise CpdecompError("upload a calibration file to compare with")
        check_size(len(upload), n_coalitions)
        return study.compare({set_name(upload_name): upload}, name=OWN,
                             reference=request.reference, method=method, alpha=alpha,
                             units=units, budget=budget, calibration_bootstrap=bootstrap)
    table = study.calibration_table
    check_size(0 if table is None else len(table), n_coalitions)
    return study.compare(by=request.source, by_name=SPLIT_NAME, reference=request.reference,
                         method=method,
                         alpha=alpha, units=units, budget=budget,
                         calibration_bootstrap=bootstrap)


def change_order(comparison: Comparison, name: str) -> np.ndarray:
    """Features by the size of their cohort change under `name`, largest first."""
    return np.argsort(-np.abs(comparison.cohort[name].change), kind="stable")


def change_figure(comparison: Comparison, name: str, *, units: str, scale: float) -> go.Figure:
    """The cohort's change of each feature's calibration-driven part under `name`, with its
    range from resampling both sets: pale and ? where the range holds 0."""
    change = comparison.cohort[name]
    one_vector = bool(np.allclose(comparison.set(name).change,
                                  comparison.set(name).change[:1], rtol=0, atol=0))
    subtitle = ("the same for every patient" if one_vector else "mean over the patients")
    return charts.vector_bars(
        list(comparison.players), change.change, change_order(comparison, name),
        view="calibration", units=units, scale=scale, span=(change.low, change.high),
        title=(f"How each feature's calibration-driven part changed under "
               f"{plotly_text(name)}<br><sup>against {plotly_text(comparison.reference)};"
               f" {subtitle}; whiskers: the likely range, given the two sets' sizes</sup>"))


def widths_figure(comparison: Comparison, *, units: str) -> go.Figure:
    """The patients' interval widths under each set."""
    return charts.set_width_boxes({s.name: s.width for s in comparison.sets}, units=units,
                                  title="The patients' interval widths under each calibration "
                                        "set")


def patient_figures(comparison: Comparison, name: str, position: int, *, units: str,
                    scale: float) -> tuple[go.Figure, go.Figure]:
    """One patient's calibration-driven parts under the reference and `name`, side by side
    (whiskers: each set's own range), and the instance-driven parts likewise."""
    shown = [comparison.set(comparison.reference), comparison.set(name)]
    features = list(comparison.players)
    order = charts.feature_order(shown[0].decomposition.total[position])
    calibration = charts.set_bars(
        features, {s.name: s.decomposition.calibration[position] for s in shown},
        view="calibration", units=units, scale=scale, order=order,
        ranges={s.name: (s.decomposition.calibration_low[position],
                         s.decomposition.calibration_high[position]) for s in shown
                if s.decomposition.calibration_low is not None
                and s.decomposition.calibration_high is not None},
        title="This patient's calibration-driven parts")
    instance = charts.set_bars(
        features, {s.name: s.decomposition.instance[position] for s in shown},
        view="instance", units=units, scale=scale, order=order,
        title="This patient's instance-driven parts")
    return calibration, instance


def drawn(figure: go.Figure) -> str:
    """A figure as the page's HTML (the Patient and Cohort pages' drawing)."""
    return html_charts.chart(figure)


COVERAGE_COLUMNS = {
    "intervals": html_charts.Column("Intervals from", "The calibration set the intervals were "
                                    "computed with."),
    "rows": html_charts.Column("checked on", "Whose outcomes are checked: another set's "
                               "calibration rows, or this run's held-out patients."),
    "n": html_charts.Column("rows", "Rows with an observed outcome.", decimals=0),
    "covered": html_charts.Column("inside", "Rows whose outcome falls inside their interval.",
                                  decimals=0),
    "coverage": html_charts.Column("coverage %", decimals=1),
    "range": html_charts.Column("95% range", "Exact binomial 95% range of the coverage, in %."),
    "reading": html_charts.Column("reading"),
}


def coverage_frame(comparison: Comparison) -> pd.DataFrame:
    """The coverage table in people's words: each set's intervals on the other sets' rows and
    on the patients, with an exact 95 % range and what it says against the aim of 1 − α."""
    aim = 1 - comparison.alpha
    rows = []
    for record in comparison.coverage.itertuples():
        low, high = summaries.binomial_interval(int(record.covered), int(record.n))
        rows.append({
            "intervals": record.intervals,
            "rows": "this run's patients" if record.rows == "patients" else record.rows,
            "n": record.n, "covered": record.covered, "coverage": 100 * record.rate,
            "range": f"{100 * low:.1f} to {100 * high:.1f}" if np.isfinite(low) else "n/a",
            "reading": summaries.coverage_word(low, high, aim),
        })
    return pd.DataFrame(rows, columns=list(COVERAGE_COLUMNS))


def coverage_table(comparison: Comparison) -> str:
    return html_charts.table(coverage_frame(comparison), COVERAGE_COLUMNS)


def instance_scaling(comparison: Comparison, name: str) -> float | None:
    """In width units of a multiplicative family, the median patient's ratio of `name`'s
    instance-driven parts to the reference's (L_name/L_reference); None where they are equal."""
    if comparison.units == comparison.separating_units:
        return None
    factor = comparison.set(name).log_mean_factor
    base = comparison.set(comparison.reference).log_mean_factor
    if factor is None or base is None:
        return None
    return float(np.median(factor / base))


@dataclass(frozen=True)
class Breakdown:
    """The cohort's mean change of the width (log width in log units) under a set, split as
    the attributions split it: the featureless width's change, the features'
    calibration-driven parts' and the instance-driven parts' (nonzero only where width units
    rescale them), and what a method that is not efficient leaves unattributed."""

    total: float
    featureless: float
    calibration: float
    instance: float

    @property
    def unattributed(self) -> float:
        return self.total - self.featureless - self.calibration - self.instance


def breakdown(comparison: Comparison, name: str) -> Breakdown:
    d = comparison.set(name).decomposition
    r = comparison.set(comparison.reference).decomposition
    if comparison.units == "log" or d.scale != "log":
        total = float(np.mean(d.full_value - r.full_value))
        featureless = float(d.empty_value - r.empty_value)
    else:
        total = float(np.mean(np.exp(d.full_value) - np.exp(r.full_value)))
        featureless = float(np.exp(d.empty_value) - np.exp(r.empty_value))
    return Breakdown(total, featureless,
                     float(np.mean((d.calibration - r.calibration).sum(axis=1))),
                     float(np.mean((d.instance - r.instance).sum(axis=1))))


def reading(comparison: Comparison, name: str, *, unit: str = "", scale: float) -> str:
    """The comparison of `name` with the reference in plain words: the median width's change;
    how the cohort's mean change splits between the featureless width (the set's overall
    level) and the features' calibration-driven parts; which feature's part moved most (with
    its range), or that none moved beyond the sets' noise; what the instance-driven parts do."""
    result, reference = comparison.set(name), comparison.set(comparison.reference)
    units = f" {unit}" if unit and comparison.units == "width" else (
        " (log width)" if comparison.units == "log" else "")
    median, before = float(np.median(result.width)), float(np.median(reference.width))
    width_units = f" {unit}" if unit else ""

    def width(value: float) -> str:
        return people_number(value, reference.base_width)

    def part(value: float, signed: bool = True) -> str:
        return people_number(value, scale, signed)

    change = median / before - 1 if before else float("nan")
    sentences = []
    if abs(change) < 0.005:
        sentences.append(f"Under {name}, intervals are about as wide for the median patient as "
                         f"under {comparison.reference} ({width(median)}{width_units}).")
    else:
        sentences.append(
            f"Under {name}, intervals are {abs(change):.0%} "
            f"{'wider' if change > 0 else 'narrower'} for the median patient than under "
            f"{comparison.reference} ({width(median)} vs {width(before)}{width_units}).")
    split = breakdown(comparison, name)
    pieces = [f"{part(split.featureless)} is the featureless width's (the interval when "
              "nothing is known about the patient: the set's overall level)",
              f"{part(split.calibration)} the features' calibration-driven parts together"]
    if abs(split.instance) > 1e-9 * max(abs(scale), 1e-300):
        pieces.append(f"{part(split.instance)} the rescaling of the instance-driven parts")
    if not comparison.efficient:
        pieces.append(f"{part(split.unattributed)} is left unattributed by this method")
    sentences.append(f"Of the average change ({part(split.total)}{units}), "
                     + ", ".join(pieces[:-1]) + " and " + pieces[-1] + ".")
    cohort = comparison.cohort[name]
    if comparison.calibration_bootstrap:
        moved = np.flatnonzero(~cohort.holds_zero)
        if moved.size == 0:
            sentences.append(
                "No feature's calibration-driven part moved beyond what two calibration sets "
                f"of these sizes ({result.n_calibration} and {reference.n_calibration} rows) "
                "give by chance.")
        else:
            top = int(moved[np.argmax(np.abs(cohort.change[moved]))])
            most = abs(cohort.change[top]) >= 0.5 * abs(split.total)
            lead = ("Most of the change comes through" if most
                    else "Among the features, the largest change is")
            sentences.append(
                f"{lead} {comparison.players[top]}'s calibration-driven part: "
                f"{part(cohort.change[top])}{units} (likely range {part(cohort.low[top])} to "
                f"{part(cohort.high[top])}).")
            others = [comparison.players[j] for j in moved if j != top]
            if others:
                listed = ", ".join(others[:3]) + (f" and {len(others) - 3} more"
                                                  if len(others) > 3 else "")
                sentences.append(f"{listed} moved beyond the sets' noise too.")
    ratio = instance_scaling(comparison, name)
    if ratio is None:
        sentences.append("The instance-driven parts come from the patients' own values and do "
                         "not change with the calibration set.")
    else:
        sentences.append(
            "The instance-driven parts come from the patients' own values and do not change "
            "with the calibration set; in width units they are rescaled with each interval "
            f"(by {ratio - 1:+.0%} for the median patient), which is no change in the patient.")
    return " ".join(sentences)


def coverage_sentence(comparison: Comparison, name: str) -> str | None:
    """The reference's intervals checked on `name`'s rows, in words, when the check says
    something (too narrow or wider than needed)."""
    found = comparison.coverage[(comparison.coverage["intervals"] == comparison.reference)
                                & (comparison.coverage["rows"] == name)]
    if found.empty:
        return None
    record = found.iloc[0]
    low, high = summaries.binomial_interval(int(record["covered"]), int(record["n"]))
    word = summaries.coverage_word(low, high, 1 - comparison.alpha)
    if word in ("", "as aimed"):
        return None
    return (f"Checked on {name}'s own rows, the intervals from {comparison.reference} hold "
            f"{record['rate']:.0%} of the outcomes (aim {1 - comparison.alpha:.0%}): "
            f"{word}, a sign that recalibrating on {name} was needed.")


def set_table(comparison: Comparison) -> pd.DataFrame:
    """Per set: rows, q̂, the featureless width and the median width (analyst's details)."""
    return pd.DataFrame({
        "set": [s.name for s in comparison.sets],
        "reference": ["yes" if s.reference else "" for s in comparison.sets],
        "calibration rows": [s.n_calibration for s in comparison.sets],
        "rank k": [s.rank for s in comparison.sets],
        "q̂": [s.q_hat for s in comparison.sets],
        "featureless width": [s.base_width for s in comparison.sets],
        "median width": [float(np.median(s.width)) for s in comparison.sets],
    })


def kept_comparison(session: Mapping, key: object) -> Comparison | None:
    """The comparison the session keeps, when it was computed for `key` (the run, its units
    and the request): one comparison at a time."""
    found = session.get("_recalibration")
    return found[1] if found is not None and found[0] == key else None

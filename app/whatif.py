"""What-if: one patient with edited values, explained with the run's cached games.

The edited patient is never part of the report or the review store: it is one row explained by
the study's explainer, which reuses the calibration game (and φ_C's bootstrap interval) the run
computed, so one patient costs about a millisecond on tree tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from cpdecomp.app.runs import CALIBRATION_BOOTSTRAP
from cpdecomp.app.state import Results
from cpdecomp.core.data import number_text
from cpdecomp.core.decomposition import in_units
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.explainer import Explanation
from cpdecomp.core.missing import is_missing


@dataclass(frozen=True)
class Field:
    """One editable feature: its categories (None for a number) and its training range."""

    name: str
    categories: tuple[str, ...] | None
    low: float | None
    high: float | None
    numbers: bool = False
    """Numbers a model reads as categories (integer codes): shown as '3', not '3.0'."""


def fields(results: Results) -> list[Field]:
    """The patient's features as the training saw them."""
    fitted = results.study.system.fitted
    out = []
    for j, kind in enumerate(fitted.encoder.kinds_):
        if kind.is_categorical:
            out.append(Field(kind.name, tuple(kind.categories or ()), None, None, kind.numbers))
            continue
        column = fitted.training_rows[:, j]
        present = column[~np.isnan(column)]
        out.append(Field(kind.name, None, float(present.min()) if present.size else None,
                         float(present.max()) if present.size else None))
    return out


def original_values(results: Results, position: int) -> dict[str, object]:
    """The patient's values, as the what-if widgets start from them (None when missing)."""
    row = results.shown.feature_values.iloc[position]
    values: dict[str, object] = {}
    for field in fields(results):
        value = row[field.name]
        if is_missing(value):
            values[field.name] = None
        elif field.categories is None:
            values[field.name] = float(value)
        else:
            values[field.name] = number_text(value) if field.numbers else str(value)
    return values


def as_text(value: object) -> str:
    """A number as the what-if box shows it (empty for missing): full precision, no e-0."""
    if value is None:
        return ""
    return np.format_float_positional(float(value), trim="-")  # type: ignore[arg-type]


def parse(fields_: list[Field], entered: Mapping[str, object]
          ) -> tuple[dict[str, object], list[str]]:
    """The edited values (numbers as floats, empty as None) and the names of the numeric
    features whose text is not a number."""
    values: dict[str, object] = {}
    bad = []
    for field in fields_:
        raw = entered.get(field.name)
        if field.categories is not None:
            values[field.name] = None if raw is None else str(raw)
            continue
        text = "" if raw is None else str(raw).strip()
        if not text:
            values[field.name] = None
            continue
        try:
            number = float(text)
        except ValueError:
            number = float("nan")
        if not np.isfinite(number):
            bad.append(field.name)
            values[field.name] = None
        else:
            values[field.name] = number
    return values, bad


def outside_training(results: Results, values: Mapping[str, object]) -> list[str]:
    """Numeric features whose edited value lies outside what the training rows held: the
    models extrapolate there (trees flatly, linear models without bound)."""
    names = []
    for field in fields(results):
        value = values.get(field.name)
        if field.categories is not None or value is None or field.low is None:
            continue
        number = float(value)  # type: ignore[arg-type]  # parse's numbers
        if not field.low <= number <= (field.high if field.high is not None else np.inf):
            names.append(field.name)
    return names


def explain_edited(results: Results, values: Mapping[str, object]) -> Explanation:
    """The edited patient's interval and parts, in the units on show, with the run's games.

    Raises CpdecompError naming a feature when a value cannot be used (for example a missing
    value the model has no rule for); the message never quotes the value.
    """
    table = pd.DataFrame({name: [np.nan if value is None else value]
                          for name, value in values.items()})
    config = results.config
    # In width units, as the run's report was computed (log units are its rescaling): the
    # explainer then reuses the very games the run cached, bootstraps included.
    explanation = results.study.explainer.explain(
        table, method=config.method, alpha=config.alpha, units="width", budget=config.budget,
        calibration_bootstrap=CALIBRATION_BOOTSTRAP,
        background_bootstrap=config.background_bootstrap)
    if not np.all(np.isfinite(explanation.width)):
        raise CpdecompError("the edited values give no finite interval; check the values "
                            "left empty or far outside the training range")
    if results.units == "log":
        explanation = replace(explanation,
                              decomposition=in_units(explanation.decomposition, "log"))
    return explanation

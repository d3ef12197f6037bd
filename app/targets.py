"""Which column is the outcome, guessed once for every way data arrives (one table, separate
files, a table with the user's model files), and the target warnings that need the table.

The guess is a default the Data page shows and the user can change; it is never an id, a 0/1
flag or a constant.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

ID_NAMES = {"id", "patient", "patient_id", "subject", "subject_id", "mrn", "pid", "row",
            "index", "record", "record_id"}


def _numeric(column: pd.Series) -> pd.Series | None:
    """The column as numbers, or None when it is not a numeric (or boolean) column."""
    if pd.api.types.is_bool_dtype(column):
        return None
    if not pd.api.types.is_numeric_dtype(column):
        return None
    return column.astype(float)


def looks_like_id(name: str, column: pd.Series) -> bool:
    """A column named like an identifier, or integers all distinct and in steps of one."""
    lowered = str(name).strip().lower()
    if lowered in ID_NAMES or lowered.endswith("_id") or lowered.endswith(" id"):
        return True
    values = _numeric(column)
    if values is None:
        return False
    values = values.dropna()
    if len(values) < 3 or not values.is_unique or not np.all(values == np.round(values)):
        return False
    ordered = np.sort(values.to_numpy())
    return bool(np.all(np.diff(ordered) == 1))


OUTCOME_NAMES = re.compile(r"^(y|outcome|target|response|label)$|outcome|stay|progression"
                           r"|(?<![a-z])los(?![a-z])", re.IGNORECASE)
"""Names that say "this is the outcome": length of stay (also `los`, `los_days`, `LOS (d)`),
disease progression."""


def choose_target(table: pd.DataFrame, used_before: Sequence[str] = ()) -> str | None:
    """A sensible default target, among numeric columns that are not an id, a 0/1 flag or
    constant: a name the user chose before, else a name that says it is an outcome, else the
    column with the most distinct values (the last such column on ties: tables often end with
    the outcome)."""
    columns = [str(c) for c in table.columns]
    fit = [name for name, column in zip(columns, table.columns, strict=True)
           if _numeric(table[column]) is not None and table[column].nunique() > 2
           and not looks_like_id(name, table[column])]
    for name in reversed(list(used_before)):
        if name in fit:
            return name
    named = [name for name in fit if OUTCOME_NAMES.search(name)]
    if named:
        return named[-1]
    best, best_count = None, 2
    for name, column in zip(columns, table.columns, strict=True):
        count = int(table[column].nunique())
        if name in fit and count >= best_count:
            best, best_count = name, count
    return best


CENSORING_NAMES = re.compile(r"cens|event|status|death|died|dead|deceased|fail", re.IGNORECASE)
"""Names of a 0/1 column that says whose time ended in the event and whose was censored."""
TIME_NAMES = re.compile(r"time|surv|days|weeks|months|years|follow",
                        re.IGNORECASE)
"""Names of a column holding a time to an event (survival time, follow-up in days)."""


def censored_time_note(table: pd.DataFrame, target: str) -> str | None:
    """A warning when the target looks like a survival time that is censored for some rows (a
    0/1 column beside it says whose event was seen), else None."""
    if target not in table.columns or not TIME_NAMES.search(str(target)):
        return None
    values = _numeric(table[target])
    if values is None or bool((values.dropna() < 0).any()):
        return None
    for name in table.columns:
        if str(name) == str(target) or not CENSORING_NAMES.search(str(name)):
            continue
        flag = _numeric(table[name])
        if flag is not None and set(flag.dropna().unique()) <= {0.0, 1.0} and \
                flag.dropna().nunique() == 2:
            return (f"The target {target!r} looks like a survival time, and {str(name)!r} "
                    "looks like the column that says whose event was seen. Where the patient "
                    "left follow-up before the event (censored), the time is only a lower "
                    "bound: the model and the intervals read it as the time of the event, so "
                    "they come out too short. cpdecomp has no survival model: choose another "
                    "outcome, or leave the censored rows out of the table.")
    return None

"""What counts as a missing value: the one home of the rule, for reading, encoding and writing.

A file's cell is missing when it is empty or one of MISSING_TOKENS; once read, a value is
missing when it is None, a float NaN or pandas' NA. A cell that is present but does not read
as a number is text, which a numeric column refuses (by row, never quoting the cell).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

MISSING_TOKENS = ["", "?", "NA", "N/A", "n/a", "na", "NaN", "nan", "null", "NULL", "None", "-"]
"""Cells of a CSV file read as missing (besides pandas' own defaults)."""


def is_missing(value: object) -> bool:
    """True for None, a float NaN and pandas' NA: a value that was never given."""
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def text_cells(column: pd.Series, numbers: pd.Series | None = None) -> np.ndarray:
    """Positions of the cells that are present but do not read as numbers (`numbers`: the
    column already read as numbers, missing where it is not one)."""
    if numbers is None:
        numbers = pd.to_numeric(column, errors="coerce")
    return np.flatnonzero((numbers.isna() & column.notna()).to_numpy())


def entirely_missing(column: pd.Series) -> bool:
    """True when no cell of the column holds a value."""
    return bool(column.isna().all())

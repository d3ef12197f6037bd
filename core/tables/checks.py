"""Checks on a table read from any format: shape, caps, column names, field lengths.

Refusals name the row, column or cap, never a cell's value.
"""

from __future__ import annotations

import pandas as pd

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.tables.limits import TableLimits


def check_shape(table: pd.DataFrame, name: str, limits: TableLimits) -> None:
    """Refuse an empty table, one over the caps, and blank or repeated column names."""
    if table.shape[1] == 0 or table.shape[0] == 0:
        raise CpdecompError(f"{name} has no data rows", reason="no_rows")
    check_size(name, table.shape[0], table.shape[1], limits)
    table.columns = [str(c) for c in table.columns]
    check_names(list(table.columns), name)


def check_size(name: str, rows: int, columns: int, limits: TableLimits) -> None:
    if columns > limits.max_columns:
        raise CpdecompError(
            f"{name} has {columns:,} columns; the limit is {limits.max_columns:,}: keep the "
            "features, the target and the id column", reason="too_many_columns")
    if rows > limits.max_rows:
        raise CpdecompError(
            f"{name} has more than {limits.max_rows:,} rows, the most one file may have",
            reason="too_many_rows")
    if rows * columns > limits.max_cells:
        raise CpdecompError(
            f"{name} has more than {limits.max_cells:,} cells (rows x columns), the most one "
            f"file may have: with {columns:,} columns, at most {limits.max_cells // columns:,} "
            "rows", reason="too_many_cells")


MAX_NAME_CHARACTERS = 1_000
"""The longest column name: far above any real one (a survey's question as a header is a few
hundred), and low enough that a message naming the column stays a line someone can read."""


def check_names(names: list[str], name: str) -> None:
    for position, column in enumerate(names, start=1):
        if len(column) > MAX_NAME_CHARACTERS:
            raise CpdecompError(
                f"{name}: column {position} has a name longer than {MAX_NAME_CHARACTERS:,} "
                "characters in the header; shorten it", reason="long_header")
        if not column.strip():
            raise CpdecompError(
                f"{name}: column {position} has no name in the header; name it or delete it",
                reason="blank_header")
    seen: dict[str, int] = {}
    for position, column in enumerate(names, start=1):
        if column in seen:
            # Positions only: in a file without a header line, the "names" are a patient's cells.
            raise CpdecompError(
                f"{name}: columns {seen[column]} and {position} have the same name in the "
                "header; column names must be unique", reason="duplicate_header")
        seen[column] = position


def mebibytes(size: int) -> str:
    return f"{size / 2**20:,.1f} MiB"


def check_field_lengths(table: pd.DataFrame, name: str, limits: TableLimits) -> None:
    """Quoted fields can hide separators from the scan; measure the parsed text too."""
    for column in table.columns:
        if pd.api.types.is_string_dtype(table[column].dtype):  # object or pandas' str
            lengths = table[column].str.len().fillna(0).to_numpy()  # NaN: missing, numbers
            if len(lengths) and lengths.max() > limits.max_field_bytes:
                row = int(lengths.argmax())
                raise CpdecompError(
                    f"{name}: column {column!r} has a value longer than "
                    f"{limits.max_field_bytes:,} characters in {row_name(row)}; a table cell "
                    "that long is not a feature", reason="field_too_long")


def row_name(position: int) -> str:
    """A row of data counted from 1 after the header (a spreadsheet shows it one lower)."""
    return f"data row {position + 1}"

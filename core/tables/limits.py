"""What reading one table file may cost: the caps and their record."""

from __future__ import annotations

from dataclasses import dataclass

MAX_FILE_BYTES = 256 * 2**20
"""A file larger than this is refused before it is read (the dashboard uses its upload cap)."""

MAX_ROWS = 1_000_000
"""More patients than one study fits in memory on a shared server; reading stops here."""

MAX_COLUMNS = 1_000
"""A wider table is refused from its header, before any row is read."""

MAX_CELLS = 20_000_000
"""Rows x columns (160 MB as floats): 1,000 columns allow 20,000 rows. Reading stops here."""

MAX_FIELD_BYTES = 131_072
"""The longest cell (Python's csv default): a longer one is a pasted document, not a feature."""

MAX_DECODED_BYTES = 256 * 2**20
"""A Parquet file's data once decoded, measured before decoding: a decompression bomb stops
here. The same as MAX_FILE_BYTES: a Parquet file may hold no more than the CSV cap allows."""



@dataclass(frozen=True)
class TableLimits:
    """What one file may cost to read: bytes, rows, columns, cells and the longest field.

    The caps bound memory and time whatever the file holds; each refusal names the cap.
    """

    max_bytes: int = MAX_FILE_BYTES
    max_rows: int = MAX_ROWS
    max_columns: int = MAX_COLUMNS
    max_cells: int = MAX_CELLS
    max_field_bytes: int = MAX_FIELD_BYTES
    max_decoded_bytes: int = MAX_DECODED_BYTES


LIMITS = TableLimits()

"""Reading untrusted table files: CSV (separator and decimal sniffed) and Parquet, capped.

Reading is capped (`TableLimits`: bytes, rows, columns, cells, the longest field, a Parquet
file's decompressed size), text must be UTF-8, and a refusal names the line, row or column but
never quotes a cell or a byte. Nothing is unpickled: Parquet is read by pyarrow. The log gets
event names, counts and durations only.

One file per seam: `limits` (the caps), `checks` (shape, names, field lengths), `csv_reader`,
`parquet_reader`; this module chooses the reader and logs the outcome.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from core.errors import CpdecompError
from core.missing import MISSING_TOKENS, is_missing
from core.tables.checks import check_shape, mebibytes, row_name
from core.tables.csv_reader import SCAN_CHUNK_BYTES, SIGNATURES, read_csv
from core.tables.limits import (
    LIMITS,
    MAX_CELLS,
    MAX_COLUMNS,
    MAX_DECODED_BYTES,
    MAX_FIELD_BYTES,
    MAX_FILE_BYTES,
    MAX_ROWS,
    TableLimits,
)
from core.tables.parquet_reader import read_parquet

__all__ = [
    "LIMITS", "MAX_CELLS", "MAX_COLUMNS", "MAX_DECODED_BYTES", "MAX_FIELD_BYTES",
    "MAX_FILE_BYTES", "MAX_ROWS", "MISSING_TOKENS", "SCAN_CHUNK_BYTES", "SIGNATURES",
    "TableLimits", "is_missing", "load_table", "row_name",
]
"""What others import from core.tables (MISSING_TOKENS and is_missing live in core.missing)."""

logger = logging.getLogger("cpdecomp.tables")

READERS = {"csv": read_csv, "parquet": read_parquet}
KIND_NAMES = {"csv": "CSV", "parquet": "Parquet"}


def load_table(source: str | Path | pd.DataFrame,
               text_columns: Sequence[str] = (), *,
               limits: TableLimits | None = None, label: str | None = None,
               kind: str | None = None) -> pd.DataFrame:
    """Read a CSV or Parquet file (by extension; CSV otherwise), refusing what is not a table.

    `text_columns` are read verbatim (an id like 00042 keeps its zeros). Text must be UTF-8
    (a byte-order mark is allowed). `limits` caps what reading may cost; `label` names the file
    in messages (default: its name); `kind` ("csv" or "parquet") overrides the extension, for a
    path that has none. Refusals never quote the file's contents.
    """
    limits = limits or LIMITS
    if isinstance(source, pd.DataFrame):
        table = source
        name = label or "the table"
        check_shape(table, name, limits)
    else:
        path = Path(source)
        name = label or path.name
        if kind is None:
            kind = "parquet" if path.suffix.lower() in {".parquet", ".pq"} else "csv"
        elif kind not in READERS:
            raise ValueError(f"kind must be one of {sorted(READERS)}, not {kind!r}")
        started = time.perf_counter()
        size = 0
        try:
            if not path.exists():
                raise CpdecompError(f"no such file: {path}", reason="missing")
            if not path.is_file():  # a folder, a device such as /dev/zero, a pipe
                raise CpdecompError(f"{path} is not a regular file", reason="missing")
            size = path.stat().st_size
            if size == 0:
                raise CpdecompError(f"{name} is empty", reason="empty")
            if size > limits.max_bytes:
                raise CpdecompError(
                    f"{name} is {mebibytes(size)}; the limit is {mebibytes(limits.max_bytes)}",
                    reason="too_large",
                )
            table = READERS[kind](path, name, text_columns, limits)
            check_shape(table, name, limits)
        except CpdecompError as error:
            logger.info("table.refused format=%s reason=%s bytes=%d seconds=%.3f",
                        kind, error.reason, size, time.perf_counter() - started)
            raise
        except MemoryError as exc:
            logger.info("table.refused format=%s reason=memory bytes=%d seconds=%.3f",
                        kind, size, time.perf_counter() - started)
            raise CpdecompError(f"{name} is too large to read into memory",
                                reason="memory") from exc
        except Exception as exc:  # pandas and pyarrow raise many types for a bad file
            reason = "parse" if isinstance(exc, pd.errors.ParserError) else "unreadable"
            logger.info("table.refused format=%s reason=%s bytes=%d seconds=%.3f",
                        kind, reason, size, time.perf_counter() - started)
            raise CpdecompError(
                f"{name} is not a readable {KIND_NAMES[kind]} file ({_safe_reason(exc, path)})",
                reason=reason,
            ) from exc
        logger.info("table.read format=%s rows=%d columns=%d bytes=%d seconds=%.3f",
                    kind, table.shape[0], table.shape[1], size, time.perf_counter() - started)
    return table


def _safe_reason(exc: BaseException, path: Path) -> str:
    """The parser's first line (positions, not contents), without the file's path."""
    if isinstance(exc, pd.errors.ParserError | OSError) or type(exc).__module__.startswith(
        "pyarrow"
    ):
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        text = text.replace(str(path), "the file")
        if not path.name.isdigit():  # /proc/self/fd/7: "line 7" must stay
            text = text.replace(path.name, "the file")
        text = text.removeprefix("Error tokenizing data. C error: ")
        if text:
            return text[:200]
    return type(exc).__name__

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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.missing import MISSING_TOKENS, is_missing
from cpdecomp.core.tables.checks import check_shape, check_size, mebibytes, row_name
from cpdecomp.core.tables.csv_reader import SCAN_CHUNK_BYTES, SIGNATURES, iter_csv, read_csv
from cpdecomp.core.tables.limits import (
    LIMITS,
    MAX_CELLS,
    MAX_COLUMNS,
    MAX_DECODED_BYTES,
    MAX_FIELD_BYTES,
    MAX_FILE_BYTES,
    MAX_ROWS,
    TableLimits,
)
from cpdecomp.core.tables.parquet_reader import iter_parquet, read_parquet

__all__ = [
    "LIMITS", "MAX_CELLS", "MAX_COLUMNS", "MAX_DECODED_BYTES", "MAX_FIELD_BYTES",
    "MAX_FILE_BYTES", "MAX_ROWS", "MISSING_TOKENS", "SCAN_CHUNK_BYTES", "SIGNATURES",
    "TableLimits", "is_missing", "iter_table", "load_table", "row_name",
]
"""What others import from core.tables (MISSING_TOKENS and is_missing live in core.missing)."""

logger = logging.getLogger("cpdecomp.tables")

READERS = {"csv": read_csv, "parquet": read_parquet}
CHUNK_READERS = {"csv": iter_csv, "parquet": iter_parquet}
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
        check_shape(source, label or "the table", limits)
        return source
    path, name, kind = _source(source, label, kind)
    started = time.perf_counter()
    with _refusals(path, name, kind, started):
        _check_file(path, name, limits)
        table = READERS[kind](path, name, text_columns, limits)
        check_shape(table, name, limits)
    logger.info("table.read format=%s rows=%d columns=%d bytes=%d seconds=%.3f",
                kind, table.shape[0], table.shape[1], path.stat().st_size,
                time.perf_counter() - started)
    return table


CHUNK_ROWS = 65_536
"""Rows per chunk of a streamed table: about 6 MB at 12 numeric columns."""


def iter_table(source: str | Path, text_columns: Sequence[str] = (), *,
               limits: TableLimits | None = None, label: str | None = None,
               kind: str | None = None, rows: int = CHUNK_ROWS) -> Iterator[pd.DataFrame]:
    """load_table in chunks of `rows` rows, so memory holds one chunk, not the file.

    The same checks and refusals as load_table, made before the first chunk where the file
    allows (a CSV's bytes and header, a Parquet file's schema and decoded size); the caps on
    rows and cells count over the whole file. Each chunk's index is its rows' positions in the
    file, as load_table numbers them, so messages name the same rows.
    """
    limits = limits or LIMITS
    path, name, kind = _source(source, label, kind)
    started = time.perf_counter()
    seen = 0
    with _refusals(path, name, kind, started):
        _check_file(path, name, limits)
        for chunk in CHUNK_READERS[kind](path, name, text_columns, limits, rows):
            seen += len(chunk)
            check_size(name, seen, chunk.shape[1], limits)
            yield chunk
        if seen == 0:
            check_shape(pd.DataFrame(), name, limits)
    logger.info("table.streamed format=%s rows=%d bytes=%d seconds=%.3f", kind, seen,
                path.stat().st_size, time.perf_counter() - started)


def _source(source: str | Path, label: str | None, kind: str | None) -> tuple[Path, str, str]:
    path = Path(source)
    if kind is None:
        kind = "parquet" if path.suffix.lower() in {".parquet", ".pq"} else "csv"
    elif kind not in READERS:
        raise ValueError(f"kind must be one of {sorted(READERS)}, not {kind!r}")
    return path, label or path.name, kind


def _check_file(path: Path, name: str, limits: TableLimits) -> None:
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


@contextmanager
def _refusals(path: Path, name: str, kind: str, started: float) -> Iterator[None]:
    """Every failure of reading as a CpdecompError with a reason, logged without contents."""
    def size() -> int:
        try:
            return path.stat().st_size
        except OSError:
            return 0

    try:
        yield
    except CpdecompError as error:
        logger.info("table.refused format=%s reason=%s bytes=%d seconds=%.3f",
                    kind, error.reason, size(), time.perf_counter() - started)
        raise
    except MemoryError as exc:
        logger.info("table.refused format=%s reason=memory bytes=%d seconds=%.3f",
                    kind, size(), time.perf_counter() - started)
        raise CpdecompError(f"{name} is too large to read into memory",
                            reason="memory") from exc
    except Exception as exc:  # pandas and pyarrow raise many types for a bad file
        reason = "parse" if isinstance(exc, pd.errors.ParserError) else "unreadable"
        logger.info("table.refused format=%s reason=%s bytes=%d seconds=%.3f",
                    kind, reason, size(), time.perf_counter() - started)
        raise CpdecompError(
            f"{name} is not a readable {KIND_NAMES[kind]} file ({_safe_reason(exc, path)})",
            reason=reason,
        ) from exc


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

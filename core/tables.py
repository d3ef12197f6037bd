"""Reading untrusted table files: CSV (separator and decimal sniffed) and Parquet, capped.

Reading is capped (`TableLimits`: bytes, rows, columns, cells, the longest field, a Parquet
file's decompressed size), text must be UTF-8, and a refusal names the line, row or column but
never quotes a cell or a byte. Nothing is unpickled: Parquet is read by pyarrow. The log gets
event names, counts and durations only.
"""

from __future__ import annotations

import codecs
import logging
import re
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from core.errors import CpdecompError
from core.missing import MISSING_TOKENS, entirely_missing, is_missing

__all__ = ["LIMITS", "MISSING_TOKENS", "TableLimits", "is_missing", "load_table", "row_name"]
"""The names others import (MISSING_TOKENS and is_missing live in core.missing)."""

logger = logging.getLogger("cpdecomp.tables")

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

SIGNATURES = {
    b"\x89PNG": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"%PDF": "a PDF document",
    b"PK\x03\x04": "a ZIP archive (an Excel .xlsx workbook is one: save it as CSV)",
    b"\xd0\xcf\x11\xe0": "an old Excel .xls workbook (save it as CSV)",
    b"\x1f\x8b": "a gzip archive (unpack it first)",
    b"PAR1": "a Parquet file (give it the extension .parquet)",
    b"SQLite format 3": "an SQLite database",
    b"\x80\x04\x95": "a Python pickle (never read, for safety)",
    b"\xff\xfe": "UTF-16 text (save it as UTF-8 CSV)",
    b"\xfe\xff": "UTF-16 text (save it as UTF-8 CSV)",
}
"""Starts of files that people upload by mistake, to say what the file is instead."""

SCAN_CHUNK_BYTES = 8 * 2**20


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
        _check_shape(table, name, limits)
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
                    f"{name} is {_mebibytes(size)}; the limit is {_mebibytes(limits.max_bytes)}",
                    reason="too_large",
                )
            table = READERS[kind](path, name, text_columns, limits)
            _check_shape(table, name, limits)
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


def _check_shape(table: pd.DataFrame, name: str, limits: TableLimits) -> None:
    """Refuse an empty table, one over the caps, and blank or repeated column names."""
    if table.shape[1] == 0 or table.shape[0] == 0:
        raise CpdecompError(f"{name} has no data rows", reason="no_rows")
    _check_size(name, table.shape[0], table.shape[1], limits)
    table.columns = [str(c) for c in table.columns]
    _check_names(list(table.columns), name)


def _check_size(name: str, rows: int, columns: int, limits: TableLimits) -> None:
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


def _check_names(names: list[str], name: str) -> None:
    for position, column in enumerate(names, start=1):
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


def _mebibytes(size: int) -> str:
    return f"{size / 2**20:,.1f} MiB"


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


def _read_csv(path: Path, name: str, text_columns: Sequence[str],
              limits: TableLimits) -> pd.DataFrame:
    with path.open("rb") as handle:
        head = handle.read(65536)
    _refuse_binary(head, name)
    text = head.decode("utf-8-sig", errors="ignore")  # the strict check is the scan below
    first_line = text.splitlines()[0] if text.strip() else ""
    # Excel in many locales writes ';'-separated CSV with decimal commas; tabs come from
    # copy-paste.
    separator = max([",", ";", "\t"], key=first_line.count)
    decimal = "," if separator == ";" and re.search(r"\d,\d", text) else "."
    _scan_text(path, name, separator, limits)
    names = _csv_header(path, name, separator)
    _check_size(name, 0, len(names), limits)
    _refuse_data_as_header(names, name, decimal)
    # Blank names are judged after reading: an unnamed, empty column is dropped.
    _check_names([n if n.strip() else f"\0{i}" for i, n in enumerate(names)], name)
    max_rows = min(limits.max_rows, limits.max_cells // max(len(names), 1))
    with warnings.catch_warnings():
        # pandas warns (and drops data) when rows have more fields than the header.
        warnings.simplefilter("error", pd.errors.ParserWarning)
        try:
            table = pd.read_csv(
                path, sep=separator, decimal=decimal, encoding="utf-8-sig",
                na_values=MISSING_TOKENS, keep_default_na=True, low_memory=False,
                dtype={column: str for column in text_columns}, index_col=False,
                nrows=max_rows + 1,
            )
        except pd.errors.ParserWarning as exc:
            raise CpdecompError(
                f"{name}: rows have more fields than the header has names; check the separator "
                "or remove the separators at the ends of the lines", reason="ragged") from exc
    if len(table) > max_rows:
        _check_size(name, len(table), len(names), limits)
    table.columns = names
    blank = [c for c in names if not c.strip() and entirely_missing(table[c])]
    table = table.drop(columns=blank)  # separators at the ends of lines: empty, unnamed
    _check_field_lengths(table, name, limits)
    return table


NUMBER = re.compile(r"[+-]?(\d+([.,]\d*)?|[.,]\d+)([eE][+-]?\d+)?")
INTEGER = re.compile(r"[+-]?\d+")


def _refuse_data_as_header(names: list[str], name: str, decimal: str) -> None:
    """Refuse a first line that is a row of data (a file saved without its header): its
    "column names" would be a patient's values, quoted by every later message.

    A measurement (a number with a fraction or an exponent) is never a column name; nor is
    every name a number (pandas' default names 0, 1, 2 are no names either).
    """
    numbers = [i for i, n in enumerate(names, start=1) if NUMBER.fullmatch(n.strip())]
    measured = [i for i in numbers if not INTEGER.fullmatch(names[i - 1].strip())
                and (decimal == "," or "," not in names[i - 1])]
    if measured or (numbers and len(numbers) == len(names)):
        where = measured[0] if measured else numbers[0]
        raise CpdecompError(
            f"{name}: line 1 looks like a row of data, not column names (column {where} is a "
            "number); add a header line that names the columns", reason="no_header")


def _refuse_binary(head: bytes, name: str) -> None:
    for signature, what in SIGNATURES.items():
        if head.startswith(signature):
            raise CpdecompError(f"{name} looks like {what}, not a CSV file", reason="binary")


def _scan_text(path: Path, name: str, separator: str, limits: TableLimits) -> None:
    """One bounded pass over the bytes: strict UTF-8, no NUL bytes, no overlong field.

    Messages give the line and byte offset, never the bytes: they may be patient data.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    ends = np.array([ord(separator), ord("\n"), ord("\r")], dtype=np.uint8)
    offset, lines_before, field = 0, 0, 0
    with path.open("rb") as handle:
        while chunk := handle.read(SCAN_CHUNK_BYTES):
            where = chunk.find(b"\x00")
            if where >= 0:
                line = _line(lines_before, chunk, where)
                raise CpdecompError(f"{name} has a NUL byte at line {line}: it is a binary file, "
                                    "not CSV", reason="binary")
            pending = len(decoder.getstate()[0])
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                at = exc.start - pending
                line = _line(lines_before, chunk, at)
                raise CpdecompError(
                    f"{name} is not UTF-8 text: line {line} (byte {offset + at + 1:,} of the file) "
                    "has bytes that are not UTF-8; save it as UTF-8 CSV",
                    reason="encoding") from None
            stops = np.flatnonzero(np.isin(np.frombuffer(chunk, dtype=np.uint8), ends))
            if stops.size == 0:
                field += len(chunk)
                longest, longest_at = field, len(chunk)
            else:
                gaps = np.diff(stops, prepend=-1 - field) - 1  # field lengths ending at stops
                widest = int(gaps.argmax())
                longest, longest_at = int(gaps[widest]), int(stops[widest])
                field = len(chunk) - int(stops[-1]) - 1
                if field > longest:
                    longest, longest_at = field, len(chunk)
            if longest > limits.max_field_bytes:
                line = _line(lines_before, chunk, longest_at)
                raise CpdecompError(
                    f"{name} has a field longer than {limits.max_field_bytes:,} bytes at line "
                    f"{line}; a table cell that long is not a feature",
                    reason="field_too_long")
            lines_before += chunk.count(b"\n")
            offset += len(chunk)
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise CpdecompError(f"{name} is not UTF-8 text: it ends inside a character; save it "
                            "as UTF-8 CSV", reason="encoding") from None


def _line(lines_before: int, chunk: bytes, position: int) -> int:
    """The 1-based line of a byte position in a chunk that follows `lines_before` lines."""
    return lines_before + chunk.count(b"\n", 0, max(position, 0)) + 1


def _csv_header(path: Path, name: str, separator: str) -> list[str]:
    try:
        header = pd.read_csv(path, sep=separator, header=None, nrows=1, dtype=str,
                             keep_default_na=False, na_filter=False, encoding="utf-8-sig",
                             index_col=False)
    except pd.errors.EmptyDataError as exc:
        raise CpdecompError(f"{name} has no header line", reason="no_rows") from exc
    return [str(value) for value in header.iloc[0].tolist()]


def _check_field_lengths(table: pd.DataFrame, name: str, limits: TableLimits) -> None:
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


def _read_parquet(path: Path, name: str, text_columns: Sequence[str],
                  limits: TableLimits) -> pd.DataFrame:
    """Measure what the file decodes to before decoding any of it, then read it column by column.

    The footer gives rows, columns, types and the width of every fixed-width column; text is
    measured from its dictionary and row indices (or streamed in small batches where the
    encoding has no dictionary), so a kilobyte that would decode to gigabytes is refused having
    cost about a kilobyte. pyarrow reads plain arrays: nothing in a Parquet file is unpickled.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(path) as parquet:
            schema = parquet.schema_arrow
            metadata = parquet.metadata
            _check_size(name, 0, len(schema.names), limits)
            _check_names([str(n) for n in schema.names], name)
            _check_size(name, metadata.num_rows, len(schema.names), limits)
            for field in schema:
                _check_column_type(field, name)
            stored = sum(metadata.row_group(i).total_byte_size
                         for i in range(metadata.num_row_groups))
            _check_decoded(stored, name, limits)
            text = [f.name for f in schema if _is_text(f.type)]
            decoded = sum(_fixed_width(f.type) * metadata.num_rows
                          for f in schema if f.name not in text)
            _check_decoded(decoded, name, limits)
            # Prefix-compressed text (DELTA_BYTE_ARRAY) cannot be read into a dictionary.
            streamed = [c for c in text if not _has_dictionary_encodings(metadata, c)]
        with pq.ParquetFile(path, read_dictionary=[c for c in text if c not in streamed]) \
                as parquet:
            for column in text:
                measure = _stream_text_bytes if column in streamed else _dictionary_text_bytes
                decoded += measure(parquet, column, name, limits)
                _check_decoded(decoded, name, limits)
            # One column at a time, each made plain (text decoded, decimals as floats) before
            # the next is read, so no more than one column is held in two forms at once.
            columns = [_plain(parquet.read(columns=[f.name]).column(0)) for f in schema]
    except (pa.ArrowException, OSError) as exc:
        # Type only: a conversion error can quote a value of the file.
        raise CpdecompError(f"{name} is not a readable Parquet file "
                            f"({type(exc).__name__})", reason="unreadable") from None
    arrow = pa.Table.from_arrays(columns, names=schema.names, metadata=schema.metadata)
    del columns
    # Dates become datetime64 columns, which core.data names as dates (not objects it cannot
    # tell from text); self_destruct hands each Arrow column to pandas and frees it.
    try:
        table = arrow.to_pandas(date_as_object=False, split_blocks=True, self_destruct=True)
    except pa.ArrowException as exc:
        raise CpdecompError(f"{name} has values that cannot be read ({type(exc).__name__}); "
                            "save dates and times as text", reason="unreadable") from None
    del arrow
    if not table.index.equals(pd.RangeIndex(len(table))):
        # A table saved with its index: an index with a name is a column (a patient id); rows
        # are numbered from 0 like a CSV's, for messages and patient ids.
        table = table.reset_index(drop=all(n is None for n in table.index.names))
    for column in text_columns:
        if column in table.columns:
            table[column] = table[column].map(lambda v: v if is_missing(v) else str(v))
    _check_field_lengths(table, name, limits)
    return table


STREAM_ROWS = 64
"""Rows per batch when text must be decoded to be measured: at most 64 fields in memory."""

DICTIONARY_ENCODINGS = {"PLAIN", "PLAIN_DICTIONARY", "RLE_DICTIONARY", "RLE", "BIT_PACKED"}
"""Parquet encodings pyarrow can read straight into a dictionary (values once, then indices)."""


def _is_text(kind) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        return _is_text(kind.value_type)
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or \
        pa.types.is_string_view(kind)


def _is_number_or_date(kind) -> bool:
    import pyarrow as pa

    return (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)
            or pa.types.is_decimal(kind) or pa.types.is_date(kind)
            or pa.types.is_timestamp(kind) or pa.types.is_null(kind))


def _check_column_type(field, name: str) -> None:
    """Numbers, text and dates are read; anything else (binary, lists, structs, maps, times
    of day, durations, extension types) is refused from the schema, before any data."""
    import pyarrow as pa

    kind = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
    if _is_text(kind) or _is_number_or_date(kind):
        return
    what = "binary data" if (pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
                             or pa.types.is_binary_view(kind)
                             or pa.types.is_fixed_size_binary(kind)) else "values"
    raise CpdecompError(
        f"{name}: column {field.name!r} holds {field.type} ({what}), not numbers, text or "
        "dates; convert it or leave it out", reason="column_type")


def _fixed_width(kind) -> int:
    """Bytes a row of a number or date column takes once read (8 for every number: pandas
    holds integers with gaps, and decimals, as floats)."""
    import pyarrow as pa

    if pa.types.is_null(kind):
        return 0
    if pa.types.is_boolean(kind):
        return 1
    if pa.types.is_dictionary(kind):
        return _fixed_width(kind.value_type)
    return max(8, kind.bit_width // 8) if not pa.types.is_decimal(kind) else 8


def _has_dictionary_encodings(metadata, column: str) -> bool:
    index = metadata.schema.names.index(column)
    return all(set(metadata.row_group(i).column(index).encodings) <= DICTIONARY_ENCODINGS
               for i in range(metadata.num_row_groups))


def _check_decoded(decoded: int, name: str, limits: TableLimits) -> None:
    if decoded > limits.max_decoded_bytes:
        raise CpdecompError(
            f"{name} holds more than {_mebibytes(limits.max_decoded_bytes)} of data once "
            "decompressed; that is the limit", reason="too_large")


def _check_longest(longest: int, column: str, name: str, limits: TableLimits) -> None:
    if longest > limits.max_field_bytes:
        raise CpdecompError(
            f"{name}: column {column!r} has a value longer than {limits.max_field_bytes:,} "
            "characters; a table cell that long is not a feature", reason="field_too_long")


def _dictionary_text_bytes(parquet, column: str, name: str, limits: TableLimits) -> int:
    """Decoded bytes of a text column read as a dictionary: each row's value length, taken
    from the (small) dictionary by the row's index, one row group at a time; no text copied."""
    import pyarrow.compute as pc

    total = 0
    for group in range(parquet.metadata.num_row_groups):
        chunked = parquet.read_row_group(group, columns=[column]).column(0)
        for chunk in chunked.chunks:
            per_row = pc.take(pc.binary_length(chunk.dictionary), chunk.indices)
            _check_longest(pc.max(per_row).as_py() or 0, column, name, limits)
            total += (pc.sum(per_row).as_py() or 0) + 8 * len(chunk)
            _check_decoded(total, name, limits)
    return total


def _stream_text_bytes(parquet, column: str, name: str, limits: TableLimits) -> int:
    """Decoded bytes of a text column without a dictionary, decoded STREAM_ROWS at a time."""
    import pyarrow.compute as pc

    total = 0
    for batch in parquet.iter_batches(batch_size=STREAM_ROWS, columns=[column], use_threads=False):
        lengths = pc.binary_length(batch.column(0))
        _check_longest(pc.max(lengths).as_py() or 0, column, name, limits)
        total += (pc.sum(lengths).as_py() or 0) + 8 * batch.num_rows
        _check_decoded(total, name, limits)
    return total


def _plain(column):
    """A column as pandas should get it: text decoded from its dictionary (as measured),
    decimals as floats (pandas would make a Python object of each)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        column = pc.cast(column, column.type.value_type)
    if pa.types.is_string_view(column.type) or pa.types.is_large_string(column.type):
        column = pc.cast(column, pa.string())
    if pa.types.is_decimal(column.type):
        column = pc.cast(column, pa.float64())
    return column


READERS = {"csv": _read_csv, "parquet": _read_parquet}
KIND_NAMES = {"csv": "CSV", "parquet": "Parquet"}


def row_name(position: int) -> str:
    """A row of data counted from 1 after the header (a spreadsheet shows it one lower)."""
    return f"data row {position + 1}"

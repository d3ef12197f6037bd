"""Reading a CSV file: separator and decimal sniffed, one bounded pass over its bytes first
(strict UTF-8, no NUL bytes, no overlong field), then pandas with the caps."""

from __future__ import annotations

import codecs
import re
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.missing import MISSING_TOKENS, entirely_missing
from cpdecomp.core.tables.checks import check_field_lengths, check_names, check_size
from cpdecomp.core.tables.limits import TableLimits

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


@dataclass(frozen=True)
class _CsvPlan:
    """How a checked CSV file is read: pandas' options, its names and its row cap."""

    options: dict
    names: list[str]
    max_rows: int


def _plan_csv(path: Path, name: str, text_columns: Sequence[str],
              limits: TableLimits) -> _CsvPlan:
    """Check a CSV file before any row is parsed: bytes, encoding, header, field lengths."""
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
    check_size(name, 0, len(names), limits)
    _refuse_data_as_header(names, name, decimal)
    # Blank names are judged after reading: an unnamed, empty column is dropped.
    check_names([n if n.strip() else f"\0{i}" for i, n in enumerate(names)], name)
    options = dict(sep=separator, decimal=decimal, encoding="utf-8-sig",
                   na_values=MISSING_TOKENS, keep_default_na=True, low_memory=False,
                   dtype={column: str for column in text_columns}, index_col=False)
    return _CsvPlan(options, names, min(limits.max_rows, limits.max_cells // max(len(names), 1)))


@contextmanager
def _ragged_refused(name: str) -> Iterator[None]:
    with warnings.catch_warnings():
        # pandas warns (and drops data) when rows have more fields than the header.
        warnings.simplefilter("error", pd.errors.ParserWarning)
        try:
            yield
        except pd.errors.ParserWarning as exc:
            raise CpdecompError(
                f"{name}: rows have more fields than the header has names; check the separator "
                "or remove the separators at the ends of the lines", reason="ragged") from exc


def read_csv(path: Path, name: str, text_columns: Sequence[str],
             limits: TableLimits) -> pd.DataFrame:
    plan = _plan_csv(path, name, text_columns, limits)
    with _ragged_refused(name):
        table = pd.read_csv(path, nrows=plan.max_rows + 1, **plan.options)
    if len(table) > plan.max_rows:
        check_size(name, len(table), len(plan.names), limits)
    return _named(table, plan.names, name, limits)


def _named(table: pd.DataFrame, names: list[str], name: str,
           limits: TableLimits) -> pd.DataFrame:
    table.columns = names
    blank = [c for c in names if not c.strip() and entirely_missing(table[c])]
    table = table.drop(columns=blank)  # separators at the ends of lines: empty, unnamed
    check_field_lengths(table, name, limits)
    return table


def iter_csv(path: Path, name: str, text_columns: Sequence[str], limits: TableLimits,
             rows: int) -> Iterator[pd.DataFrame]:
    """read_csv `rows` rows at a time, after the same checks; rows keep their file numbers."""
    plan = _plan_csv(path, name, text_columns, limits)
    columns: list[str] | None = None
    with _ragged_refused(name):
        with pd.read_csv(path, nrows=plan.max_rows + 1, chunksize=rows,
                         **plan.options) as reader:
            for chunk in reader:
                chunk = _named(chunk, plan.names, name, limits)
                if columns is None:
                    columns = list(chunk.columns)
                elif list(chunk.columns) != columns:
                    if any(c not in columns for c in chunk.columns):
                        # An unnamed column empty in the first rows but not in later ones:
                        # the chunks already given went without it.
                        raise CpdecompError(f"{name}: a column without a name has values "
                                            "after its first rows; name it or remove it",
                                            reason="names")
                    chunk = chunk.reindex(columns=columns)  # one empty in this chunk only
                yield chunk


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

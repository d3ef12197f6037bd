"""Reading a Parquet file: what it decodes to is measured before any of it is decoded."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import pandas as pd

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.missing import is_missing
from cpdecomp.core.tables.checks import check_field_lengths, check_names, check_size, mebibytes
from cpdecomp.core.tables.limits import TableLimits
from cpdecomp.core.tables.parquet_pages import (
    MAX_FOOTER_BYTES,
    THRIFT_CONTAINER_LIMIT,
    check_counts,
    check_footer_structure,
    check_pages,
    check_pandas_metadata,
    declared_bytes,
    read_footer,
)


def read_parquet(path: Path, name: str, text_columns: Sequence[str],
                 limits: TableLimits) -> pd.DataFrame:
    """Measure what the file decodes to before decoding any of it, then read it a column chunk
    at a time under a budget.

    The footer's counts and sizes are checked against each other and against every page header
    first (`parquet_pages`): pyarrow trusts them, and a file that lies about them made it take
    gigabytes. The footer then gives rows, columns, types and the width of every fixed-width
    column; text is
    measured from its dictionary and row indices (or streamed in small batches where the
    encoding has no dictionary), so a kilobyte that would decode to gigabytes is refused having
    cost about a kilobyte. pyarrow reads plain arrays: nothing in a Parquet file is unpickled.
    """
    import pyarrow as pa

    dictionary = _measure(path, name, limits)
    try:
        with _opened(path, dictionary) as parquet:
            schema = parquet.schema_arrow
            arrow = _read_row_groups(parquet, schema, name, limits)
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(name, exc) from None
    arrow = arrow.replace_schema_metadata(schema.metadata)
    return _frame(arrow, name, text_columns, limits, start=0)


def _read_row_groups(parquet, schema, name: str, limits: TableLimits):
    """The file a column chunk at a time (each column of one row group, then the next row
    group), each made plain (text decoded, decimals as floats) before the next is read, so no
    more than one column chunk is held in two forms at once; and under a budget: what has been
    decoded is counted after each chunk, and the read stops at the caps on decoded bytes, rows
    and cells even if the footer (checked before) was wrong about them."""
    import pyarrow as pa

    if parquet.metadata.num_row_groups == 0:  # no rows: the columns, for "no data rows"
        return pa.Table.from_arrays([_plain(c) for c in parquet.read().columns],
                                    names=schema.names)
    chunks: list[list] = [[] for _ in schema]
    rows = decoded = 0
    for group in range(parquet.metadata.num_row_groups):
        for field, held in zip(schema, chunks, strict=True):
            column = _plain(parquet.read_row_group(group, columns=[field.name],
                                                   use_threads=False).column(0))
            decoded += column.nbytes
            _check_decoded(decoded, name, limits)
            check_size(name, rows + len(column), len(schema.names), limits)
            held.extend(column.chunks)
        rows += len(column)
    return pa.Table.from_arrays([pa.chunked_array(held) for held in chunks],
                                names=schema.names)


def iter_parquet(path: Path, name: str, text_columns: Sequence[str], limits: TableLimits,
                 rows: int) -> Iterator[pd.DataFrame]:
    """read_parquet a batch of `rows` rows at a time, after the same measurements."""
    import pyarrow as pa

    dictionary = _measure(path, name, limits)
    start = 0
    try:
        with _opened(path, dictionary, streamed=True) as parquet:
            schema = parquet.schema_arrow
            for batch in parquet.iter_batches(batch_size=rows, use_threads=False):
                arrow = pa.Table.from_arrays([_plain(c) for c in batch.columns],
                                             names=schema.names, metadata=schema.metadata)
                frame = _frame(arrow, name, text_columns, limits, start)
                start += len(frame)
                yield frame
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(name, exc) from None


def _unreadable(name: str, exc: BaseException) -> CpdecompError:
    # Type only: a conversion error can quote a value of the file.
    return CpdecompError(f"{name} is not a readable Parquet file ({type(exc).__name__})",
                         reason="unreadable")


STREAM_BUFFER = 1 << 20
"""Bytes read at a time while streaming a column chunk (see _opened)."""


def _opened(path: Path, dictionary: list[str], streamed: bool = False):
    """The file, opened to read whole or (streamed) a batch at a time. Streamed, its column
    chunks are read through a small buffer rather than each row group's bytes fetched and held
    at once: pandas writes up to a million rows in one row group, and holding it (96 MB for
    12 float columns) was most of the memory a million-patient run took above a 10^4 one."""
    import pyarrow.parquet as pq

    limits = {"thrift_string_size_limit": MAX_FOOTER_BYTES,
              "thrift_container_size_limit": THRIFT_CONTAINER_LIMIT}
    if streamed:
        return pq.ParquetFile(path, read_dictionary=dictionary, pre_buffer=False,
                              buffer_size=STREAM_BUFFER, **limits)
    return pq.ParquetFile(path, read_dictionary=dictionary, **limits)


def _measure(path: Path, name: str, limits: TableLimits) -> list[str]:
    """Refuse from the footer and the text's lengths what would decode past the caps; returns
    the text columns to read as dictionaries (as they were measured)."""
    import pyarrow as pa

    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            footer = read_footer(handle, size, name)
            if footer is not None:
                check_footer_structure(footer, name, limits.max_columns)
                del footer
            with _opened(path, []) as parquet:
                schema = parquet.schema_arrow
                metadata = parquet.metadata
                check_size(name, 0, len(schema.names), limits)
                check_names([str(n) for n in schema.names], name)
                for field in schema:
                    _check_column_type(field, name)
                rows = check_counts(metadata, name)
                check_size(name, rows, len(schema.names), limits)
                check_pandas_metadata(metadata.metadata, [str(n) for n in schema.names], name)
                _check_decoded(declared_bytes(metadata), name, limits)
                check_pages(handle, size, metadata, name)
                text = [f.name for f in schema if _is_text(f.type)]
                decoded = sum(_fixed_width(f.type) * rows for f in schema if f.name not in text)
                _check_decoded(decoded, name, limits)
                # Prefix-compressed text (DELTA_BYTE_ARRAY) cannot be read into a dictionary.
                streamed = [c for c in text if not _has_dictionary_encodings(metadata, c)]
        dictionary = [c for c in text if c not in streamed]
        with _opened(path, dictionary, streamed=True) as parquet:
            for column in text:
                measure = _stream_text_bytes if column in streamed else _dictionary_text_bytes
                decoded += measure(parquet, column, name, limits)
                _check_decoded(decoded, name, limits)
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(name, exc) from None
    return dictionary


def _frame(arrow, name: str, text_columns: Sequence[str], limits: TableLimits,
           start: int) -> pd.DataFrame:
    """Plain Arrow columns as the pandas table load_table gives, rows numbered from `start`."""
    import pyarrow as pa

    # Dates become datetime64 columns, which core.data names as dates (not objects it cannot
    # tell from text); self_destruct hands each Arrow column to pandas and frees it.
    has_pandas_metadata = b"pandas" in (arrow.schema.metadata or {})
    try:
        table = arrow.to_pandas(date_as_object=False, split_blocks=True, self_destruct=True)
    except pa.ArrowException as exc:
        raise CpdecompError(f"{name} has values that cannot be read ({type(exc).__name__}); "
                            "save dates and times as text", reason="unreadable") from None
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        # pandas' metadata had the right shape (checked before reading) but not its contents:
        # pyarrow's use of it fails in whichever way the forgery makes it
        if not has_pandas_metadata:
            raise
        raise CpdecompError(
            f"{name}: its pandas metadata (the footer's 'pandas' entry) is not what pandas "
            "writes; save the table again", reason="inconsistent") from None
    del arrow
    if not table.index.equals(pd.RangeIndex(len(table))):
        # A table saved with its index: an index with a name is a column (a patient id); rows
        # are numbered from 0 like a CSV's, for messages and patient ids.
        table = table.reset_index(drop=all(n is None for n in table.index.names))
    if start:
        table.index = pd.RangeIndex(start, start + len(table))
    for column in text_columns:
        if column in table.columns:
            table[column] = table[column].map(lambda v: v if is_missing(v) else str(v))
    check_field_lengths(table, name, limits)
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
            f"{name} holds more than {mebibytes(limits.max_decoded_bytes)} of data once "
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

"""What a Parquet file declares about its own size, checked against itself before anything is
decoded: the footer's rows against its row groups', each column chunk's values against its row
group's rows, and every page header against the column chunk that holds it.

pyarrow trusts these numbers: it allocates a page's declared decompressed size before
decompressing it, and reads as many rows as the row groups declare whatever the file's total
says. A file whose numbers disagree was not written by a Parquet library, and is refused before
pyarrow reads a page. pyarrow does not expose page headers, so they are read here: a page
header is a small Thrift struct (compact protocol) in front of each page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import BinaryIO

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.tables.checks import mebibytes

MAX_FOOTER_BYTES = 16 * 2**20
"""The footer (FileMetaData: schema, row groups, key-value metadata) pyarrow parses whole; an
honest one for 1,000 columns in 100 row groups is a few MiB."""

THRIFT_CONTAINER_LIMIT = 200_000
"""The most elements pyarrow may decode in one footer list (its default is 1,000,000): far
above 1,000 columns or the row groups of a million rows, and a bound on what a forged list of
tiny structs can make pyarrow allocate."""

PANDAS_METADATA_BASE = 64 * 2**10
PANDAS_METADATA_PER_CHARACTER = 12
PANDAS_METADATA_PER_COLUMN = 1024
"""What pandas' metadata (the footer's b'pandas' entry, JSON) may take: its fixed part, and per
column its entry, which repeats the name (escaped, up to 6 bytes a character) with its types."""

PAGE_HEADER_READ = 256
"""Bytes read first for a page header; a header with long statistics is read again, longer."""

DATA_PAGE, INDEX_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 1, 2, 3


def damaged(name: str, what: str) -> CpdecompError:
    return CpdecompError(
        f"{name} is damaged: {what}; a Parquet library writes these numbers consistently, so "
        "save the table again", reason="inconsistent")


def _size(count: int) -> str:
    return mebibytes(count) if count >= 2**20 else f"{count:,} bytes"


def read_footer(handle: BinaryIO, size: int, name: str) -> bytes | None:
    """The footer's bytes, its length (the file's last 8 bytes) checked before they are read;
    None for a file that does not end as Parquet does (pyarrow then says it is none)."""
    if size < 12:
        return None
    handle.seek(size - 8)
    tail = handle.read(8)
    if tail[4:] != b"PAR1":
        return None
    length = int.from_bytes(tail[:4], "little")
    if length > size - 12:
        raise damaged(name, f"its footer says it is {length:,} bytes, longer than the file")
    if length > MAX_FOOTER_BYTES:
        raise CpdecompError(
            f"{name}: its footer (the description of its columns and row groups) is "
            f"{mebibytes(length)}; the limit is {mebibytes(MAX_FOOTER_BYTES)}: save it with "
            "fewer, larger row groups and no extra metadata", reason="too_large")
    handle.seek(size - 8 - length)
    return handle.read(length)


MAX_COLUMN_CHUNKS = 50_000
"""Row groups x columns: what pyarrow builds an object of about 1.4 kB for as it parses the
footer (70 MB here). An honest file within the caps has far fewer: 1,000 columns in 20 row
groups are 20,000; a forged footer of 14 MB listing 4.75 million took the reader past 6 GiB."""


def check_footer_structure(footer: bytes, name: str, max_columns: int) -> None:
    """Count the footer's schema elements, row groups and column chunks from its bytes, before
    pyarrow parses it into objects: every row group must have one column chunk per column, and
    all of them together at most MAX_COLUMN_CHUNKS. Nothing but the counts is kept."""
    cursor = _Cursor(footer)
    leaves = chunks = 0

    def element(field: int, kind: int, children: list[int]) -> None:
        if field == 5 and kind == _I32:
            children.append(cursor.signed())
        else:
            cursor.skip(kind, 2)

    def group(field: int, kind: int, index: int) -> None:
        nonlocal chunks
        if field != 1 or kind != _LIST:
            cursor.skip(kind, 2)
            return
        count, item = cursor.list_header()
        if count != leaves:
            raise damaged(name, f"row group {index + 1} has {count:,} column chunks for "
                          f"{leaves:,} column" + ("" if leaves == 1 else "s"))
        chunks += count
        if chunks > MAX_COLUMN_CHUNKS:
            raise CpdecompError(
                f"{name} is split into more than {MAX_COLUMN_CHUNKS:,} column chunks (row "
                f"groups x columns); save it with fewer, larger row groups",
                reason="too_large")
        for _ in range(count):
            cursor.skip(item, 2, field=False)

    def top(field: int, kind: int) -> None:
        nonlocal leaves
        if field == 2 and kind == _LIST:
            count, _ = cursor.list_header()
            if count - 1 > 4 * max_columns:  # nested columns take several elements each
                raise CpdecompError(
                    f"{name} has {count - 1:,} columns; the limit is {max_columns:,}: keep the "
                    "features, the target and the id column", reason="too_many_columns")
            for position in range(count):
                children: list[int] = []
                cursor.fields(lambda f, k, c=children: element(f, k, c))
                if position and not any(children):
                    leaves += 1
        elif field == 4 and kind == _LIST:
            count, _ = cursor.list_header()
            for index in range(count):
                cursor.fields(lambda f, k, i=index: group(f, k, i))
        else:
            cursor.skip(kind, 1)

    try:
        cursor.fields(top)
    except CpdecompError:  # a ValueError too
        raise
    except (_Short, ValueError):
        raise damaged(name, "its footer cannot be read") from None


def check_counts(metadata, name: str) -> int:
    """The file's rows as its row groups count them, after checking that every count agrees:
    the footer's total, each row group's rows and each column chunk's values (our columns are
    flat: one value, or one null, a row)."""
    rows = 0
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        if row_group.num_rows < 0:
            raise damaged(name, f"row group {group + 1} says it has {row_group.num_rows:,} rows")
        rows += row_group.num_rows
        for column in range(row_group.num_columns):
            chunk = row_group.column(column)
            if chunk.num_values != row_group.num_rows:
                raise damaged(
                    name, f"in row group {group + 1}, column {chunk.path_in_schema!r} holds "
                    f"{chunk.num_values:,} values for {row_group.num_rows:,} rows")
    if rows != metadata.num_rows:
        raise damaged(name, f"its footer counts {metadata.num_rows:,} rows, its row groups "
                      f"{rows:,}")
    return rows


def declared_bytes(metadata) -> int:
    """The file's data once decompressed, as the footer declares it: the larger of the row
    groups' totals and their column chunks' (both are the footer's; pages are checked against
    the column chunks')."""
    total = 0
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        chunks = sum(max(row_group.column(c).total_uncompressed_size, 0)
                     for c in range(row_group.num_columns))
        total += max(row_group.total_byte_size, chunks)
    return total


def check_pandas_metadata(metadata: dict[bytes, bytes] | None, names: list[str],
                          name: str) -> None:
    """pandas' metadata is JSON that pyarrow parses into Python objects and pandas then trusts:
    its size is checked against what the columns need before it is parsed, and its shape after."""
    text = (metadata or {}).get(b"pandas")
    if text is None:
        return
    most = PANDAS_METADATA_BASE + sum(
        PANDAS_METADATA_PER_CHARACTER * len(n) + PANDAS_METADATA_PER_COLUMN for n in names)
    if len(text) > most:
        raise CpdecompError(
            f"{name}: its pandas metadata (the footer's 'pandas' entry) is {mebibytes(len(text))},"
            f" more than its {len(names):,} columns need ({mebibytes(most)} at most); save the "
            "table again", reason="inconsistent")
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        parsed = None
    if not _pandas_shaped(parsed):
        raise CpdecompError(
            f"{name}: its pandas metadata (the footer's 'pandas' entry) is not what pandas "
            "writes; save the table again", reason="inconsistent")


def _pandas_shaped(parsed: object) -> bool:
    if not isinstance(parsed, dict) or not {"columns", "index_columns"} <= parsed.keys():
        return False
    columns = parsed["columns"]
    indexes = parsed["index_columns"]
    levels = parsed.get("column_indexes", [])
    return (isinstance(columns, list) and all(isinstance(c, dict) for c in columns)
            and isinstance(indexes, list) and all(isinstance(i, str | dict) for i in indexes)
            and isinstance(levels, list) and all(isinstance(c, dict) for c in levels))


@dataclass(frozen=True)
class PageHeader:
    kind: int
    uncompressed: int
    compressed: int
    values: int
    length: int
    """Bytes of the header itself."""


def check_pages(handle: BinaryIO, size: int, metadata, name: str) -> None:
    """Every page header of every column chunk, against the chunk: the pages lie inside it,
    their decompressed sizes add up to no more than it declares, and their values to its own."""
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for column in range(row_group.num_columns):
            chunk = row_group.column(column)
            where = f"column {chunk.path_in_schema!r} in row group {group + 1}"
            _check_chunk(handle, size, chunk, name, where)


def _check_chunk(handle: BinaryIO, size: int, chunk, name: str, where: str) -> None:
    # The chunk starts at its first page; an empty one (pyarrow's for a table of no rows) has
    # a dictionary page only, and a data page offset of 0.
    offsets = [chunk.data_page_offset,
               chunk.dictionary_page_offset if chunk.has_dictionary_page else None]
    start = min((o for o in offsets if o), default=0)
    end = start + chunk.total_compressed_size
    if start < 4 or chunk.total_compressed_size < 0 or end > size:
        raise damaged(name, f"the pages of {where} lie outside the file")
    declared = chunk.total_uncompressed_size
    decompressed = values = 0
    position = start
    while position < end:
        page = _page_header(handle, position, end, name, where)
        if page.compressed < 0 or page.uncompressed < 0 or \
                position + page.length + page.compressed > end:
            raise damaged(name, f"a page of {where} runs past the end of its column")
        decompressed += page.uncompressed
        if decompressed > declared:
            raise damaged(
                name, f"the pages of {where} declare {_size(decompressed)} or more once "
                f"decompressed, its footer {_size(max(declared, 0))}")
        if page.values < 0:
            raise damaged(name, f"a page of {where} says it holds {page.values:,} values")
        if page.kind == DICTIONARY_PAGE and page.values > page.uncompressed:
            # every dictionary entry takes a byte or more, and pyarrow allocates for the count
            raise damaged(name, f"the dictionary of {where} lists {page.values:,} values in "
                          f"{_size(page.uncompressed)}")
        if page.kind in (DATA_PAGE, DATA_PAGE_V2):
            values += page.values
        position += page.length + page.compressed
    if values != chunk.num_values:
        raise damaged(name, f"the pages of {where} hold {values:,} values, its footer says "
                      f"{chunk.num_values:,}")


class _Short(Exception):
    """The bytes read end inside the header."""


def _page_header(handle: BinaryIO, position: int, end: int, name: str,
                 where: str) -> PageHeader:
    want = PAGE_HEADER_READ
    while True:
        handle.seek(position)
        data = handle.read(min(want, end - position))
        try:
            return _decode_page_header(data)
        except _Short:
            if len(data) >= end - position:
                raise damaged(name, f"a page header of {where} runs past the end of its "
                              "column") from None
            want *= 4
        except ValueError:
            raise damaged(name, f"a page header of {where} cannot be read") from None


# Thrift compact protocol: each field is a byte (field-id delta << 4 | type), then its value.
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = \
    range(13)
_MAX_DEPTH = 16


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def byte(self) -> int:
        if self.position >= len(self.data):
            raise _Short
        value = self.data[self.position]
        self.position += 1
        return value

    def varint(self) -> int:
        shift = result = 0
        while True:
            byte = self.byte()
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise ValueError("varint too long")

    def signed(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def list_header(self) -> tuple[int, int]:
        """A list's length and element type."""
        header = self.byte()
        count = header >> 4
        if count == 15:
            count = self.varint()
        return count, header & 0x0F

    def skip(self, kind: int, depth: int, field: bool = True) -> None:
        """Step over a value; a field's boolean is in its type, a list's takes a byte."""
        if depth > _MAX_DEPTH:
            raise ValueError("nested too deep")
        if kind in (_TRUE, _FALSE):
            if not field:
                self.byte()
        elif kind == _BYTE:
            self.byte()
        elif kind in (_I16, _I32, _I64):
            self.varint()
        elif kind == _DOUBLE:
            self.advance(8)
        elif kind == _BINARY:
            self.advance(self.varint())
        elif kind in (_LIST, _SET):
            count, item = self.list_header()
            for _ in range(count):
                self.skip(item, depth + 1, field=False)
        elif kind == _MAP:
            count = self.varint()
            if count:
                types = self.byte()
                for _ in range(count):
                    self.skip(types >> 4, depth + 1, field=False)
                    self.skip(types & 0x0F, depth + 1, field=False)
        elif kind == _STRUCT:
            self.fields(lambda _field, k: self.skip(k, depth + 1))
        else:
            raise ValueError(f"unknown thrift type {kind}")

    def advance(self, count: int) -> None:
        if self.position + count > len(self.data):
            raise _Short
        self.position += count

    def fields(self, each) -> None:
        """Call each(field id, type) for the fields of a struct, which must consume them."""
        last = 0
        while True:
            header = self.byte()
            if header == _STOP:
                return
            delta, kind = header >> 4, header & 0x0F
            field = last + delta if delta else self.signed()
            last = field
            each(field, kind)


def _decode_page_header(data: bytes) -> PageHeader:
    """PageHeader (parquet.thrift): 1 type, 2 uncompressed_page_size, 3 compressed_page_size,
    5 data_page_header, 7 dictionary_page_header, 8 data_page_header_v2 (each: 1 num_values)."""
    cursor = _Cursor(data)
    found: dict[str, int] = {}

    def inner(field: int, kind: int) -> None:
        if field == 1 and kind == _I32:
            found["values"] = cursor.signed()
        else:
            cursor.skip(kind, 1)

    def outer(field: int, kind: int) -> None:
        if field in (1, 2, 3) and kind == _I32:
            found[("kind", "uncompressed", "compressed")[field - 1]] = cursor.signed()
        elif field in (5, 7, 8) and kind == _STRUCT:
            cursor.fields(inner)
        else:
            cursor.skip(kind, 0)

    cursor.fields(outer)
    if not {"kind", "uncompressed", "compressed"} <= found.keys():
        raise ValueError("a required field is missing")
    return PageHeader(kind=found["kind"], uncompressed=found["uncompressed"],
                      compressed=found["compressed"], values=found.get("values", 0),
                      length=cursor.position)

"""Parquet files whose metadata lies about their size, made from honest files pyarrow writes.

`rewrite` decodes an honest file's footer and page headers (tests/corpus/thrift_compact.py),
lets a generator edit them, and writes the pages back with their offsets recomputed, so
pyarrow still finds every page and believes every lie. Each generator is deterministic and
holds no more than a few tens of megabytes while it writes.

The files (issue 32): a footer that claims few rows over 300 columns of a million rows each;
row groups whose rows are fewer than their pages' values; a page of a few kilobytes that
decompresses to 1.5 GB under a footer that declares a few; the same in a dictionary page; and
pandas metadata of 49 MB (sixteen million empty lists) that pandas cannot use.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from corpus.thrift_compact import (
    BINARY,
    I32,
    I64,
    LIST,
    STRUCT,
    Struct,
    decode_struct,
    encode_struct,
)

# FileMetaData, RowGroup, ColumnChunk, ColumnMetaData and PageHeader field ids (parquet.thrift)
FILE_ROWS, FILE_ROW_GROUPS, FILE_KEY_VALUES = 3, 4, 5
GROUP_COLUMNS, GROUP_BYTES, GROUP_ROWS, GROUP_OFFSET, GROUP_COMPRESSED = 1, 2, 3, 5, 6
CHUNK_OFFSET, CHUNK_META = 2, 3
META_VALUES, META_UNCOMPRESSED, META_COMPRESSED, META_DATA_PAGE, META_DICTIONARY_PAGE = (
    5, 6, 7, 9, 11)
PAGE_TYPE, PAGE_UNCOMPRESSED, PAGE_COMPRESSED, PAGE_CRC = 1, 2, 3, 4
PAGE_DATA_HEADER, PAGE_DICTIONARY_HEADER, PAGE_DATA_V2_HEADER = 5, 7, 8
DATA_PAGE, DICTIONARY_PAGE = 0, 2

Page = tuple[Struct, bytes]
PageEdit = Callable[[int, int, list[Page]], list[Page]]
"""(row group, column, its pages) -> the pages to write instead."""


def footer_of(path: Path) -> Struct:
    data = path.read_bytes()
    length = int.from_bytes(data[-8:-4], "little")
    footer, _ = decode_struct(data, len(data) - 8 - length)
    return footer


def _pages(data: bytes, meta: Struct) -> list[Page]:
    start = meta[META_DATA_PAGE][1]
    if 0 < meta.get(META_DICTIONARY_PAGE, (I64, 0))[1] < start:
        start = meta[META_DICTIONARY_PAGE][1]
    end = start + meta[META_COMPRESSED][1]
    pages, position = [], start
    while position < end:
        header, position = decode_struct(data, position)
        size = header[PAGE_COMPRESSED][1]
        pages.append((header, data[position:position + size]))
        position += size
    return pages


def rewrite(source: Path, target: Path, *, edit_pages: PageEdit | None = None,
            edit_footer: Callable[[Struct], None] | None = None) -> None:
    """Write `source` again as `target`, its pages edited by `edit_pages` and its footer by
    `edit_footer`; the offsets and compressed sizes are what was written (pyarrow needs them
    to find the pages), every other size is what the edits left."""
    data = source.read_bytes()
    footer = footer_of(source)
    out = bytearray(b"PAR1")
    for g, group in enumerate(footer[FILE_ROW_GROUPS][1][1]):
        group_start = len(out)
        for c, chunk in enumerate(group[GROUP_COLUMNS][1][1]):
            meta = chunk[CHUNK_META][1]
            pages = _pages(data, meta)
            if edit_pages is not None:
                pages = edit_pages(g, c, pages)
            start = len(out)
            meta.pop(META_DICTIONARY_PAGE, None)
            for header, payload in pages:
                header = dict(header)
                header[PAGE_COMPRESSED] = (I32, len(payload))
                header.pop(PAGE_CRC, None)
                if header[PAGE_TYPE][1] == DICTIONARY_PAGE:
                    meta[META_DICTIONARY_PAGE] = (I64, len(out))
                elif META_DATA_PAGE not in meta or meta[META_DATA_PAGE][1] < start:
                    meta[META_DATA_PAGE] = (I64, len(out))
                out += encode_struct(header) + payload
            meta[META_COMPRESSED] = (I64, len(out) - start)
            chunk[CHUNK_OFFSET] = (I64, start)
        if GROUP_OFFSET in group:
            group[GROUP_OFFSET] = (I64, group_start)
        if GROUP_COMPRESSED in group:
            group[GROUP_COMPRESSED] = (I64, len(out) - group_start)
    if edit_footer is not None:
        edit_footer(footer)
    encoded = encode_struct(footer)
    out += encoded + len(encoded).to_bytes(4, "little") + b"PAR1"
    target.write_bytes(bytes(out))


def _groups(footer: Struct) -> list[Struct]:
    return list(footer[FILE_ROW_GROUPS][1][1])


def _metas(footer: Struct) -> list[Struct]:
    return [chunk[CHUNK_META][1] for group in _groups(footer)
            for chunk in group[GROUP_COLUMNS][1][1]]


def zstd_zeros(size: int) -> bytes:
    """A zstd frame that decompresses to `size` zero bytes, in 4 bytes per 128 KiB (RLE blocks):
    written by hand, since compressing the zeros would take `size` bytes of memory."""
    block = 1 << 17
    frame = bytearray(b"\x28\xb5\x2f\xfd\x00\x38")  # magic; no content size; 128 KiB window
    remaining = size
    while remaining:
        n = min(block, remaining)
        remaining -= n
        last = 1 if remaining == 0 else 0
        frame += (last | (1 << 1) | (n << 3)).to_bytes(3, "little") + b"\x00"  # RLE block
    return bytes(frame)


ROWS = 1_000_000


def _zeros(rows: int, chunk: int = 10_000) -> pa.ChunkedArray:
    """`rows` zeros that share one 80 kB buffer, so a million of them cost no memory."""
    block = pa.array(np.zeros(chunk))
    return pa.chunked_array([block] * (rows // chunk))


def few_rows_claimed_over_wide_columns(path: Path, *, columns: int = 300,
                                       rows: int = ROWS) -> None:
    """300 columns of a million zeros (stored once each, in about a megabyte), under a footer
    that says the file has 60 rows: 18,000 cells declared, 300 million (2.4 GB) decoded."""
    honest = path.with_suffix(".honest")
    zeros = _zeros(rows)
    table = pa.table({**{f"c{i}": zeros for i in range(columns - 1)}, "y": zeros})
    pq.write_table(table, honest, row_group_size=rows, compression="zstd")

    def claim_few(footer: Struct) -> None:
        footer[FILE_ROWS] = (I64, 60)

    rewrite(honest, path, edit_footer=claim_few)
    honest.unlink()


def rows_fewer_than_values(path: Path, *, columns: int = 40, rows: int = ROWS) -> None:
    """Every count of rows (file and row group) says 60; the pages hold a million values per
    column, and the column chunks say so."""
    honest = path.with_suffix(".honest")
    zeros = _zeros(rows)
    pq.write_table(pa.table({**{f"c{i}": zeros for i in range(columns - 1)}, "y": zeros}),
                   honest, row_group_size=rows, compression="zstd")

    def claim_few(footer: Struct) -> None:
        footer[FILE_ROWS] = (I64, 60)
        for group in _groups(footer):
            group[GROUP_ROWS] = (I64, 60)

    rewrite(honest, path, edit_footer=claim_few)
    honest.unlink()


PAGE_BOMB_BYTES = 1_500_000_000
"""What the lying page decompresses to: more than the file-size and decoded caps together."""


def _small_honest(path: Path, **options: object) -> None:
    rng = np.random.default_rng(32)
    pq.write_table(pa.table({"x": rng.normal(size=200), "note": [f"w{i % 9}" for i in range(200)],
                             "y": rng.normal(size=200)}), path, compression="zstd", **options)


def _page_bomb(path: Path, column: int, page_type: int) -> None:
    honest = path.with_suffix(".honest")
    _small_honest(honest)

    def bomb(_group: int, c: int, pages: list[Page]) -> list[Page]:
        if c != column:
            return pages
        first = next(i for i, (header, _) in enumerate(pages)
                     if header[PAGE_TYPE][1] == page_type)
        header = {**pages[first][0], PAGE_UNCOMPRESSED: (I32, PAGE_BOMB_BYTES)}
        return [*pages[:first], (header, zstd_zeros(PAGE_BOMB_BYTES)), *pages[first + 1:]]

    rewrite(honest, path, edit_pages=bomb)
    honest.unlink()


def dictionary_count_lie(path: Path) -> None:
    """The float column's dictionary page says it holds 200 million values (its 1.6 GB
    pyarrow reserves) in the few bytes it has: pyarrow failed with 'OSError'."""
    honest = path.with_suffix(".honest")
    _small_honest(honest)

    def inflate(_group: int, c: int, pages: list[Page]) -> list[Page]:
        edited = []
        for header, payload in pages:
            if c == 0 and header[PAGE_TYPE][1] == DICTIONARY_PAGE:
                dictionary = {**header[PAGE_DICTIONARY_HEADER][1], 1: (I32, 200_000_000)}
                header = {**header, PAGE_DICTIONARY_HEADER: (STRUCT, dictionary)}
            edited.append((header, payload))
        return edited

    rewrite(honest, path, edit_pages=inflate)
    honest.unlink()


def data_page_bomb(path: Path) -> None:
    """The float column's data page: 45 kB of zstd that decompresses to 1.5 GB of zeros, its
    header saying so, the footer's sizes for that column still those of the honest 2 kB."""
    _page_bomb(path, column=0, page_type=DATA_PAGE)


def dictionary_page_bomb(path: Path) -> None:
    """The text column's dictionary page, likewise: 1.5 GB decompressed, a few bytes declared."""
    _page_bomb(path, column=1, page_type=DICTIONARY_PAGE)


def pandas_metadata_bomb(path: Path, *, lists: int = 16_000_000) -> None:
    """A small table whose b'pandas' metadata is 48 MB: a JSON list of sixteen million empty
    lists (a gigabyte as Python objects, and not the object pandas expects)."""
    _with_pandas_metadata(path, b"[" + b"[]," * (lists - 1) + b"[]]")


def pandas_metadata_bomb_under_the_footer_cap(path: Path) -> None:
    """The same in 15 MB (five million lists, 300 MB as Python objects): a footer the
    footer's own cap lets through."""
    pandas_metadata_bomb(path, lists=5_000_000)


def pandas_metadata_of_another_shape(path: Path) -> None:
    """Small pandas metadata that is valid JSON, but its columns are numbers: pyarrow's use of
    it failed with 'AttributeError'."""
    _with_pandas_metadata(path, b'{"index_columns": [], "columns": [1]}')


def pandas_metadata_of_the_right_shape(path: Path) -> None:
    """Pandas metadata shaped as pandas writes it, with an index of a kind pandas has not:
    pyarrow's use of it failed with 'ValueError'."""
    _with_pandas_metadata(path, b'{"index_columns": [{"kind": 5}], "columns": []}')


def _with_pandas_metadata(path: Path, text: bytes) -> None:
    table = pa.table({"x": np.arange(50.0), "y": np.arange(50.0) % 7})
    with pq.ParquetWriter(path, table.schema, store_schema=False) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({b"pandas": text})


def column_chunks_by_the_million(path: Path, *, groups: int = 25,
                                 per_group: int = 190_000) -> None:
    """A footer of 14 MB listing 25 row groups of 190,000 column chunks each (three bytes
    apiece) for a file of 3 columns: 4.75 million objects for pyarrow to build as it parses the
    footer, which took the reader past 6 GiB."""
    honest = path.with_suffix(".honest")
    _small_honest(honest)
    footer = footer_of(honest)
    data = honest.read_bytes()
    length = int.from_bytes(data[-8:-4], "little")
    group = {GROUP_COLUMNS: (LIST, (STRUCT, [{CHUNK_OFFSET: (I64, 4)}] * per_group)),
             GROUP_BYTES: (I64, 0), GROUP_ROWS: (I64, 0)}
    footer[FILE_ROW_GROUPS] = (LIST, (STRUCT, [group] * groups))
    footer[FILE_ROWS] = (I64, 0)
    encoded = encode_struct(footer)
    path.write_bytes(data[:len(data) - 8 - length] + encoded + len(encoded).to_bytes(4, "little")
                     + b"PAR1")
    honest.unlink()


LYING_FILES: dict[str, tuple[Callable[[Path], None], str]] = {
    "few rows claimed over 300 columns": (
        few_rows_claimed_over_wide_columns,
        "is damaged: its footer counts 60 rows, its row groups 1,000,000"),
    "row groups with fewer rows than values": (
        rows_fewer_than_values,
        "is damaged: in row group 1, column 'c0' holds 1,000,000 values for 60 rows"),
    "a data page that decompresses to 1.5 GB": (
        data_page_bomb,
        "is damaged: the pages of column 'x' in row group 1 declare 1,430.5 MiB or more once "
        "decompressed"),
    "a dictionary page that decompresses to 1.5 GB": (
        dictionary_page_bomb,
        "is damaged: the pages of column 'note' in row group 1 declare 1,430.5 MiB or more once "
        "decompressed"),
    "a dictionary page that claims 200 million values": (
        dictionary_count_lie,
        "is damaged: the dictionary of column 'x' in row group 1 lists 200,000,000 values in"),
    "a footer listing 4.75 million column chunks": (
        column_chunks_by_the_million,
        "is damaged: row group 1 has 190,000 column chunks for 3 columns"),
    "48 MB of pandas metadata": (
        pandas_metadata_bomb,
        "its footer (the description of its columns and row groups) is 45.8 MiB; the limit is "
        "16.0 MiB"),
    "15 MB of pandas metadata": (
        pandas_metadata_bomb_under_the_footer_cap,
        "its pandas metadata (the footer's 'pandas' entry) is 14.3 MiB, more than its 2 columns "
        "need"),
    "pandas metadata of another shape": (
        pandas_metadata_of_another_shape,
        "its pandas metadata (the footer's 'pandas' entry) is not what pandas writes"),
    "pandas metadata of the right shape, wrong contents": (
        pandas_metadata_of_the_right_shape,
        "its pandas metadata (the footer's 'pandas' entry) is not what pandas writes"),
}
"""Each lying file's generator, and the phrase its one-line refusal must contain."""

SMALL_LIES = ["a data page that decompresses to 1.5 GB",
              "a dictionary page that claims 200 million values",
              "a dictionary page that decompresses to 1.5 GB",
              "pandas metadata of another shape",
              "pandas metadata of the right shape, wrong contents"]
"""The lying files of under 100 kB that take no time to make: also in the shared corpus."""


def lying_bytes(kind: str) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "lie.parquet"
        LYING_FILES[kind][0](path)
        return path.read_bytes()


def key_values(footer: Struct) -> dict[bytes, bytes]:
    """The footer's key-value metadata, as decoded here (not by pyarrow)."""
    pairs = footer.get(FILE_KEY_VALUES, (LIST, (STRUCT, [])))[1][1]
    return {pair[1][1]: pair[2][1] for pair in pairs if pair.get(2, (BINARY, b""))}


__all__ = ["LYING_FILES", "SMALL_LIES", "footer_of", "key_values", "lying_bytes", "rewrite",
           "zstd_zeros"]

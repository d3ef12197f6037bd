"""Parquet files whose metadata lies about their size (issue 32): each is refused in one line
that says what does not add up, before pyarrow decodes any of it, so its peak memory stays
within twice the file's size plus ALLOWANCE_MIB, on the command line and in the dashboard's
upload reader. Honest files of every layout pyarrow writes still read as pyarrow reads them.

The files are made by tests/corpus/parquet_lies.py from honest ones; pyarrow's own reading of
their footers is what shows that each lie is in the file.
"""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from corpus.parquet_bombs import peak_rss_of_command, peak_rss_of_upload
from corpus.parquet_lies import (
    LYING_FILES,
    PAGE_BOMB_BYTES,
    footer_of,
    key_values,
    rewrite,
    zstd_zeros,
)
from corpus.thrift_compact import decode_struct, encode_struct

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.tables import load_table, parquet_reader

ALLOWANCE_MIB = 512
"""What a refused file may cost beyond twice its size: the command line explaining a trivial
honest file peaks at about 330 MiB (its imports and one run), 380-450 MiB on a fresh machine's
first runs (a CI run: the 15 MB pandas-metadata file peaked at 415 MiB against 384 + 29), the
dashboard's upload reader at about 120 MiB; rounded up. GROWTH_MIB is the tighter check.
docs/deployment.md states it."""

GROWTH_MIB = 64
"""What refusing a lying file may add, beyond twice its size, to the same process refusing or
reading a trivial file: the memory a server's upload adds to what the server already holds."""


@pytest.fixture(scope="module")
def lies(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("lies")
    paths = {}
    for n, (kind, (make, _)) in enumerate(LYING_FILES.items()):
        paths[kind] = folder / f"lie-{n}.parquet"
        make(paths[kind])
    return paths


@pytest.fixture(scope="module")
def trivial(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("trivial") / "trivial.parquet"
    rng = np.random.default_rng(0)
    pq.write_table(pa.table({"x": rng.normal(size=100), "y": rng.normal(size=100)}), path)
    return path


def _cli(path: Path) -> list[str]:
    return [sys.executable, "-m", "cpdecomp", "explain", str(path), "--target", "y",
            "--model", "linear", "--out", str(path.with_suffix(".out.csv"))]


# ------------------------------------------------------------------ the files hold the lies


def test_the_thrift_codec_gives_back_pyarrows_own_footer_bytes(tmp_path) -> None:
    path = tmp_path / "honest.parquet"
    pq.write_table(pa.table({"x": [1.0, None, 3.0], "note": ["a", "b", None]}), path,
                   compression="zstd")
    data = path.read_bytes()
    length = int.from_bytes(data[-8:-4], "little")
    footer, end = decode_struct(data, len(data) - 8 - length)
    assert end == len(data) - 8 and encode_struct(footer) == data[-8 - length:-8]
    assert footer[3][1] == pq.ParquetFile(path).metadata.num_rows == 3
    rewrite(path, tmp_path / "again.parquet")
    assert pq.read_table(tmp_path / "again.parquet").equals(pq.read_table(path))


def test_the_hand_written_zstd_frame_is_zeros_to_pyarrow() -> None:
    size = 3 * 2**17 + 5
    assert pa.decompress(zstd_zeros(size), size, codec="zstd", asbytes=True) == bytes(size)


def test_pyarrow_reads_each_lie_from_the_files(lies) -> None:
    few = pq.ParquetFile(lies["few rows claimed over 300 columns"]).metadata
    assert (few.num_rows, few.num_columns, few.row_group(0).num_rows) == (60, 300, 1_000_000)
    fewer = pq.ParquetFile(lies["row groups with fewer rows than values"]).metadata
    assert (fewer.num_rows, fewer.row_group(0).num_rows,
            fewer.row_group(0).column(0).num_values) == (60, 60, 1_000_000)
    for kind in ("a data page that decompresses to 1.5 GB",
                 "a dictionary page that decompresses to 1.5 GB"):
        metadata = pq.ParquetFile(lies[kind]).metadata
        declared = sum(metadata.row_group(0).column(c).total_uncompressed_size
                       for c in range(metadata.num_columns))
        assert declared < 10_000 < PAGE_BOMB_BYTES and lies[kind].stat().st_size < 100_000
    # pyarrow is not asked to parse that footer (that is what took the reader past 6 GiB): within
    # the footer cap, so only counting its column chunks refuses it
    listing = lies["a footer listing 4.75 million column chunks"].read_bytes()
    assert 14_000_000 < int.from_bytes(listing[-8:-4], "little") < 16 * 2**20
    for kind, size in (("48 MB of pandas metadata", 48_000_001),
                       ("15 MB of pandas metadata", 15_000_001)):
        assert len(pq.ParquetFile(lies[kind]).metadata.metadata[b"pandas"]) == size
        assert len(key_values(footer_of(lies[kind]))[b"pandas"]) == size


def test_on_the_old_reader_a_lie_is_decoded_before_it_is_refused(lies, monkeypatch) -> None:
    """Without the checks made before reading, pyarrow believes the footer: the wide file's
    first column chunk alone is a million rows, and only the budget kept while reading stops
    it, after one column chunk of the 300."""
    reads = []
    real = pq.ParquetFile.read_row_group

    def counted(self, *args, **kwargs):
        reads.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(parquet_reader, "_measure", lambda *_args: [])
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counted)
    with pytest.raises(CpdecompError, match="more than 20,000,000 cells") as error:
        load_table(lies["few rows claimed over 300 columns"])
    assert error.value.reason == "too_many_cells" and len(reads) == 1


# ------------------------------------------------------- refused in one line, bounded memory


@pytest.fixture(scope="module")
def cli_baseline(trivial) -> float:
    """The command line explaining a trivial honest file: its imports and one small run."""
    status, stderr, peak = peak_rss_of_command(_cli(trivial))
    assert status == 0, stderr
    return peak


@pytest.mark.slow
@pytest.mark.parametrize("kind", LYING_FILES)
def test_the_command_line_refuses_a_lying_file_in_bounded_memory(lies, cli_baseline,
                                                                  kind) -> None:
    path = lies[kind]
    status, stderr, peak = peak_rss_of_command(_cli(path))
    assert status == 2 and stderr.count("\n") == 1, stderr
    assert LYING_FILES[kind][1] in stderr and "Error)" not in stderr, stderr
    size_mib = path.stat().st_size / 2**20
    assert peak <= 2 * size_mib + ALLOWANCE_MIB, (kind, peak, size_mib)
    assert peak - cli_baseline <= 2 * size_mib + GROWTH_MIB, (kind, peak, cli_baseline)


@pytest.mark.slow
@pytest.mark.parametrize("kind", LYING_FILES)
def test_the_upload_reader_refuses_a_lying_file_in_bounded_memory(lies, trivial, kind) -> None:
    """The Data page's reader (app.sources.single_upload) in a fresh process that has read a
    trivial file first: the peak stays within twice the file plus ALLOWANCE_MIB, and within
    twice the file plus GROWTH_MIB above its peak reading the trivial file."""
    path = lies[kind]
    measured = peak_rss_of_upload(path, warm_up=trivial)
    assert LYING_FILES[kind][1] in str(measured.get("message")), measured
    assert "Error)" not in str(measured["message"])
    size_mib = path.stat().st_size / 2**20
    assert measured["after"] <= 2 * size_mib + ALLOWANCE_MIB, (kind, measured)
    assert measured["after"] - measured["before"] <= 2 * size_mib + GROWTH_MIB, (kind, measured)


# --------------------------------------------------------- honest files are not refused


def _mixed(rows: int = 3_000) -> pa.Table:
    rng = np.random.default_rng(5)
    x = rng.normal(size=rows)
    return pa.table({
        "x": pa.array(np.where(np.arange(rows) % 11 == 0, np.nan, x)),
        "count": pa.array(rng.integers(0, 9, rows)),
        "small": pa.array(rng.integers(0, 9, rows).astype(np.int8)),
        "flag": pa.array(rng.random(rows) < 0.3),
        "ward": pa.array([None if i % 13 == 0 else f"ward {i % 7}" for i in range(rows)]),
        "note": pa.array([f"free text {i}" for i in range(rows)]),
        "day": pa.array([date(2024, 1, 1 + i % 28) for i in range(rows)]),
        "seen": pa.array(np.arange(rows) * 10**9, pa.timestamp("ns")),
        "nothing": pa.nulls(rows),
        "y": pa.array(x * 2 + rng.normal(size=rows)),
    })


HONEST_LAYOUTS = {
    "defaults": {},
    "no compression": {"compression": "none"},
    "snappy": {"compression": "snappy"},
    "gzip": {"compression": "gzip"},
    "zstd": {"compression": "zstd"},
    "brotli": {"compression": "brotli"},
    "lz4": {"compression": "lz4"},
    "data page v2": {"data_page_version": "2.0"},
    "no dictionary": {"use_dictionary": False},
    "small pages": {"data_page_size": 512},
    "many row groups": {"row_group_size": 97},
    "page index": {"write_page_index": True},
    "no statistics": {"write_statistics": False},
    "page checksums": {"write_page_checksum": True},
    "delta encodings": {"use_dictionary": False, "column_encoding": {
        "x": "BYTE_STREAM_SPLIT", "count": "DELTA_BINARY_PACKED",
        "note": "DELTA_LENGTH_BYTE_ARRAY", "ward": "DELTA_BYTE_ARRAY"}},
    "parquet 1.0": {"version": "1.0"},
}


@pytest.mark.parametrize("layout", HONEST_LAYOUTS)
def test_honest_files_of_every_layout_read_as_pyarrow_reads_them(tmp_path, layout) -> None:
    path = tmp_path / "honest.parquet"
    pq.write_table(_mixed(), path, **HONEST_LAYOUTS[layout])
    expected = pq.read_table(path).to_pandas(date_as_object=False)
    table = load_table(path)
    pd.testing.assert_frame_equal(table, expected, check_dtype=False)


def test_a_pandas_file_with_its_index_and_categories_reads(tmp_path) -> None:
    frame = pd.DataFrame({"ward": pd.Categorical(["a", "b", "a"] * 40),
                          "x": np.arange(120.0), "y": np.arange(120.0) % 7},
                         index=pd.Index([f"P{i}" for i in range(120)], name="pid"))
    path = tmp_path / "pandas.parquet"
    frame.to_parquet(path)
    table = load_table(path)
    assert table.columns.tolist() == ["pid", "ward", "x", "y"] and len(table) == 120


def test_an_empty_table_is_refused_as_empty_not_damaged(tmp_path) -> None:
    path = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"x": pa.array([], pa.float64()), "y": pa.array([], pa.float64())}),
                   path)
    with pytest.raises(CpdecompError, match="has no data rows"):
        load_table(path)


def test_the_deployment_guide_states_these_limits() -> None:
    from cpdecomp.core.tables import parquet_pages

    guide = (Path(__file__).resolve().parents[1] / "docs" / "deployment.md").read_text(
        encoding="utf-8")
    table = guide[guide.index("## Limits on uploaded and read files"):]
    table = table[:table.index("\n\n", table.index("| Limit |"))]
    assert f"| Parquet footer | {parquet_pages.MAX_FOOTER_BYTES // 2**20} MiB" in table
    assert f"{parquet_pages.THRIFT_CONTAINER_LIMIT:,} entries" in table
    assert f"at most {parquet_pages.MAX_COLUMN_CHUNKS:,} column chunks" in table
    assert (f"{parquet_pages.PANDAS_METADATA_BASE // 2**10} KiB + "
            f"{parquet_pages.PANDAS_METADATA_PER_COLUMN // 2**10} KiB per column + "
            f"{parquet_pages.PANDAS_METADATA_PER_CHARACTER} bytes per character") in table
    assert (f"twice the file's size + {ALLOWANCE_MIB} MiB, and at most twice its size + "
            f"{GROWTH_MIB} MiB above") in table


def test_row_groups_times_columns_are_counted_before_pyarrow_parses_the_footer(
        tmp_path, monkeypatch) -> None:
    from cpdecomp.core.tables import parquet_pages

    path = tmp_path / "groups.parquet"
    pq.write_table(_mixed(40), path, row_group_size=10)  # 4 row groups x 10 columns
    monkeypatch.setattr(parquet_pages, "MAX_COLUMN_CHUNKS", 39)

    def must_not_open(*_args, **_kwargs):
        raise AssertionError("pyarrow parsed the footer")

    monkeypatch.setattr(pq, "ParquetFile", must_not_open)
    with pytest.raises(CpdecompError, match="more than 39 column chunks") as error:
        load_table(path)
    assert error.value.reason == "too_large"

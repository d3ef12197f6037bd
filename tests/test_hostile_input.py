"""Hostile and broken input files: each is refused by the command line with status 2 and one
line that says what is wrong (never quoting the file's bytes or cells), within bounded time and
memory; awkward but valid files work.

Every file is generated in tmp_path; the bombs are written sparse or streamed, and the tests
that read tens of megabytes check that the refusal comes within a few seconds.
"""

from __future__ import annotations

import os
import pickle
import re
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_helpers import assert_bad_input, run_ok
from corpus.hostile_files import HOSTILE, SECRET_CELLS
from corpus.parquet_bombs import (
    BINARY_TYPES,
    TEXT_TYPES,
    many_decimals,
    peak_rss_of_command,
    prefix_compressed_text,
    repeated_text,
    stored_bytes,
)

from cpdecomp.core import tables as core_tables
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.tables import LIMITS, TableLimits, csv_reader, load_table

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--model", "linear", "--background", "8"]
SECRET = "Q7-SECRET-CELL"
"""A cell value that no message may quote."""


def cohort(n: int = 80, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=(2, n))
    return pd.DataFrame({"pid": [f"P{i:03d}" for i in range(n)], "x1": x1, "x2": x2,
                         "ward": rng.choice(["A", "B"], size=n),
                         "y": 3 * x1 + (1 + np.abs(x2)) * rng.normal(size=n)})


def explain(path: Path, tmp_path: Path, *extra: object) -> list[object]:
    return ["explain", path, "--target", "y", "--id-column", "pid", *FAST, *extra,
            "--out", tmp_path / "o.csv"]


def refused(capsys, tmp_path: Path, path: Path, *extra: object) -> str:
    """The one error line for DATA = path; it never quotes the secret cell."""
    message = assert_bad_input(capsys, *explain(path, tmp_path, *extra))
    assert SECRET not in message
    return message


# ------------------------------------------------------------------------ not a text table


@pytest.mark.parametrize(("name", "content", "expected"), HOSTILE,
                         ids=[name for name, _, _ in HOSTILE])
def test_the_shared_corpus_is_refused_with_its_reason(capsys, tmp_path, name, content,
                                                      expected) -> None:
    """The files the Data page is run over (tests/app/test_hostile_upload.py), through the
    command line: exit 2, one line with the same reason, no cell quoted."""
    path = tmp_path / name
    path.write_bytes(content)
    message = assert_bad_input(capsys, "explain", path, "--target", "outcome", *FAST,
                               "--out", tmp_path / "o.csv")
    assert expected in message, message
    assert not any(cell in message for cell in SECRET_CELLS), message


@pytest.mark.parametrize(("content", "expected"), [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + os.urandom(200), "looks like a PNG image"),
    (b"PK\x03\x04\x14\x00\x06\x00" + os.urandom(200), "looks like a ZIP archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + os.urandom(200), "old Excel .xls"),
    (pickle.dumps({"x": [1, 2]}, protocol=4), "Python pickle"),
    ("a,b\n1,2\n".encode("utf-16"), "UTF-16"),
    (b"a,b\n1,2\n3,\x00\x00\n", "NUL byte at line 3"),
])
def test_binary_files_renamed_csv_are_named_for_what_they_are(capsys, tmp_path, content,
                                                               expected) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(content)
    assert expected in refused(capsys, tmp_path, path)


def test_random_bytes_are_refused_by_position_without_quoting_them(capsys, tmp_path) -> None:
    path = tmp_path / "noise.csv"
    noise = np.random.default_rng(0).integers(128, 256, size=4096, dtype=np.uint8).tobytes()
    path.write_bytes(b"x,y\n1,2\n" + noise)
    message = refused(capsys, tmp_path, path)
    assert "not UTF-8" in message and "line 3" in message and "byte 9 " in message
    assert message.isascii() and "\\x" not in message


def test_latin1_text_names_the_line_and_not_the_bytes(capsys, tmp_path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes("x,ward,y\n1,A,2\n2,Größe,3\n".encode("latin-1"))
    message = refused(capsys, tmp_path, path)
    assert "line 3" in message and "UTF-8" in message
    assert "Gr" not in message and "\\x" not in message


def test_invalid_utf8_far_into_a_file_is_found_in_a_later_chunk(tmp_path, monkeypatch) -> None:
    """The scan reads in chunks; a bad byte after several of them still gets its line."""
    monkeypatch.setattr(csv_reader, "SCAN_CHUNK_BYTES", 64)
    rows = "".join(f"{i},é{i},{i}\n" for i in range(100)).encode()
    path = tmp_path / "late.csv"
    path.write_bytes(b"x,g,y\n" + rows + b"7,\xff,1\n")
    with pytest.raises(CpdecompError, match=r"line 102 \(byte") as error:
        load_table(path)
    assert error.value.reason == "encoding"


def test_utf8_with_a_byte_order_mark_is_read(tmp_path) -> None:
    path = tmp_path / "bom.csv"
    cohort().to_csv(path, index=False, encoding="utf-8-sig")
    assert load_table(path).columns[0] == "pid"


# ------------------------------------------------------------------------------- headers


def test_duplicate_header_names_are_refused_with_their_positions(capsys, tmp_path) -> None:
    path = tmp_path / "dup.csv"
    path.write_text("pid,x1,x2,x1,y\nP1,1,2,3,4\n", encoding="utf-8")
    message = refused(capsys, tmp_path, path)
    assert "columns 2 and 4 have the same name" in message and "x1" not in message


@pytest.mark.parametrize(("first_line", "column"), [
    (f"P001,{SECRET},72.5,1.3", 3),       # a patient's row: a measurement is no name
    (f"P001;{SECRET};72,5;1", 3),          # Excel's ';' CSV with decimal commas
    ("4,7,1,2", 1),                        # every "name" a number
])
def test_a_file_without_a_header_line_is_refused_without_quoting_its_first_row(
        capsys, tmp_path, first_line, column) -> None:
    """Without a header, the first patient's cells would become the column names that later
    messages quote (on the command line and in the dashboard, which reads the same way)."""
    separator = ";" if ";" in first_line else ","
    rows = [first_line] + [separator.join(["P2", "x", "3", "4"])] * 5
    path = tmp_path / "headerless.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    message = refused(capsys, tmp_path, path)
    assert f"line 1 looks like a row of data, not column names (column {column} is a number)" \
        in message
    assert "P001" not in message and "72" not in message


def test_a_missing_column_is_named_by_count_not_by_listing_the_header(capsys,
                                                                      tmp_path) -> None:
    """A header of integers and text passes as names; the refusal still does not list them:
    they may be a patient's cells, or the first line of a system file behind a link."""
    secret_file = tmp_path / "system-file"
    secret_file.write_text(f"{SECRET}:x:0:0:root:/root:/bin/bash\nline two\n",
                           encoding="utf-8")
    link = tmp_path / "data.csv"
    link.symlink_to(secret_file)
    message = refused(capsys, tmp_path, link)
    assert "target column 'y' is not in the data; none of its 1 column has that name" in message
    assert "root" not in message
    path = tmp_path / "ints.csv"
    path.write_text(f"P001,{SECRET},72,1\nP2,x,3,4\n", encoding="utf-8")
    assert "none of its 4 columns has that name" in refused(capsys, tmp_path, path)


@pytest.mark.parametrize("header", ["pid,,x2,y", "pid,  ,x2,y"])
def test_a_blank_header_name_over_values_is_refused(capsys, tmp_path, header) -> None:
    path = tmp_path / "blank.csv"
    path.write_text(f"{header}\nP1,1,2,3\nP2,4,5,6\n", encoding="utf-8")
    assert "column 2 has no name" in refused(capsys, tmp_path, path)


def test_separators_at_the_ends_of_lines_leave_no_empty_column(tmp_path) -> None:
    """Excel's trailing ';' gives an unnamed, empty column: it holds nothing and is dropped."""
    path = tmp_path / "trailing.csv"
    path.write_text("x;y;\n1,5;2;\n3;4;\n", encoding="utf-8")
    table = load_table(path)
    assert table.columns.tolist() == ["x", "y"]
    np.testing.assert_allclose(table["x"], [1.5, 3.0])


def test_rows_longer_than_the_header_are_refused_not_shifted(capsys, tmp_path) -> None:
    """pandas would silently make the first column the index (or drop the last field)."""
    path = tmp_path / "ragged.csv"
    path.write_text("x1,y\nP1,1,2\nP2,3,4\n", encoding="utf-8")
    assert "more fields than the header" in refused(capsys, tmp_path, path)


def test_one_long_row_is_named_by_line(capsys, tmp_path) -> None:
    path = tmp_path / "ragged.csv"
    path.write_text("x1,y\n1,2\n3,4,5\n", encoding="utf-8")
    assert "line 3" in refused(capsys, tmp_path, path)


@pytest.mark.parametrize("extension", [".csv", ".parquet"])
def test_unicode_dotted_and_spaced_names_work_end_to_end(capsys, tmp_path, extension) -> None:
    table = cohort().rename(columns={"x1": "Größe µ/m²", "x2": "a.b c", "ward": "病棟 (ward)"})
    path = tmp_path / f"names{extension}"
    if extension == ".csv":
        table.to_csv(path, index=False)
    else:
        table.to_parquet(path, index=False)
    out = tmp_path / "out.csv"
    run_ok(capsys, "explain", path, "--target", "y", "--id-column", "pid", *FAST, "--out", out)
    assert pd.read_csv(out)["feature"].unique().tolist() == ["Größe µ/m²", "a.b c", "病棟 (ward)"]


@pytest.mark.parametrize("source", ["/dev/zero", "folder"])
def test_endless_devices_and_folders_are_refused_without_reading(capsys, tmp_path,
                                                                source) -> None:
    path = tmp_path if source == "folder" else Path(source)
    if not path.exists():
        pytest.skip(f"{source} does not exist here")
    assert "is not a regular file" in refused(capsys, tmp_path, path)


def test_control_characters_in_names_stay_on_one_line(capsys, tmp_path) -> None:
    """A file or column name with a newline or a terminal escape cannot split or colour the
    error line."""
    message = assert_bad_input(capsys, "explain", tmp_path / "a\nb\x1b[2J.csv", "--target", "y",
                               "--out", tmp_path / "o.csv")
    assert "\x1b" not in message and "\\n" in message


# ------------------------------------------------------------------------------ the caps


def test_the_byte_cap_is_checked_before_reading(capsys, tmp_path, monkeypatch) -> None:
    """A sparse file over the cap costs no disk and no reading: its size alone refuses it."""
    path = tmp_path / "huge.csv"
    with path.open("wb") as handle:
        handle.truncate(LIMITS.max_bytes + 1)

    def must_not_read(*_args, **_kwargs):
        raise AssertionError("the file was read")

    monkeypatch.setattr(core_tables, "READERS", {"csv": must_not_read, "parquet": must_not_read})
    message = refused(capsys, tmp_path, path)
    assert "the limit is 256.0 MiB" in message


def test_five_thousand_columns_are_refused_before_the_rows_are_read(capsys, tmp_path) -> None:
    path = tmp_path / "wide.csv"
    header = ",".join(f"c{i}" for i in range(5000))
    with path.open("w", encoding="utf-8") as handle:
        handle.write(header + ",y\n")
        row = ",".join(["1"] * 5001) + "\n"
        handle.writelines(row for _ in range(20))
    message = refused(capsys, tmp_path, path)
    assert "5,001 columns; the limit is 1,000" in message


def test_five_thousand_parquet_columns_are_refused_from_the_footer(tmp_path) -> None:
    path = tmp_path / "wide.parquet"
    pq.write_table(pa.table({f"c{i}": [1.0, 2.0] for i in range(5000)}), path)
    with pytest.raises(CpdecompError, match="5,000 columns; the limit is 1,000"):
        load_table(path)


def test_very_many_tiny_rows_stop_at_the_row_cap(capsys, tmp_path) -> None:
    path = tmp_path / "rows.csv"
    with path.open("wb") as handle:
        handle.write(b"x,y\n")
        block = b"1,2\n" * 100_000
        for _ in range(LIMITS.max_rows // 100_000 + 2):
            handle.write(block)
    message = refused(capsys, tmp_path, path)
    assert "more than 1,000,000 rows" in message


def test_the_cell_cap_bounds_wide_and_long_tables(tmp_path) -> None:
    limits = TableLimits(max_cells=1000)
    path = tmp_path / "cells.csv"
    pd.DataFrame(np.ones((101, 10)), columns=[f"c{i}" for i in range(10)]).to_csv(
        path, index=False)
    with pytest.raises(CpdecompError, match="with 10 columns, at most 100 rows") as error:
        load_table(path, limits=limits)
    assert error.value.reason == "too_many_cells"


def test_a_compressed_parquet_with_too_many_rows_is_refused_from_the_footer(tmp_path) -> None:
    """A few kilobytes of zeros that would be millions of rows: the footer says so first."""
    path = tmp_path / "zeros.parquet"
    pq.write_table(pa.table({"x": np.zeros(1_500_000), "y": np.zeros(1_500_000)}), path)
    assert path.stat().st_size < 100_000
    with pytest.raises(CpdecompError, match="more than 1,000,000 rows"):
        load_table(path)


def test_a_parquet_decompression_bomb_is_refused_from_the_footer(tmp_path) -> None:
    path = tmp_path / "bomb.parquet"
    pq.write_table(pa.table({"note": ["x" * 3_000_000], "y": [1.0]}), path, compression="zstd")
    with pytest.raises(CpdecompError, match="once decompressed") as error:
        load_table(path, limits=TableLimits(max_decoded_bytes=2_000_000))
    assert error.value.reason == "too_large"



def test_a_dictionary_encoded_parquet_bomb_is_measured_before_it_is_decoded(tmp_path) -> None:
    """One 10 kB value on 20,000 rows: stored once (the footer counts ~10 kB), 200 MB decoded.
    Its size is measured from the dictionary and the row indices, without decoding."""
    path = tmp_path / "repeated.parquet"
    rows = 20_000
    column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)),
                                            pa.array(["z" * 10_000]))
    pq.write_table(pa.table({"note": column, "y": np.ones(rows)}), path)
    footer = pq.ParquetFile(path).metadata
    assert sum(footer.row_group(i).total_byte_size for i in range(footer.num_row_groups)) < 2**20
    with pytest.raises(CpdecompError, match="once decompressed") as error:
        load_table(path, limits=TableLimits(max_decoded_bytes=50 * 2**20))
    assert error.value.reason == "too_large"
    # Within the limits the same file reads as plain text, as a CSV's would.
    table = load_table(path, limits=TableLimits(max_decoded_bytes=2**30))
    assert table["note"].iloc[-1] == "z" * 10_000 and not isinstance(
        table["note"].dtype, pd.CategoricalDtype)


def test_a_long_value_in_a_parquet_text_column_is_refused(tmp_path) -> None:
    path = tmp_path / "long.parquet"
    pq.write_table(pa.table({"note": ["short", "x" * 200_000], "y": [1.0, 2.0]}), path)
    with pytest.raises(CpdecompError, match="longer than 131,072") as error:
        load_table(path)
    assert error.value.reason == "field_too_long"


# ------------------------------------------------------------------------------- the bombs


def test_a_fifty_megabyte_cell_is_refused_in_a_bounded_scan(capsys, tmp_path) -> None:
    path = tmp_path / "bomb.csv"
    with path.open("wb") as handle:
        handle.write(b"pid,x1,y\nP1,")
        chunk = b"9" * 2**20
        for _ in range(50):
            handle.write(chunk)
        handle.write(b",1\n")
    message = refused(capsys, tmp_path, path)
    assert "field longer than 131,072 bytes at line 2" in message


def test_a_quoted_bomb_with_separators_inside_is_refused_after_parsing(tmp_path) -> None:
    """Quotes hide separators from the byte scan, so the parsed text is measured too."""
    path = tmp_path / "quoted.csv"
    path.write_bytes(b'x,note,y\n1,"' + b"ab," * 100_000 + b'",2\n')
    with pytest.raises(CpdecompError, match="column 'note' has a value longer than") as error:
        load_table(path)
    assert error.value.reason == "field_too_long"
    assert "ab," not in str(error.value)


def test_a_long_field_across_scan_chunks_is_caught(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(csv_reader, "SCAN_CHUNK_BYTES", 1000)
    path = tmp_path / "split.csv"
    path.write_bytes(b"x,y\n" + b"1,2\n" * 500 + b"3," + b"7" * 5000 + b"\n")
    with pytest.raises(CpdecompError, match="at line 502"):
        load_table(path, limits=TableLimits(max_field_bytes=4000))


# -------------------------------------------------------------------- Parquet decode bombs

ALLOWANCE_MIB = 64
"""Peak memory a refusal may cost beyond twice what the footer declares (imports excluded)."""

DECODE_BOMBS = {
    **{f"repeated {name}": (lambda path, kind=kind: repeated_text(path, kind))
       for name, kind in TEXT_TYPES.items()},
    "prefix-compressed string": prefix_compressed_text,
}
"""Files of a few kilobytes that decode to 3 GB: one 100 kB value on 30,000 rows, stored once
and declared as each Arrow text type, or prefix-compressed so even the footer sizes are small."""


def _cli(path: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "cpdecomp", "explain", str(path), "--target", "y",
            "--model", "linear", "--out", str(out)]


@pytest.fixture(scope="module")
def cli_peak_without_reading(tmp_path_factory) -> float:
    """The command line's peak memory refusing a file from its schema (nothing decoded)."""
    folder = tmp_path_factory.mktemp("baseline")
    path = folder / "binary.parquet"
    repeated_text(path, pa.binary(), binary=True)
    status, stderr, peak = peak_rss_of_command(_cli(path, folder / "o.csv"))
    assert status == 2 and "holds binary" in stderr, stderr
    return peak


@pytest.mark.parametrize("kind", DECODE_BOMBS)
def test_a_parquet_decode_bomb_is_refused_before_it_is_decoded(tmp_path, kind,
                                                               cli_peak_without_reading) -> None:
    """The command line refuses each bomb in one line, its peak memory (a child's ru_maxrss)
    within twice the footer's declared size plus ALLOWANCE_MIB of refusing from the schema.
    Before this was measured, a kilobyte drove the reader to 2.4 GB (3.7 GB as string_view)."""
    path = tmp_path / "bomb.parquet"
    DECODE_BOMBS[kind](path)
    assert path.stat().st_size < 30_000
    status, stderr, peak = peak_rss_of_command(_cli(path, tmp_path / "o.csv"))
    assert status == 2, stderr
    assert stderr.count("\n") == 1 and "once decompressed; that is the limit" in stderr, stderr
    declared_mib = stored_bytes(path) / 2**20
    assert peak - cli_peak_without_reading <= 2 * declared_mib + ALLOWANCE_MIB, (
        f"{kind}: peak {peak:.0f} MiB, {peak - cli_peak_without_reading:.0f} MiB above "
        f"refusing from the schema; the footer declares {declared_mib:.1f} MiB")


def test_twenty_million_decimal_cells_are_read_as_floats_in_bounded_memory(tmp_path) -> None:
    """Zeros stored as decimals (400 kB) are 20 million cells, the most a file may have:
    as Python Decimal objects they took 2.9 GB; as floats they take 160 MB, and reading peaks
    within twice that plus the allowance."""
    path = tmp_path / "decimals.parquet"
    many_decimals(path)
    tiny = tmp_path / "tiny.parquet"
    many_decimals(tiny, rows=10, columns=3)
    read = ("from cpdecomp.core.tables import load_table; t = load_table({!r}); "
            "assert t.shape == ({}, {}) and (t.dtypes == 'float64').all(), t.dtypes")
    status, stderr, baseline = peak_rss_of_command(
        [sys.executable, "-c", read.format(str(tiny), 10, 4)])
    assert status == 0, stderr
    status, stderr, peak = peak_rss_of_command(
        [sys.executable, "-c", read.format(str(path), 20_000, 1_000)])
    assert status == 0, stderr
    floats_mib = 20_000 * 1_000 * 8 / 2**20
    assert peak - baseline <= 2 * floats_mib + ALLOWANCE_MIB, (peak, baseline)


# --------------------------------------------------------------------------- cell contents


def test_formula_looking_cells_are_text_never_run(capsys, tmp_path) -> None:
    """=, +, -, @ at the start of a cell are category labels like any other."""
    table = cohort()
    payloads = ["=cmd|' /C calc'!A0", "+1+1", "-2-3", "@SUM(A1:A9)"]
    table["ward"] = [payloads[i % 4] for i in range(len(table))]
    path = tmp_path / "formulas.csv"
    table.to_csv(path, index=False)
    loaded = load_table(path)
    assert sorted(loaded["ward"].unique()) == sorted(payloads)
    out = tmp_path / "out.json"
    run_ok(capsys, "explain", path, "--target", "y", "--id-column", "pid", *FAST, "--out", out)


def test_a_non_numeric_target_names_rows_not_values(capsys, tmp_path) -> None:
    table = cohort()
    table["y"] = table["y"].astype(object)
    table.loc[[5, 9], "y"] = SECRET
    path = tmp_path / "text_target.csv"
    table.to_csv(path, index=False)
    message = refused(capsys, tmp_path, path)
    assert "target 'y' must be numeric" in message
    assert "data row 6 and 1 other row" in message


def test_stray_text_in_a_numeric_feature_names_rows_not_values(capsys, tmp_path) -> None:
    table = cohort()
    table["x2"] = table["x2"].astype(object)
    table.loc[70, "x2"] = SECRET
    path = tmp_path / "stray.csv"
    table.to_csv(path, index=False)
    message = refused(capsys, tmp_path, path)
    assert "feature 'x2' is numeric, but it has text in data row 71" in message


@pytest.mark.parametrize("scale", [1e308, 1e60])
def test_a_target_too_large_to_compute_with_is_refused_in_one_line(capsys, tmp_path,
                                                                    scale) -> None:
    """Near 1e308 the command line printed 19 lines of numpy warnings, then crashed (exit 1);
    near 1e60 gradient boosting's 32-bit sums overflowed. Now: status 2, one line, no value."""
    table = cohort()
    table["y"] = np.tanh(table["x1"]) * 0.9 * scale
    path = tmp_path / "huge_target.csv"
    table.to_csv(path, index=False)
    message = refused(capsys, tmp_path, path, "--model", "gbm")
    assert "target 'y' has values beyond ±1e+30, too large to compute with" in message


def test_a_target_in_large_units_still_works(capsys, tmp_path) -> None:
    table = cohort().assign(y=lambda t: t["y"] * 1e28)
    path = tmp_path / "large_units.csv"
    table.to_csv(path, index=False)
    run_ok(capsys, *explain(path, tmp_path))


def test_a_target_with_one_value_is_refused(capsys, tmp_path) -> None:
    table = cohort().assign(y=4.0)
    path = tmp_path / "flat.csv"
    table.to_csv(path, index=False)
    assert "one value" in refused(capsys, tmp_path, path)


def test_an_all_missing_target_is_refused(capsys, tmp_path) -> None:
    table = cohort().assign(y=np.nan)
    path = tmp_path / "no_target.csv"
    table.to_csv(path, index=False)
    assert "target 'y' has no values" in refused(capsys, tmp_path, path)


def test_an_all_missing_column_is_refused_by_name(capsys, tmp_path) -> None:
    table = cohort().assign(lab=np.nan)
    path = tmp_path / "empty_column.csv"
    table.to_csv(path, index=False)
    assert "'lab' is entirely missing" in refused(capsys, tmp_path, path)


def test_a_missing_target_column_suggests_one(capsys, tmp_path) -> None:
    path = tmp_path / "t.csv"
    cohort().rename(columns={"y": "outcome"}).to_csv(path, index=False)
    assert "target column 'y' is not in the data" in refused(capsys, tmp_path, path)


def test_too_few_calibration_rows_for_alpha(capsys, tmp_path) -> None:
    path = tmp_path / "t.csv"
    cohort(40).to_csv(path, index=False)
    message = refused(capsys, tmp_path, path, "--alpha", "0.01")
    assert "calibration" in message and "99" in message


# ------------------------------------------------------------------------------- Parquet


@pytest.mark.parametrize(("arrays", "names", "expected"), [
    ([[1, 2], [3, 4]], ["a", "a"], "columns 1 and 2 have the same name"),
    ([[1, 2], [3, 4]], ["a", ""], "column 2 has no name"),
    ([[[1], [2]], [3, 4]], ["a", "y"], "column 'a' holds list"),
    ([[{"u": 1}, {"u": 2}], [3, 4]], ["a", "y"], "column 'a' holds struct"),
    ([[b"\x00", b"\x01"], [3, 4]], ["a", "y"], "column 'a' holds binary"),
])
def test_bad_parquet_columns_are_refused_from_the_schema(tmp_path, arrays, names,
                                                         expected) -> None:
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array(a) for a in arrays], names=names), path)
    with pytest.raises(CpdecompError, match=re.escape(expected)):
        load_table(path)


@pytest.mark.parametrize("kind", [*BINARY_TYPES.values(), pa.time64("us"), pa.duration("s"),
                                  pa.map_(pa.string(), pa.int32()),
                                  pa.dictionary(pa.int32(), pa.binary())])
def test_every_binary_and_other_non_table_type_is_refused_before_any_data_is_read(
        tmp_path, monkeypatch, kind) -> None:
    """docs/deployment.md says binary columns are refused: all four binary types, and any type
    that is not a number, text or a date, are refused from the schema alone."""
    values = {pa.types.is_fixed_size_binary: [b"abcd", b"efgh"],
              pa.types.is_map: [[("k", 1)], [("k", 2)]]}
    sample = next((v for test, v in values.items() if test(kind)), None)
    if sample is not None:
        column = pa.array(sample, type=kind)
    elif pa.types.is_dictionary(kind):
        column = pa.array([b"x", b"y"]).dictionary_encode()
    elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or \
            pa.types.is_binary_view(kind):
        column = pa.array([b"x", b"y"], type=kind)
    else:
        column = pa.array([1, 2]).cast(kind)
    path = tmp_path / "typed.parquet"
    pq.write_table(pa.table({"a": column, "y": [1.0, 2.0]}), path)
    assert pq.ParquetFile(path).schema_arrow.field("a").type == kind

    def must_not_read(*_args, **_kwargs):
        raise AssertionError("column data was read")

    monkeypatch.setattr(pq.ParquetFile, "read", must_not_read)
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", must_not_read)
    with pytest.raises(CpdecompError, match=r"column 'a' holds .* not numbers, text or dates") \
            as error:
        load_table(path)
    assert error.value.reason == "column_type"


def test_decimal_columns_are_read_as_numbers_end_to_end(capsys, tmp_path) -> None:
    """pandas would make each decimal a Python object (and core.data then failed with
    'AttributeError'); they are read as floats."""
    table = cohort()
    exact = [Decimal(f"{v:.4f}") for v in table["x1"]]
    arrow = pa.Table.from_pandas(table, preserve_index=False).set_column(
        1, "x1", pa.array(exact, type=pa.decimal128(12, 4)))
    path = tmp_path / "decimals.parquet"
    pq.write_table(arrow, path)
    loaded = load_table(path)
    assert loaded["x1"].dtype == np.float64
    np.testing.assert_allclose(loaded["x1"], [float(v) for v in exact], rtol=0, atol=1e-12)
    out = tmp_path / "out.csv"
    run_ok(capsys, "explain", path, "--target", "y", "--id-column", "pid", *FAST, "--out", out)
    assert "x1" in pd.read_csv(out)["feature"].unique()


@pytest.mark.parametrize("kind", [pa.date32(), pa.date64(), pa.timestamp("us"),
                                  pa.timestamp("ns", tz="UTC")])
def test_date_columns_are_read_as_dates_and_refused_as_features_with_the_fix(
        capsys, tmp_path, kind) -> None:
    table = cohort()
    days = pa.array(np.arange(len(table)) + 19_000, type=pa.int32()).cast(pa.date32())
    arrow = pa.Table.from_pandas(table, preserve_index=False).append_column(
        "admitted", days.cast(kind))
    path = tmp_path / "dates.parquet"
    pq.write_table(arrow, path)
    loaded = load_table(path)
    assert pd.api.types.is_datetime64_any_dtype(loaded["admitted"])
    assert loaded["admitted"].iloc[0].date().isoformat() == "2022-01-08"
    message = refused(capsys, tmp_path, path)
    assert "feature 'admitted' holds dates; convert it to a number" in message
    # Left out of the features, the file works.
    run_ok(capsys, *explain(path, tmp_path, "--features", "x1,x2,ward"))


def test_a_text_file_named_parquet_is_refused(capsys, tmp_path) -> None:
    path = tmp_path / "text.parquet"
    path.write_text("x,y\n1,2\n", encoding="utf-8")
    message = refused(capsys, tmp_path, path)
    assert "not a readable Parquet file" in message and str(tmp_path) not in message


def test_a_pickled_arrow_extension_type_is_never_unpickled(tmp_path) -> None:
    """pyarrow < 14.0.1 unpickled 'arrow.py_extension_type' metadata (CVE-2023-47248); the
    payload here would create a file if anything unpickled it."""
    witness = tmp_path / "unpickled"

    class Payload:
        def __reduce__(self):
            return (open, (str(witness), "w"))

    field = pa.field("x", pa.int64(), metadata={
        b"ARROW:extension:name": b"arrow.py_extension_type",
        b"ARROW:extension:metadata": pickle.dumps(Payload()),
    })
    path = tmp_path / "extension.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array([1, 2])], schema=pa.schema([field])), path)
    load_table(path)
    assert not witness.exists()


def test_a_parquet_saved_with_its_index_keeps_rows_numbered_from_zero(tmp_path) -> None:
    path = tmp_path / "indexed.parquet"
    cohort().set_index("pid").iloc[5:].to_parquet(path)
    table = load_table(path)
    assert table.columns[0] == "pid" and table.index.equals(pd.RangeIndex(len(table)))


# ------------------------------------------------------------------------- nothing unpickled


UNPICKLING = re.compile(r"read_pickle|pickle\.loads?\(|joblib\.load\(|allow_pickle\s*=\s*True|"
                        r"dill\.loads?\(|cloudpickle\.loads?\(|shelve\.open|marshal\.loads?\(")


def test_no_code_path_unpickles_a_file() -> None:
    """User files reach core.data, the CLI and the dashboard; none of the shipped code calls
    an unpickling reader (the calibration-game cache writes plain arrays, see its tests)."""
    offenders = []
    for folder in ("core", "app", "sample_data"):
        for source in (ROOT / folder).rglob("*.py"):
            for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
                if UNPICKLING.search(line):
                    offenders.append(f"{source.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_parquet_is_read_by_pyarrow_not_an_engine_that_can_unpickle(tmp_path,
                                                                     monkeypatch) -> None:
    """fastparquet can decode pickled object columns; pandas would pick it if pyarrow were
    missing. core.data calls pyarrow itself."""
    def no_pandas_reader(*args, **kwargs):
        raise AssertionError("pd.read_parquet chooses its engine at run time")

    monkeypatch.setattr(pd, "read_parquet", no_pandas_reader)
    path = tmp_path / "t.parquet"
    cohort().to_parquet(path, index=False)
    assert len(load_table(path)) == 80

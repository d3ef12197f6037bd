"""Streamed input: a patients table read a chunk at a time gives what the whole table gives.

`iter_table` against `load_table` (the reader the rest of the suite checks), and a
`StreamedStudy` against `prepare_study` on the same rows: the same reports, ids and warnings,
and the same refusals (caps counted over the whole file, bad cells named by their file row).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cpdecomp import load_table
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.output import write_report, write_reports
from cpdecomp.core.tables import TableLimits, iter_table
from cpdecomp.core.workflow import StudyOptions, prepare_streamed_study, prepare_study

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted((ROOT / "sample_data").glob("*.csv"))


def mixed_table(rows: int = 700, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "pid": [f"{i:05d}" for i in range(rows)],  # leading zeros: read verbatim
        "a": rng.normal(size=rows),
        "b": rng.integers(0, 5, rows),
        "arm": rng.choice(["x", "y", None], rows),
    })


def joined(path: Path, rows: int, **kwargs) -> pd.DataFrame:
    parts = list(iter_table(path, rows=rows, **kwargs))
    assert len(parts) == -(-len(load_table(path, **kwargs)) // rows)
    return pd.concat(parts)


@pytest.mark.parametrize("form", ["csv", "semicolon csv", "parquet", "parquet with index"])
def test_chunks_join_to_the_whole_table(tmp_path, form):
    table = mixed_table()
    path = tmp_path / ("t.parquet" if "parquet" in form else "t.csv")
    if form == "csv":
        table.to_csv(path, index=False)
    elif form == "semicolon csv":  # Excel's locales: ';' and decimal commas
        table.to_csv(path, index=False, sep=";", decimal=",")
    elif form == "parquet":
        table.to_parquet(path, index=False)
    else:
        table.set_index(pd.RangeIndex(5, 5 + len(table))).to_parquet(path)
    whole = load_table(path, text_columns=["pid"])
    streamed = joined(path, 128, text_columns=["pid"])
    pd.testing.assert_frame_equal(streamed, whole, check_index_type=False, check_names=False)
    assert streamed.index.tolist() == list(range(len(whole)))  # rows numbered as in the file
    assert streamed["pid"].iloc[0] == "00000"


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_bundled_samples_stream_as_they_load(path):
    whole = load_table(path)
    pd.testing.assert_frame_equal(joined(path, 100), whole, check_names=False)


def test_the_row_cap_counts_over_every_chunk(tmp_path):
    path = tmp_path / "t.csv"
    mixed_table(700).to_csv(path, index=False)
    limits = TableLimits(max_rows=600)
    with pytest.raises(CpdecompError) as whole:
        load_table(path, limits=limits)
    with pytest.raises(CpdecompError) as streamed:
        list(iter_table(path, limits=limits, rows=128))
    assert streamed.value.reason == whole.value.reason


def test_a_bad_file_is_refused_before_the_first_chunk(tmp_path):
    path = tmp_path / "t.parquet"
    path.write_bytes(b"PAR1 not really")
    chunks = iter_table(path)
    with pytest.raises(CpdecompError, match="not a readable Parquet file"):
        next(chunks)


def system_files(tmp_path: Path, patients: int = 900) -> dict[str, Path]:
    rng = np.random.default_rng(3)
    n = 1500 + patients
    x = rng.normal(size=(n, 4))
    table = pd.DataFrame(x, columns=["a", "b", "c", "d"])
    table["y"] = x[:, 0] + (0.3 + np.abs(x[:, 1])) * rng.normal(size=n)
    table["pid"] = [f"p{i}" for i in range(n)]
    paths = {name: tmp_path / f"{name}.csv" for name in ("train", "calibration", "patients")}
    table.iloc[:1000].to_csv(paths["train"], index=False)
    table.iloc[1000:1500].to_csv(paths["calibration"], index=False)
    table.iloc[1500:].to_parquet(tmp_path / "patients.parquet", index=False)
    paths["patients"] = tmp_path / "patients.parquet"
    return paths


@pytest.mark.parametrize("family", ["normalized", "cqr"])
@pytest.mark.parametrize("id_column", ["pid", None])
def test_a_streamed_study_gives_the_whole_tables_reports(tmp_path, family, id_column):
    paths = system_files(tmp_path)
    options = StudyOptions(target="y", id_column=id_column, family=family, model="gbm",
                           background=32, features=("a", "b", "c", "d"))
    train, calibration = load_table(paths["train"]), load_table(paths["calibration"])
    ids = [id_column] if id_column else []
    whole = prepare_study(load_table(paths["patients"], text_columns=ids), options,
                          train=train, calibration=calibration)
    streamed = prepare_streamed_study(
        lambda: iter_table(paths["patients"], text_columns=ids, rows=200), options,
        train, calibration)
    assert streamed.n_patients == len(whole.patients) == 900
    assert streamed.warnings == whole.warnings
    seen: list[tuple[int, int]] = []
    at_once, in_chunks = tmp_path / "at_once.json", tmp_path / "in_chunks.json"
    write_report(whole.explain(method="exact"), at_once)
    write_reports(streamed.iter_explain(method="exact",
                                        progress=lambda done, total: seen.append((done, total))),
                  in_chunks)
    assert in_chunks.read_bytes() == at_once.read_bytes()
    assert seen[-1] == (900, 900) and all(t == 900 for _, t in seen)


def test_warnings_see_every_chunk(tmp_path):
    paths = system_files(tmp_path)
    table = pd.read_parquet(paths["patients"])
    table.loc[850, "pid"] = table.loc[10, "pid"]  # a repeat four chunks apart
    table.to_parquet(paths["patients"], index=False)
    options = StudyOptions(target="y", id_column="pid", model="linear")
    streamed = prepare_streamed_study(
        lambda: iter_table(paths["patients"], text_columns=["pid"], rows=200), options,
        load_table(paths["train"]), load_table(paths["calibration"]))
    assert "the id column 'pid' has repeated values" in streamed.warnings


def test_a_bad_cell_in_a_later_chunk_names_its_row_in_the_file(tmp_path):
    paths = system_files(tmp_path)
    table = pd.read_parquet(paths["patients"])
    table["c"] = table["c"].map(repr)  # numbers as text, as some exports write them
    table.loc[777, "c"] = "high"
    table.to_parquet(paths["patients"], index=False)
    options = StudyOptions(target="y", id_column="pid", model="linear")
    with pytest.raises(CpdecompError, match="data row 778"):
        prepare_streamed_study(
            lambda: iter_table(paths["patients"], text_columns=["pid"], rows=200), options,
            load_table(paths["train"]), load_table(paths["calibration"]))


def test_the_command_line_streams_the_patients_file(tmp_path):
    """With --train and --calibration the CLI reads DATA in chunks; its output is the file
    the whole-table API writes."""
    paths = system_files(tmp_path)
    out = tmp_path / "cli.csv"
    done = subprocess.run(
        [sys.executable, "-m", "cpdecomp", "explain", str(paths["patients"]), "--target", "y",
         "--id-column", "pid", "--train", str(paths["train"]), "--calibration",
         str(paths["calibration"]), "--model", "linear", "--out", str(out), "-v"],
        capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert "the patients are read in chunks" in done.stderr
    options = StudyOptions(target="y", id_column="pid", model="linear")
    whole = prepare_study(load_table(paths["patients"], text_columns=["pid"]), options,
                          train=load_table(paths["train"], text_columns=["pid"]),
                          calibration=load_table(paths["calibration"], text_columns=["pid"]))
    write_report(whole.explain(), tmp_path / "api.csv")
    assert out.read_bytes() == (tmp_path / "api.csv").read_bytes()

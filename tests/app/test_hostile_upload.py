"""Hostile uploads on the Data page: each is refused in an error box with the reason, and the
data and results already there stay usable; awkward but valid tables work end to end."""

from __future__ import annotations

import io
import os
import pickle

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from dashboard_helpers import csv_bytes, errors, new_app, run_linear, small_table
from streamlit import config
from streamlit.testing.v1 import AppTest

from app import sources
from app.text import markdown_text


def parquet_bytes(table: pa.Table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def wide_csv(columns: int) -> bytes:
    header = ",".join(f"c{i}" for i in range(columns))
    return (header + "\n" + ",".join(["1"] * columns) + "\n").encode()


HOSTILE = [
    ("picture.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + os.urandom(300), "PNG image"),
    ("workbook.csv", b"PK\x03\x04\x14\x00\x06\x00" + os.urandom(300), "ZIP archive"),
    ("noise.csv", b"a,b\n" + bytes(range(128, 256)) * 8, "not UTF-8 text: line 2"),
    ("latin1.csv", "x1,y\n1,Größe\n".encode("latin-1"), "not UTF-8 text: line 2"),
    ("pickle.csv", pickle.dumps({"a": 1}, protocol=4), "Python pickle"),
    ("dup.csv", b"x1,x2,x1,outcome\n1,2,3,4\n", "columns 1 and 3 are both named 'x1'"),
    ("blank.csv", b"x1,,outcome\n1,2,3\n", "column 2 has no name"),
    ("ragged.csv", b"x1,outcome\n1,2,3\n", "more fields than the header"),
    ("wide.csv", wide_csv(5000), "5,000 columns; the limit is 1,000"),
    ("bomb.csv", b"x1,outcome\n1," + b"7" * (3 * 2**20) + b"\n", "field longer than 131,072"),
    ("junk.parquet", b"not parquet at all" * 10, "not a readable Parquet file"),
    ("nested.parquet", parquet_bytes(pa.table({"a": [[1], [2]], "outcome": [1.0, 2.0]})),
     "column 'a' holds list"),
    ("wide.parquet", parquet_bytes(pa.table({f"c{i}": [1.0] for i in range(1200)})),
     "1,200 columns; the limit is 1,000"),
]


def upload(at: AppTest, name: str, content: bytes) -> AppTest:
    at.switch_page("views/data.py").run()
    at.radio(key="data_source").set_value("upload").run()
    at.file_uploader(key="upload").set_value((name, content, "text/csv"))
    return at.run()


def test_every_hostile_upload_is_refused_and_the_run_stays() -> None:
    at = run_linear(new_app())
    before = at.session_state["last_run"]
    for name, content, expected in HOSTILE:
        upload(at, name, content)
        messages = [m.replace("\\", "") for m in errors(at)]  # Markdown escapes
        assert any(expected in m and name in m for m in messages), (name, messages)
        assert at.session_state["dataset"].name == "sample: diabetes", name
        assert at.session_state["last_run"] is before, name
    # Still usable: the results page draws, and the sample's columns are still offered.
    at.switch_page("views/cohort.py").run()
    assert errors(at) == []
    at.switch_page("views/data.py").run()
    at.radio(key="data_source").set_value("sample").run()
    assert at.selectbox(key="target_column").value == "progression"


def test_the_upload_cap_is_checked_again_on_the_server() -> None:
    """A client that skips the browser's size check still meets server.maxUploadSize."""
    at = new_app()
    previous = config.get_option("server.maxUploadSize")
    config.set_option("server.maxUploadSize", 1)
    try:
        big = csv_bytes(small_table(200)) + b"0,0,0,0,A,0\n" * 120_000
        assert len(big) > 2**20
        upload(at, "big.csv", big)
    finally:
        config.set_option("server.maxUploadSize", previous)
    messages = [m.replace("\\", "") for m in errors(at)]
    assert any("the upload limit is 1.0 MiB" in m for m in messages), messages
    assert at.session_state["dataset"].name == "sample: diabetes"


def test_the_server_cap_follows_streamlits_option() -> None:
    assert sources.upload_limits(100).max_bytes == 100 * 2**20


UNUSABLE = [
    (lambda t: t.assign(outcome=t["outcome"].astype(object).where(t.index != 7, "high")),
     "target 'outcome' must be numeric, but it has text in data row 8"),
    (lambda t: t.assign(outcome=2.5), "target 'outcome' has one value on every row"),
    (lambda t: t.assign(lab=np.nan), "feature 'lab' is entirely missing"),
]


def test_readable_tables_with_unusable_columns_say_why_and_keep_the_results() -> None:
    at = run_linear(new_app())
    before = at.session_state["last_run"]
    for change, expected in UNUSABLE:
        upload(at, "cohort.csv", csv_bytes(change(small_table())))
        at.selectbox(key="target_column").set_value("outcome").run()
        messages = [m.replace("\\", "") for m in errors(at)]
        assert any(expected in m for m in messages), messages
        assert not any("high" in m for m in messages)
        assert at.session_state["last_run"] is before


def test_an_all_missing_column_is_not_guessed_as_the_target() -> None:
    table = small_table().assign(lab=np.nan)
    assert sources.guess_target(table) == "outcome"


def test_unicode_dotted_spaced_names_and_formula_cells_work_end_to_end() -> None:
    table = small_table().rename(columns={"x1": "Größe µ/m²", "x2": "a.b c", "x3": "病棟 [x]"})
    table["ward"] = ["=cmd|' /C calc'!A0", "+1", "-1", "@SUM(A1)"] * 30
    at = upload(new_app(), "名前 with spaces.csv", csv_bytes(table))
    assert errors(at) == []
    assert at.session_state["dataset"].name == "名前 with spaces.csv"
    run_linear(at)
    assert errors(at) == []
    assert at.session_state["last_run"].dataset_name == "名前 with spaces.csv"
    at.switch_page("views/patient.py").run()
    assert errors(at) == []


def test_markdown_in_an_uploaded_name_is_shown_as_text() -> None:
    """A file named like a link must not become one in the error box."""
    at = upload(new_app(), "[click](http:evil.example)*x*.csv", b"\x89PNG\r\n\x1a\n\x00")
    boxes = [e.value for e in at.error]  # the Markdown sent to the browser
    assert any(markdown_text("[click](http:evil.example)*x*.csv") in m for m in boxes), boxes
    assert any("[click](http:evil.example)*x*.csv" in m for m in errors(at))


def test_preview_of_mixed_columns_is_text() -> None:
    frame = pd.DataFrame({"mixed": [1, "a", None, 2.5]})
    shown = sources.preview(frame)["mixed"]
    assert shown[[0, 1, 3]].tolist() == ["1", "a", "2.5"] and pd.isna(shown[2])

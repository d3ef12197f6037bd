"""Exports that are safe to open, and a review store that keeps every note."""

from __future__ import annotations

import io
import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from app import export, reviews
from app.charts import side_by_side_bars
from app.reviews import ReviewStore
from core.errors import CpdecompError

DANGEROUS = ["=1+1", "+1", "-1+2", "@SUM(A1)", "\tx", "\rx", "−1", " =cmd|' /C calc'!A0"]


@pytest.mark.parametrize("text", DANGEROUS)
def test_text_that_a_spreadsheet_would_run_is_neutralised(text: str) -> None:
    assert export.neutralise(text) == "'" + text


@pytest.mark.parametrize("value", ["P0001", "checked labs", "", 3.5, -2.0, 7, None])
def test_other_values_are_left_alone(value: object) -> None:
    assert export.neutralise(value) == value


def test_csv_cells_and_headers_are_safe_and_numbers_stay_numbers() -> None:
    frame = pd.DataFrame({
        "=evil header": ["=HYPERLINK(\"http://x\")", "ok", "@me"],
        "patient_id": ["-P1", "P2", "+P3"],
        "width": [1.5, -2.25, 3.0],
        "reviewed": [True, False, True],
    })
    content = export.safe_csv(frame)
    assert content.startswith(b"\xef\xbb\xbf")  # BOM: spreadsheets then read UTF-8
    back = pd.read_csv(io.BytesIO(content), encoding="utf-8-sig", dtype=str,
                       keep_default_na=False)
    for cell in [*back.columns, *back["'=evil header"], *back["patient_id"]]:
        assert not cell.startswith(export.FORMULA_STARTS), cell
    np.testing.assert_allclose(back["width"].astype(float), [1.5, -2.25, 3.0])
    assert list(back["patient_id"]) == ["'-P1", "P2", "'+P3"]


def test_case_summary_is_self_contained_and_escapes_text() -> None:
    figure = side_by_side_bars(["a", "<b>"], np.array([1.0, -1.0]), np.array([-0.5, 2.0]),
                               np.array([0.5, 1.0]), units="width")
    page = export.case_summary_html(
        title="case <script>alert(1)</script>", facts={"patient": "<img src=x>"},
        figures=[figure, figure],
        table=pd.DataFrame({"feature": ["<script>bad()</script>"], "value": [1.0]}),
        reviews=[{"created_at": "2025-01-01T00:00:00+00:00", "status": "reviewed",
                  "note": "<i>fine</i>", "reviewer": "A"}],
    )
    assert re.search(r"<script[^>]*\bsrc\s*=", page) is None  # nothing fetched
    assert re.search(r"<link[^>]*\bhref\s*=\s*[\"']?https?:", page) is None
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)" in page
    assert "<img src=x>" not in page and "<script>bad()</script>" not in page
    assert "&lt;i&gt;fine&lt;/i&gt;" in page
    assert page.count("Plotly.newPlot") == 2
    assert len(page) > 1_000_000  # plotly.js itself is inlined once


def test_reviews_are_an_append_only_history(tmp_path: Path) -> None:
    store = ReviewStore(tmp_path / "r.sqlite3")
    store.record("k1", "P1", "reviewed", note="looked", reviewer="A")
    store.record("k1", "P1", "reopened", note="again")
    store.record("k1", "P2", "reviewed")
    store.record("k2", "P1", "reviewed", note="other dataset")
    assert [e.status for e in store.history("k1", "P1")] == ["reviewed", "reopened"]
    assert store.history("k1", "P1")[0].note == "looked"
    latest = store.latest("k1")
    assert latest["P1"].status == "reopened" and latest["P2"].status == "reviewed"
    assert [e.note for e in store.history("k2")] == ["other dataset"]


def test_reviews_survive_a_new_store_on_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "reviews.sqlite3"
    ReviewStore(path).record("k", "P9", "reviewed", note="before restart")
    assert ReviewStore(path).latest("k")["P9"].note == "before restart"
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == reviews.SCHEMA_VERSION


def test_the_path_comes_from_the_environment(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(reviews.ENV_VAR, str(tmp_path / "x.sqlite3"))
    assert reviews.default_path() == tmp_path / "x.sqlite3"
    monkeypatch.delenv(reviews.ENV_VAR)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    if reviews.sys.platform.startswith("linux"):
        assert reviews.default_path() == tmp_path / "data" / "cpdecomp" / "reviews.sqlite3"


def test_bad_input_is_refused(tmp_path: Path) -> None:
    store = ReviewStore(tmp_path / "r.sqlite3")
    with pytest.raises(CpdecompError, match="status"):
        store.record("k", "P1", "deleted")  # type: ignore[arg-type]
    with pytest.raises(CpdecompError, match="needs a dataset"):
        store.record("", "P1", "reviewed")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(CpdecompError, match=reviews.ENV_VAR):
        ReviewStore(blocker / "reviews.sqlite3")


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path) -> None:
    store = ReviewStore(tmp_path / "r.sqlite3")
    with pytest.raises(sqlite3.IntegrityError), store._transaction() as connection:
        connection.execute("INSERT INTO datasets VALUES ('k', '', 'now')")
        connection.execute("INSERT INTO review_events (dataset_key, patient_id, status, "
                            "created_at) VALUES ('k', 'P1', 'bogus', 'now')")
    assert store.history("k") == []
    with sqlite3.connect(store.path) as connection:
        assert connection.execute("SELECT COUNT(*) FROM datasets").fetchone()[0] == 0

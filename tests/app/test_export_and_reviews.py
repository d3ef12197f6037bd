"""Exports that are safe to open, and the dashboard's reviews in PostgreSQL. (The review store's
own tests, on both back ends: tests/test_review_store.py.)"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
import test_review_store as review_store_tests
from dashboard_helpers import errors, new_app, run_linear

from cpdecomp.app import export
from cpdecomp.app.charts import side_by_side_bars
from cpdecomp.app.reviews import ReviewStore

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
    assert "<script" not in page  # the charts are HTML: the page needs no JavaScript
    assert page.count('class="cp-chart"') == 2
    # The name "<b>" is text; the only bold is the hover's own, around each name, closed.
    body = page.split("<body>")[1]
    assert "&lt;b&gt;" in page and "<b><b>" not in body
    assert body.count("<b>") == body.count("</b>") > 0
    assert len(page) < 100_000  # with plotly.js inlined it was 4.8 MB


@pytest.fixture
def postgres_reviews(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The dashboard's reviews in a fresh schema on the test PostgreSQL server."""
    for location in review_store_tests.fresh_schema(review_store_tests.require_postgres_url()):
        monkeypatch.setenv("CPDECOMP_REVIEW_DB", location)
        yield location


def test_two_sessions_share_one_queue_in_postgresql(postgres_reviews: str) -> None:
    first = run_linear(new_app()).switch_page("views/queue.py").run()
    case = first.selectbox(key="review_patient").value
    first.text_area(key="review_note").input("seen by the first clinician")
    first.button(key="mark_reviewed").click().run()
    assert errors(first) == []
    second = run_linear(new_app()).switch_page("views/queue.py").run()
    assert second.selectbox(key="review_patient").value == case
    assert any("seen by the first clinician" in t.value for t in second.text)
    key = second.session_state["last_run"].dataset_key
    assert [e.note for e in ReviewStore(postgres_reviews).history(key)] == [
        "seen by the first clinician"]

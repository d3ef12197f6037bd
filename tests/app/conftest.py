"""Fixtures for the dashboard's AppTest tests: a private review database per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dashboard_helpers import record_drawn_figures

# One thread each: pytest -n 2 shares two cores, and OpenMP oversubscription is slow.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Before any test draws a chart: a chart's HTML kept by app/cases.py in one test can be shown by
# another test's page, and its figure must be known then too.
record_drawn_figures()


@pytest.fixture(autouse=True)
def review_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "reviews.sqlite3"
    monkeypatch.setenv("CPDECOMP_REVIEW_DB", str(path))
    return path

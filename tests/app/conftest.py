"""Fixtures for the dashboard's AppTest tests: a private review database per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# One thread each: pytest -n 2 shares two cores, and OpenMP oversubscription is slow.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def review_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "reviews.sqlite3"
    monkeypatch.setenv("CPDECOMP_REVIEW_DB", str(path))
    return path

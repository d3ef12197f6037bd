"""The one-home helpers: atomic writes, the missing-value rule, the bounded cache."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cpdecomp.core.atomic import atomic_write, staged_file
from cpdecomp.core.bounded import BoundedCache
from cpdecomp.core.missing import entirely_missing, is_missing, text_cells


def test_an_atomic_write_replaces_the_file_whole_or_leaves_it_as_it_was(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old")
    with atomic_write(target) as temporary:
        assert temporary != str(target) and target.read_text() == "old"  # not yet visible
        with open(temporary, "w") as out:
            out.write("new")
    assert target.read_text() == "new"
    with pytest.raises(RuntimeError), atomic_write(target) as temporary:
        with open(temporary, "w") as out:
            out.write("half")
        raise RuntimeError("the writer failed")
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]  # no temporary left


def test_a_staged_file_is_a_dot_file_removed_after_use(tmp_path):
    with staged_file(tmp_path, "report.json") as temporary:
        name = temporary.rsplit("/", 1)[-1]
        assert name.startswith(".report.json.") and name.endswith(".tmp")
    assert list(tmp_path.iterdir()) == []


def test_missing_values_are_none_nan_and_na_only():
    for value in (None, math.nan, np.float64("nan"), pd.NA):
        assert is_missing(value)
    for value in (0, 0.0, "", "NA", "nan", False, np.inf):
        assert not is_missing(value)
    column = pd.Series(["1.5", None, "x", "2", np.nan, "3e2", "7 kg"], index=range(10, 17))
    np.testing.assert_array_equal(text_cells(column), [2, 6])  # positions, not labels
    assert entirely_missing(pd.Series([None, np.nan], dtype=object))
    assert not entirely_missing(column)


def test_a_bounded_cache_drops_the_oldest_stored_first():
    cache: BoundedCache[str, int] = BoundedCache(2)
    calls: list[str] = []

    def compute(key: str) -> int:
        calls.append(key)
        return len(calls)

    assert cache.get_or_compute("a", lambda: compute("a")) == 1
    assert cache.get_or_compute("b", lambda: compute("b")) == 2
    assert cache.get_or_compute("a", lambda: compute("a")) == 1  # remembered: not computed
    cache["c"] = 3  # full: "a", the oldest stored, goes although it was just read
    assert list(cache) == ["b", "c"] and "a" not in cache and len(cache) == 2
    cache["b"] = 4  # replacing keeps the rest
    assert list(cache) == ["b", "c"] and cache["b"] == 4
    assert calls == ["a", "b"]
    with pytest.raises(ValueError):
        BoundedCache(0)

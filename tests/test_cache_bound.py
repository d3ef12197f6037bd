"""The disk cache of calibration games stays within its bound, dropping the least recently used
files first (a read counts as a use), and `cpdecomp cache info` shows size, bound and entries."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import assert_bad_input, run_ok

from cpdecomp.core.explainer import Explainer
from cpdecomp.core.games.cache import (
    CACHE_DIR_ENV,
    CACHE_MAX_BYTES_ENV,
    DISK_BYTES,
    GameCache,
    default_disk_bytes,
)

N = 1000  # float64 values per game: one file is N * 8 bytes plus the .npy header


def game(i: int) -> np.ndarray:
    return np.full(N, float(i))


def key(name: str) -> str:
    """A cache key of the shape content_digest gives (40 hex digits): the cache manages, and
    clears, only files named so."""
    return hashlib.sha1(name.encode()).hexdigest()


NAMES = {key(f"g{i}"): f"g{i}" for i in range(10)} | {key("g"): "g"}


def file_bytes(tmp_path: Path) -> int:
    probe = GameCache(tmp_path / "probe")
    probe.put(key("probe"), game(0))
    return (tmp_path / "probe" / f"{key('probe')}.npy").stat().st_size


def stored(directory: Path) -> set[str]:
    return {NAMES[p.stem] for p in directory.glob("*.npy")}


def test_the_disk_cache_evicts_the_least_recently_used_at_its_bound(tmp_path) -> None:
    size = file_bytes(tmp_path)
    directory = tmp_path / "cache"
    cache = GameCache(directory, disk_bytes=3 * size)
    for i in range(3):
        cache.put(key(f"g{i}"), game(i))
    assert stored(directory) == {"g0", "g1", "g2"}  # exactly at the bound: all kept
    # A new process (nothing in memory) reads g0 from disk: g0 becomes the most recent.
    reader = GameCache(directory, disk_bytes=3 * size)
    np.testing.assert_array_equal(reader.get(key("g0")), game(0))
    reader.put(key("g3"), game(3))
    assert stored(directory) == {"g0", "g2", "g3"}  # g1 was the least recently used
    reader.put(key("g4"), game(4))
    assert stored(directory) == {"g0", "g3", "g4"}
    assert reader.disk_size() == 3 * size <= reader.disk_bytes
    np.testing.assert_array_equal(GameCache(directory).get(key("g4")), game(4))


def test_a_game_larger_than_the_bound_stays_in_memory(tmp_path) -> None:
    cache = GameCache(tmp_path, disk_bytes=N * 8 - 1)
    cache.put("big", game(1))
    assert stored(tmp_path) == set()
    np.testing.assert_array_equal(cache.get("big"), game(1))  # still served from memory


def test_a_bound_of_zero_keeps_nothing_on_disk(tmp_path) -> None:
    cache = GameCache(tmp_path, disk_bytes=0)
    cache.put(key("g"), game(1))
    assert stored(tmp_path) == set()


def test_a_lowered_bound_evicts_on_the_next_write(tmp_path) -> None:
    size = file_bytes(tmp_path)
    directory = tmp_path / "cache"
    roomy = GameCache(directory, disk_bytes=10 * size)
    for i in range(6):
        roomy.put(key(f"g{i}"), game(i))
    tight = GameCache(directory, disk_bytes=2 * size)
    tight.put(key("g6"), game(6))
    assert stored(directory) == {"g5", "g6"}


@pytest.mark.parametrize(("value", "expected"), [("", DISK_BYTES), ("0", 0),
                                                 ("5000000", 5_000_000), ("2e9", 2 * 10**9),
                                                 ("1_000", 1000)])
def test_the_bound_from_the_environment(monkeypatch, value, expected) -> None:
    monkeypatch.setenv(CACHE_MAX_BYTES_ENV, value)
    assert default_disk_bytes() == expected


def test_the_real_calibration_games_respect_the_bound(tmp_path) -> None:
    """Real games from an explainer: four backgrounds, room for about two of them."""
    import pandas as pd

    from cpdecomp.core.workflow import StudyOptions, prepare_study

    table = pd.read_csv(Path(__file__).resolve().parents[1] / "sample_data" / "diabetes.csv")
    study = prepare_study(table, StudyOptions(target="progression", id_column="patient_id",
                                              model="linear", background=8))
    probe = GameCache(tmp_path / "probe")
    Explainer(study.system, background_size=8, cache=probe).calibration_game("exact")
    (one,) = probe.files()
    bound = int(2.5 * one.stat().st_size)
    cache = GameCache(tmp_path / "bounded", disk_bytes=bound)
    for seed in range(4):
        Explainer(study.system, background_size=8, seed=seed, cache=cache).calibration_game(
            "exact")
        assert cache.disk_size() <= bound
    assert len(cache.files()) == 2


def test_cache_info_shows_size_bound_and_entries(capsys, tmp_path, monkeypatch) -> None:
    directory = tmp_path / "games"
    size = file_bytes(tmp_path)
    monkeypatch.setenv(CACHE_DIR_ENV, str(directory))
    monkeypatch.setenv(CACHE_MAX_BYTES_ENV, str(3 * 2**20))
    cache = GameCache(directory)
    for i in range(2):
        cache.put(key(f"g{i}"), game(i))
    err = run_ok(capsys, "cache", "info")
    assert err.strip() == (
        f"2 cached calibration games, {2 * size / 2**20:.1f} MiB of at most 3.0 MiB "
        f"(${CACHE_MAX_BYTES_ENV}; the least recently used go first), in {directory}")
    assert "removed 2" in run_ok(capsys, "cache", "clear")
    assert run_ok(capsys, "cache", "info").startswith("0 cached calibration games")


def test_a_bad_bound_is_one_line(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "elsewhere"))
    monkeypatch.setenv(CACHE_MAX_BYTES_ENV, "1 GiB")
    message = assert_bad_input(capsys, "cache", "info")
    assert CACHE_MAX_BYTES_ENV in message

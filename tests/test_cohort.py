"""Cohort runs: chunks, parallel workers, a Dask cluster, and the disk cache of games."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from cpdecomp import Explainer, prepare_study
from cpdecomp.core.cli import main
from cpdecomp.core.games.cache import GameCache
from cpdecomp.core.workflow import StudyOptions


def test_chunks_and_workers_give_the_same_numbers_as_one_batch(diabetes_system, tmp_path):
    system, patients = diabetes_system
    rows = system.fitted.encode(patients)
    explainer = Explainer(system, background_size=50, cache=GameCache(tmp_path))
    whole = explainer.explain_rows(rows)
    seen = []
    chunked = explainer.explain_rows(rows, chunk_size=16, jobs=2,
                                     progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (len(rows), len(rows))
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    for part in ("calibration", "instance", "total"):
        np.testing.assert_array_equal(getattr(chunked.decomposition, part),
                                      getattr(whole.decomposition, part))
    np.testing.assert_array_equal(chunked.width, whole.width)


def test_local_workers_are_kept_for_the_same_games_and_replaced_for_others(diabetes_system,
                                                                          tmp_path):
    """A streamed cohort explains input chunk after chunk: the workers that received the games
    serve every chunk (they are not restarted per call), and other games get new workers."""
    from cpdecomp.core import workers

    system, patients = diabetes_system
    rows = system.fitted.encode(patients)
    explainer = Explainer(system, background_size=50, cache=GameCache(tmp_path))
    first = explainer.explain_rows(rows[:40], chunk_size=8, jobs=2)
    pool = workers._POOL.executor
    second = explainer.explain_rows(rows[40:], chunk_size=8, jobs=2)
    assert workers._POOL.executor is pool
    whole = explainer.explain_rows(rows)
    np.testing.assert_array_equal(np.vstack([first.decomposition.total,
                                             second.decomposition.total]),
                                  whole.decomposition.total)
    explainer.explain_rows(rows[:40], alpha=0.2, chunk_size=8, jobs=2)  # other games
    assert workers._POOL.executor is not pool
    workers._POOL.shutdown()


def test_calibration_game_is_read_back_from_disk_by_a_new_explainer(diabetes_system, tmp_path):
    system, _ = diabetes_system
    first = Explainer(system, background_size=50, cache=GameCache(tmp_path))
    game = first.calibration_game("exact")
    assert len(list(tmp_path.glob("*.npy"))) == 1
    fresh_cache = GameCache(tmp_path)  # a new process: nothing in memory
    second = Explainer(system, background_size=50, cache=fresh_cache)
    before = second.evaluator.model_rows
    again = second.calibration_game("exact")
    assert fresh_cache.hits == 1
    assert second.evaluator.model_rows == before
    np.testing.assert_array_equal(again.sorted_scores, game.sorted_scores)
    # Another background is another game: a miss, not a wrong answer.
    third = Explainer(system, background_size=40, cache=fresh_cache)
    third.calibration_game("exact")
    assert fresh_cache.misses == 1


def test_memory_cache_is_bounded_in_bytes():
    cache = GameCache(None, memory_bytes=3 * 8 * 100)
    for i in range(5):
        cache.put(f"k{i}", np.full(100, float(i)))
    assert cache.get("k0") is None and cache.get("k1") is None
    np.testing.assert_array_equal(cache.get("k4"), 4.0)


def test_unreadable_cache_file_is_dropped_and_recomputed(tmp_path):
    cache = GameCache(tmp_path)
    (tmp_path / "broken.npy").write_bytes(b"not an array")
    assert cache.get("broken") is None
    assert not (tmp_path / "broken.npy").exists()


def _write_forever(directory: str) -> None:
    cache = GameCache(__import__("pathlib").Path(directory))
    big = np.arange(4_000_000, dtype=float)
    i = 0
    while True:
        cache.put(f"{i % 3:040x}", big + i)  # keys are content digests (40 hex digits)
        i += 1


def test_cache_survives_a_writer_killed_mid_write(tmp_path):
    """Atomic renames: a killed writer leaves complete files or none, never half of one."""
    writer = multiprocessing.get_context("spawn").Process(target=_write_forever,
                                                          args=(str(tmp_path),))
    writer.start()
    # A spawned interpreter imports numpy before it writes: on a loaded machine that took
    # over 20 s once, so wait generously for the first file.
    deadline = time.time() + 120
    while not list(tmp_path.glob("*.npy")) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    os.kill(writer.pid, signal.SIGKILL)
    writer.join()
    reader = GameCache(tmp_path)
    files = list(tmp_path.glob("*.npy"))
    assert files
    for path in files:
        array = reader.get(path.stem)
        assert array is not None and array.shape == (4_000_000,)
        np.testing.assert_array_equal(np.diff(array), 1.0)
    assert reader.clear() == len(files)
    assert not list(tmp_path.iterdir())


def test_cli_cache_info_and_clear(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CPDECOMP_CACHE_DIR", str(tmp_path / "games"))
    out = tmp_path / "out.csv"
    assert main(["explain", "sample_data/diabetes.csv", "--target", "progression",
                 "--features", "bmi,bp,s5 ltg", "--out", str(out)]) == 0
    assert main(["cache", "info"]) == 0
    assert "1 cached calibration games" in capsys.readouterr().err
    assert main(["cache", "clear"]) == 0
    assert "removed 1" in capsys.readouterr().err


def test_cohort_of_thousands_with_jobs_matches_a_single_worker(tmp_path):
    rng = np.random.default_rng(0)
    n = 6000
    table = pd.DataFrame(rng.normal(size=(n, 6)), columns=[f"f{j}" for j in range(6)])
    table["y"] = table["f0"] + np.exp(0.5 * table["f1"]) * rng.normal(size=n)
    options = StudyOptions(target="y", model="gbm", background=100, split=(0.1, 0.1, 0.8))
    study = prepare_study(table, options)
    single = study.explain()
    parallel = study.explain(jobs=2)
    assert len(single.patient_ids) == 4800
    np.testing.assert_array_equal(parallel.explanation.decomposition.total,
                                  single.explanation.decomposition.total)


@pytest.mark.slow
def test_dask_scheduler_runs_the_same_chunks(tmp_path):
    """--scheduler sends the patients' chunks to a Dask cluster through joblib's backend."""
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        local = tmp_path / "local.json"
        remote = tmp_path / "remote.json"
        common = ["explain", "sample_data/diabetes.csv", "--target", "progression",
                  "--features", "bmi,bp,s5 ltg,age", "--background", "40"]
        assert main([*common, "--out", str(local)]) == 0
        assert main([*common, "--scheduler", cluster.scheduler_address, "--out", str(remote)]) == 0
    a, b = (json.loads(p.read_text()) for p in (local, remote))
    assert a["patients"] == b["patients"]


@pytest.mark.slow
def test_unreachable_scheduler_is_one_clear_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "cpdecomp", "explain", "sample_data/diabetes.csv", "--target",
         "progression", "--features", "bmi", "--scheduler", "tcp://127.0.0.1:9",
         "--out", str(tmp_path / "o.csv")],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Dask scheduler" in result.stderr

"""What a worker process receives: the patient games, pickled once, explain its chunks as the
parent's copy does, without redoing per chunk what one process does once per design."""

from __future__ import annotations

import os
import pickle

import numpy as np

from cpdecomp import Explainer
from cpdecomp.core.games.cache import GameCache


def test_unpickled_games_work_out_the_designs_players_once(diabetes_system, tmp_path):
    """numpy unpickles an array with an equal copy of its dtype, so np.asarray(a, dtype=bool)
    is a new view of it; the evaluator remembers a design's players by the array's identity,
    and a worker used to work them out again for every chunk (+40 % CPU per patient)."""
    system, patients = diabetes_system
    rows = system.fitted.encode(patients)
    games = Explainer(system, background_size=50, cache=GameCache(tmp_path))._games_for(
        "exact", 0.1, "width", None, None)
    shipped = pickle.loads(pickle.dumps(games))
    assert shipped.design.coalitions.dtype is not np.dtype(bool)  # what a worker receives
    remembered = shipped.evaluator._player_cache
    before = len(remembered)
    chunks = [rows[:20], rows[20:40], rows[40:60]]
    for chunk, (decomposition, prediction, lower, upper) in zip(
            chunks, shipped.explain_chunks(chunks), strict=True):
        here = games.explain_chunk(chunk)
        np.testing.assert_array_equal(decomposition.total, here[0].total)
        np.testing.assert_array_equal(prediction, here[1])
        np.testing.assert_array_equal(upper - lower, here[3] - here[2])
    assert len(remembered) == before + 1  # one entry for the worker's own copy of the design


class ThreadsSeen:
    """A stand-in for PatientGames that reports, from inside a worker, the thread pools' sizes
    its kernels would run with (the Games protocol of core.workers)."""

    def explain_chunks(self, chunks: list, threads: int | None = None) -> list[tuple]:
        import numba
        from threadpoolctl import threadpool_info

        numba.set_num_threads(threads or 1)  # as PatientGames.explain_chunks does
        pools = tuple(sorted((pool["filepath"], pool["num_threads"])
                             for pool in threadpool_info()))
        return [(os.getpid(), threads, numba.get_num_threads(), pools) for _ in chunks]


def test_local_workers_share_the_cores_between_their_thread_pools():
    """Two workers on all the cores: each one's numba, OpenMP and BLAS pools get half of them
    (a worker's pools sized to every core oversubscribe them, and OpenMP threads spin)."""
    from cpdecomp.core import workers

    share = max(1, (os.cpu_count() or 1) // 2)
    seen = [row for part in workers.explain_in_workers(ThreadsSeen(), [[0], [1], [2], [3]], 2)
            for row in part]
    workers._POOL.shutdown()
    assert len(seen) == 4 and os.getpid() not in {pid for pid, *_ in seen}
    for _, threads, numba_threads, pools in seen:
        assert threads == numba_threads == share
        assert pools and all(size == share for _, size in pools), pools

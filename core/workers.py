"""Chunks of patients explained in worker processes, with the games shipped to each worker once.

A task used to carry the patient games (the fitted system's tree tables and the calibration
game: 12 MB at d = 12 with a 1,000-row background) together with its chunks, so a cohort of
10^5 patients pickled and hashed them 49 times in the parent, and `--jobs 2` cost more than one
process. Now each worker receives the games once — the pool's initializer on this machine, one
broadcast scatter on a Dask cluster — and a task carries only patient rows. Results come back
in the order of the chunks, with a bounded number of tasks in flight, so a consumer that writes
each chunk away holds a few chunks, not the cohort.

Local workers are forked from a fork server that has imported the explainer's modules once
(scikit-learn, SciPy, numba, pandas: about 2 CPU-s per fresh interpreter), instead of each worker
importing them afresh, and `start_local_workers` lets the command line start that server while
it still reads and fits. A fork server never runs a thread pool itself, so its children may use
OpenMP (a fork of a process whose OpenMP pool has run hangs with GNU libgomp). As with any
multiprocessing start method but fork, a script that explains with jobs > 1 needs the
`if __name__ == "__main__":` guard: the workers import the main module.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import uuid
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

TASKS_IN_FLIGHT_PER_WORKER = 2
"""Tasks queued per worker: one running and one ready, so no worker waits for the parent."""
PRELOADED = ("core.explainer",)
"""What the fork server imports before it forks a worker: everything explaining a chunk and
unpickling the games needs."""


class Games(Protocol):
    """What a worker runs: PatientGames.explain_chunks."""

    def explain_chunks(self, chunks: list[Any], threads: int | None = None) -> list[tuple]: ...


_SCHEDULER: ContextVar[Any | None] = ContextVar("cpdecomp_scheduler", default=None)
_INSTALLED: dict[str, Games] = {}  # in a local worker: the games its initializer received
_LIMITS: list[Any] = []  # in a local worker: its OpenMP/BLAS thread limits, kept in force


@contextmanager
def dask_scheduler(client: Any) -> Iterator[None]:
    """Send the chunks of explanations made inside the block to this Dask client's cluster."""
    token = _SCHEDULER.set(client)
    try:
        yield
    finally:
        _SCHEDULER.reset(token)


def explain_in_workers(games: Games, tasks: Sequence[list[Any]], jobs: int
                       ) -> Iterator[list[tuple]]:
    """Each task's explain_chunks result, in the order of the tasks.

    jobs: local worker processes (-1: one per core); ignored inside dask_scheduler, where the
    cluster's workers run the tasks.
    """
    client = _SCHEDULER.get()
    if client is not None:
        yield from _on_dask(client, games, tasks)
    else:
        yield from _on_local(games, tasks, local_workers(jobs))


def local_workers(jobs: int) -> int:
    """Worker processes for `jobs` (-1: one per core)."""
    return os.cpu_count() or 1 if jobs == -1 else max(1, jobs)


def start_local_workers(jobs: int) -> None:
    """Start, in the background, what local workers for `jobs` are forked from, so its imports
    overlap the caller's own work (reading, fitting); nothing for one process."""
    context = _context()
    if local_workers(jobs) > 1 and context.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()  # returns at once; the server imports PRELOADED


def _context() -> Any:
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")  # Windows: fresh interpreters
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOADED))  # only before the server starts
    return context


def _threads(workers: int, cores: int | None = None) -> int:
    # Each worker's kernels get an equal share of the cores: the kernels are parallel
    # themselves, and workers × threads above the cores only adds switching.
    return max(1, (cores or os.cpu_count() or 1) // workers)


def _limit_thread_pools(threads: int) -> Any:
    """OpenMP and BLAS pools (the boosters' and scikit-learn's predict on the brute-force path)
    at `threads`, as numba's are: sized to every core in each worker they oversubscribe."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=threads)


def _install(token: str, games: Games, threads: int) -> None:
    import numba

    _INSTALLED.clear()
    _INSTALLED[token] = games
    # numba's threading layer loads its OpenMP runtime when it first starts: start it first,
    # so the limits below reach that runtime too.
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
    _LIMITS[:] = [_limit_thread_pools(threads)]


def _explain_installed(token: str, chunks: list[Any], threads: int) -> list[tuple]:
    return _INSTALLED[token].explain_chunks(chunks, threads)


def _explain_given(games: Games, chunks: list[Any], threads: int) -> list[tuple]:
    with _limit_thread_pools(threads):
        return games.explain_chunks(chunks, threads)


class _LocalPool:
    """The worker processes of the last games explained, kept for the next call with them.

    A streamed cohort explains each input chunk of 65,536 rows through its own call: starting
    new workers (the kernels' cache, the games, and imports before the fork server) per call cost
    2.5 CPU-s each.
    """

    def __init__(self) -> None:
        self.games: Games | None = None
        self.workers = 0
        self.token = ""
        self.executor: Any = None

    def executor_for(self, games: Games, workers: int) -> tuple[Any, str]:
        if self.executor is None or self.games is not games or self.workers != workers:
            from concurrent.futures import ProcessPoolExecutor

            self.shutdown()
            self.games, self.workers, self.token = games, workers, uuid.uuid4().hex
            self.executor = ProcessPoolExecutor(
                max_workers=workers, mp_context=_context(), initializer=_install,
                initargs=(self.token, games, _threads(workers)))
        return self.executor, self.token

    def shutdown(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)
        self.games, self.executor = None, None


_POOL = _LocalPool()
atexit.register(_POOL.shutdown)


def _on_local(games: Games, tasks: Sequence[list[Any]], workers: int) -> Iterator[list[tuple]]:
    executor, token = _POOL.executor_for(games, workers)
    threads = _threads(workers)
    pending: deque = deque()
    try:
        for task in tasks:
            pending.append(executor.submit(_explain_installed, token, task, threads))
            if len(pending) >= workers * TASKS_IN_FLIGHT_PER_WORKER:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:  # a consumer that stops early (Stop, an error) leaves these
            future.cancel()


def _on_dask(client: Any, games: Games, tasks: Sequence[list[Any]]) -> Iterator[list[tuple]]:
    nthreads = client.nthreads()  # {worker address: threads}
    workers = max(1, len(nthreads))
    threads = max(1, min(nthreads.values(), default=1))
    shipped = client.scatter(games, broadcast=True)  # one copy on each worker, not per task
    pending: deque = deque()
    try:
        for task in tasks:
            pending.append(client.submit(_explain_given, shipped, task, threads, pure=False))
            if len(pending) >= workers * TASKS_IN_FLIGHT_PER_WORKER:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        client.cancel(shipped)

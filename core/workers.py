"""Chunks of patients explained in worker processes, with the games shipped to each worker once.

A task used to carry the patient games (the fitted system's tree tables and the calibration
game: 12 MB at d = 12 with a 1,000-row background) together with its chunks, so a cohort of
10^5 patients pickled and hashed them 49 times in the parent, and `--jobs 2` cost more than one
process. Now each worker receives the games once — loky's initializer on this machine, one
broadcast scatter on a Dask cluster — and a task carries only patient rows. Results come back
in the order of the chunks, with a bounded number of tasks in flight, so a consumer that writes
each chunk away holds a few chunks, not the cohort.
"""

from __future__ import annotations

import atexit
import os
import uuid
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

TASKS_IN_FLIGHT_PER_WORKER = 2
"""Tasks queued per worker: one running and one ready, so no worker waits for the parent."""


class Games(Protocol):
    """What a worker runs: PatientGames.explain_chunks."""

    def explain_chunks(self, chunks: list[Any], threads: int | None = None) -> list[tuple]: ...


_SCHEDULER: ContextVar[Any | None] = ContextVar("cpdecomp_scheduler", default=None)
_INSTALLED: dict[str, Games] = {}  # in a loky worker: the games its initializer received


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
        yield from _on_loky(games, tasks, local_workers(jobs))


def local_workers(jobs: int) -> int:
    """Worker processes for `jobs` (-1: one per core)."""
    return os.cpu_count() or 1 if jobs == -1 else max(1, jobs)


def _threads(workers: int, cores: int | None = None) -> int:
    # Each worker's kernels get an equal share of the cores: the kernels are parallel
    # themselves, and workers × threads above the cores only adds switching.
    return max(1, (cores or os.cpu_count() or 1) // workers)


def _install(token: str, games: Games) -> None:
    _INSTALLED.clear()
    _INSTALLED[token] = games


def _explain_installed(token: str, chunks: list[Any], threads: int) -> list[tuple]:
    return _INSTALLED[token].explain_chunks(chunks, threads)


def _explain_given(games: Games, chunks: list[Any], threads: int) -> list[tuple]:
    return games.explain_chunks(chunks, threads)


class _LocalPool:
    """The worker processes of the last games explained, kept for the next call with them.

    A streamed cohort explains each input chunk of 65,536 rows through its own call: starting
    new workers (imports, the kernels' cache, the games) per call cost 2.5 CPU-s each.
    """

    def __init__(self) -> None:
        self.games: Games | None = None
        self.workers = 0
        self.token = ""
        self.executor: Any = None

    def executor_for(self, games: Games, workers: int) -> tuple[Any, str]:
        if self.executor is None or self.games is not games or self.workers != workers:
            from joblib.externals.loky import ProcessPoolExecutor

            self.shutdown()
            self.games, self.workers, self.token = games, workers, uuid.uuid4().hex
            self.executor = ProcessPoolExecutor(max_workers=workers, initializer=_install,
                                                initargs=(self.token, games))
        return self.executor, self.token

    def shutdown(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True)
        self.games, self.executor = None, None


_POOL = _LocalPool()
atexit.register(_POOL.shutdown)


def _on_loky(games: Games, tasks: Sequence[list[Any]], workers: int) -> Iterator[list[tuple]]:
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

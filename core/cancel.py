"""Stopping a long computation from outside it: a caller's "stop?" check, asked between chunks.

The dashboard computes each Run on a worker thread; when its user presses Stop or leaves, the
worker must stop within a second or two, not finish a computation nobody will read. The work
calls `checkpoint()` between chunks (rows of the calibration game, batches of brute-force model
calls, chunks of patients); inside `cancellable(check)`, a checkpoint raises `Cancelled` once
check() is true. Outside any `cancellable` block a checkpoint costs one lookup and never raises,
so the command line and the library are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_CHECK: ContextVar[Callable[[], bool] | None] = ContextVar("cpdecomp_cancel_check",
                                                           default=None)


class Cancelled(BaseException):
    """The caller asked the computation to stop.

    A BaseException, like KeyboardInterrupt: an `except Exception` around a model call (a
    fallback, a spot check) must not swallow it and carry on computing.
    """


@contextmanager
def cancellable(check: Callable[[], bool]) -> Iterator[None]:
    """Within the block (on this thread), checkpoints raise Cancelled once check() is true."""
    token = _CHECK.set(check)
    try:
        yield
    finally:
        _CHECK.reset(token)


def checkpoint() -> None:
    """Raise Cancelled if the enclosing `cancellable` block's check says stop."""
    check = _CHECK.get()
    if check is not None and check():
        raise Cancelled

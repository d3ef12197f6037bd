"""Calling numba's parallel kernels safely from several threads.

The dashboard computes for several sessions at once, each on its own thread. numba's OpenMP
and TBB threading layers accept that; its last-resort workqueue layer (used where neither
libgomp nor TBB is installed, e.g. a slim container without libgomp) aborts the whole process
when two threads launch parallel kernels at the same time. There, kernels take turns.
"""

from __future__ import annotations

import importlib
import threading
from contextlib import AbstractContextManager, nullcontext
from functools import cache

import numba

_TURNS = threading.Lock()


@cache
def threadsafe_layer() -> bool:
    """Whether the threading layer numba will use accepts concurrent launches."""
    chosen = str(numba.config.THREADING_LAYER).lower()  # type: ignore[attr-defined]  # set at import
    if chosen == "workqueue":
        return False
    if chosen in {"omp", "tbb", "safe", "threadsafe"}:
        return True  # numba refuses to run rather than fall back to workqueue
    for pool in ("numba.np.ufunc.tbbpool", "numba.np.ufunc.omppool"):  # numba's own order
        try:
            importlib.import_module(pool)
        except Exception:  # ImportError, or OSError for a missing shared library
            continue
        return True
    return False


def parallel_section() -> AbstractContextManager[object]:
    """Around every call of a parallel=True kernel: a lock where the layer needs one."""
    return nullcontext() if threadsafe_layer() else _TURNS

"""Compiling the kernels ahead: `cpdecomp warmup`.

The masking and attribution kernels are numba functions compiled on first use and cached on
disk (`cache=True`): a fresh install's first run spends most of its time compiling them (29 s of
a 32 s first `cpdecomp explain` of the bundled sample on 2 cores), and every later process loads
them from the cache instead. `warm_up` runs small explanations of a synthetic table that call
every kernel with the argument types real runs give it, so the compilation happens at install
(or at the dashboard's start) rather than at a clinician's first Run.

The cache is numba's: `$NUMBA_CACHE_DIR` when set, else `__pycache__` beside the kernels' source
(another folder when that is read-only: core/__init__.py). A folder set by $NUMBA_CACHE_DIR is
stamped with the code version first (core/kernel_cache.py), as the dashboard's start does, so
the dashboard keeps what was compiled here.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from cpdecomp.core.kernel_cache import bound_numba_cache

KERNEL_MODULES = ("cpdecomp.core.games.tree_kernels", "cpdecomp.core.games.calibration",
                  "cpdecomp.core.attribution.term_kernels",
                  "cpdecomp.core.attribution.interactions")
"""The modules whose numba functions a run compiles."""
ROWS = 160
"""Rows of the synthetic tables: enough for the split to leave a calibration set and patients
(and so the kernels' parallel variants as well as their serial ones)."""
WIDE = 18
"""Features of the wide table: above the 16 that the full lattice takes (tree_tables)."""
HEARTBEAT = 10.0
"""Seconds between "still compiling" lines while one step lasts (the longest compiles for about
half a minute to a minute on 2 cores)."""


@dataclass(frozen=True)
class KernelCounts:
    """Signatures of the kernels, over all kernel modules: compiled in this process (a cache
    miss) and loaded from numba's cache (a hit)."""

    compiled: int
    loaded: int


def kernel_dispatchers() -> Iterator[object]:
    """numba's dispatcher of every kernel (imports the kernel modules)."""
    from numba.core.registry import CPUDispatcher

    for name in KERNEL_MODULES:
        for value in vars(importlib.import_module(name)).values():
            if isinstance(value, CPUDispatcher):
                yield value


def kernel_counts() -> KernelCounts:
    """How many kernel signatures this process compiled and loaded from the cache so far."""
    compiled = loaded = 0
    for dispatcher in kernel_dispatchers():
        stats = dispatcher.stats  # type: ignore[attr-defined]
        compiled += sum(stats.cache_misses.values())
        loaded += sum(stats.cache_hits.values())
    return KernelCounts(compiled, loaded)


def kernels_cached() -> bool:
    """Whether numba's cache holds every kernel of this code (read from its index files, which
    numba keys on each source file's time and size); False when it cannot tell."""
    try:
        return all(dispatcher._cache._cache_file._load_index()  # type: ignore[attr-defined]
                   for dispatcher in kernel_dispatchers())
    except Exception:  # numba's internals moved: assume not, and warm up
        return False


def cache_folder() -> str:
    """Where numba keeps the kernels (the first kernel's folder; they share one locator)."""
    for dispatcher in kernel_dispatchers():
        return str(dispatcher.stats.cache_path)  # type: ignore[attr-defined]
    return "?"


def synthetic_table(n_features: int, seed: int = 0) -> pd.DataFrame:
    """A table whose noise grows with the second feature, so widths differ between rows."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(ROWS, n_features))
    y = 2 * x[:, 0] + (1 + np.abs(x[:, 1 % n_features])) * rng.normal(size=ROWS)
    frame = pd.DataFrame(x, columns=[f"x{i}" for i in range(n_features)])
    frame["outcome"] = y
    return frame


def steps() -> list[tuple[str, Callable[[], object]]]:
    """(what, work) for each step: the dashboard's default Run first (gradient boosting,
    normalized family, exact Shapley, calibration bootstrap), then the kernels of the other
    views and of wide tables."""
    from cpdecomp.core.games.cache import GameCache
    from cpdecomp.core.games.instance import GROUP_SHAPLEY_PLAYERS
    from cpdecomp.core.workflow import Study, StudyOptions, prepare_study

    def study(table: pd.DataFrame, background: int, family: str = "normalized") -> Study:
        fitted = prepare_study(table, StudyOptions(target="outcome", background=background,
                                                   family=family))
        # in memory only: a synthetic table's games have no place in the disk cache
        fitted.explainer.cache = GameCache(None)
        return fitted

    studies: dict[str, Study] = {}

    def fit() -> None:
        studies["default"] = study(synthetic_table(10), 64)

    def explain() -> None:
        studies["default"].explain(method="exact", alpha=0.1)

    def bootstrap() -> None:
        studies["default"].explain(method="exact", alpha=0.1, calibration_bootstrap=10)

    def interactions() -> None:
        studies["default"].interactions(alpha=0.1)

    def linear() -> None:
        # CQR from GROUP_SHAPLEY_PLAYERS features: φ_I from the tree tables' leaf groups
        study(synthetic_table(GROUP_SHAPLEY_PLAYERS), 32, "cqr").explain(
            method="exact", alpha=0.1, rows=[0, 1, 2])

    def wide() -> None:
        study(synthetic_table(WIDE), 32).explain(method="permutation", alpha=0.1, budget=2,
                                                 rows=[0, 1, 2])

    return [("fitting a model and its prediction kernels", fit),
            ("the masking and Shapley kernels (a Run's main work)", explain),
            ("the calibration bootstrap's kernel", bootstrap),
            ("the interaction kernel", interactions),
            ("the leaf groups' Shapley kernel (CQR)", linear),
            ("the kernels for more than 16 features", wide)]


def warm_up(report: Callable[[str], None] = print) -> KernelCounts:
    """Compile (or load from numba's cache) every kernel, saying each step through `report`;
    returns the counts over the whole warm-up."""
    started = time.perf_counter()
    bound_numba_cache()  # the folder stamped with this code, as the dashboard's start does
    todo = steps()
    for number, (what, work) in enumerate(todo, 1):
        report(f"warmup: [{number}/{len(todo)}] {what}…")
        before = kernel_counts()
        step_started = time.perf_counter()
        done = threading.Event()

        def heartbeat(done: threading.Event = done, number: int = number,
                      step_started: float = step_started) -> None:
            while not done.wait(HEARTBEAT):
                report(f"warmup: [{number}/{len(todo)}] still compiling, "
                       f"{time.perf_counter() - step_started:.0f} s so far")

        beating = threading.Thread(target=heartbeat, name="cpdecomp-warmup-heartbeat",
                                   daemon=True)
        beating.start()
        try:
            work()
        finally:
            done.set()
            beating.join()
        after = kernel_counts()
        report(f"warmup: [{number}/{len(todo)}] done in "
               f"{time.perf_counter() - step_started:.1f} s ({after.compiled - before.compiled} "
               f"compiled, {after.loaded - before.loaded} loaded from the cache)")
    total = kernel_counts()
    report(f"warmup: done in {time.perf_counter() - started:.1f} s: {total.compiled} kernels "
           f"compiled now, {total.loaded} loaded from the cache, in {cache_folder()}")
    return total

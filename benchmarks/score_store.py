"""Where a cold calibration game's time goes: masking and scoring, the transposed write into the
score store, and the sort; and a tiled copy into the store's layout against numpy's.

    python benchmarks/score_store.py [--rows 25000] [--repeats 3]

CalibrationGame.compute's loop, replayed step by step and timed (the speed benchmark's data at
d = 12, gbm, the normalized family, all 4,096 coalitions, m = 1,000 background rows, the 1,000
calibration rows repeated to --rows): each chunk's masked components are scored (rows ×
coalitions, the tables' layout), then written into the (coalitions × rows) store by numpy's
transposed assignment, as compute does, and by a tiled numba copy (the candidate) into a second
store, the two checked equal; the store is then sorted per coalition. Prints a markdown table
with the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from numba import njit, prange
from speed import build_workload, fresh_explainer
from speed.harness import header, load_text, row

from cpdecomp.core.games.calibration import CELLS_PER_CHUNK

D = 12
TILE = 32


@njit(cache=True, parallel=True)
def tiled_store(scores, by_coalition, start):
    """by_coalition[c, start + r] = scores[r, c], in TILE x TILE tiles that stay in cache."""
    n_rows, n_coalitions = scores.shape
    for tile in prange((n_coalitions + TILE - 1) // TILE):
        first = tile * TILE
        last = min(first + TILE, n_coalitions)
        for top in range(0, n_rows, TILE):
            bottom = min(top + TILE, n_rows)
            for c in range(first, last):
                for r in range(top, bottom):
                    by_coalition[c, start + r] = scores[r, c]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=25_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    workload = build_workload(D)
    system = workload.fitted.conformalize(workload.table.iloc[3000:4000],
                                          workload.y[3000:4000])
    evaluator = fresh_explainer(system, 1000).evaluator
    copies = max(1, args.rows // 1000)
    rows = np.tile(system.calibration_rows, (copies, 1))
    targets = np.tile(system.calibration_targets, copies)
    coalitions = ((np.arange(2 ** D)[:, None] >> np.arange(D)) & 1).astype(bool)
    family = system.family
    tiled_store(np.zeros((3, 5)), np.zeros((5, 3)), 0)  # compiled before the timing
    before = os.getloadavg()
    lines = [*header("repeat", "mask + score (s)", "numpy transposed write (s)",
                     "tiled copy (s)", "sort (s)", "write's share", "sort's share",
                     "tiled / numpy")]
    for repeat in range(args.repeats):
        masking = numpy_write = tiled = 0.0
        store = np.empty((len(coalitions), len(rows)))
        candidate = np.empty_like(store)
        step = max(1, CELLS_PER_CHUNK // len(coalitions))
        for start in range(0, len(rows), step):
            a = time.perf_counter()
            tables = evaluator.evaluate_by_row(coalitions, rows[start:start + step],
                                               family.components)
            scores = np.ascontiguousarray(family.scores(targets[start:start + step, None],
                                                        tables))
            b = time.perf_counter()
            store[:, start:start + step] = scores.T
            c = time.perf_counter()
            tiled_store(scores, candidate, start)
            masking, numpy_write, tiled = (masking + b - a, numpy_write + c - b,
                                           tiled + time.perf_counter() - c)
        if not np.array_equal(store, candidate):
            raise AssertionError("the tiled copy differs from numpy's")
        a = time.perf_counter()
        store.sort(axis=1)
        sort = time.perf_counter() - a
        game = masking + numpy_write + sort
        lines.append(row(repeat + 1, f"{masking:.2f}", f"{numpy_write:.2f}", f"{tiled:.2f}",
                         f"{sort:.2f}", f"{100 * numpy_write / game:.0f} %",
                         f"{100 * sort / game:.0f} %", f"{tiled / numpy_write:.2f}×"))
    print(f"n = {len(rows):,} calibration rows, {len(coalitions):,} coalitions, m = 1,000; "
          f"load {load_text(before)} → {load_text(os.getloadavg())}\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

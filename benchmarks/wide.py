"""Wide tables: the calibration game and one patient at d = 20-100 on tree tables.

    python benchmarks/wide.py [--dims 20,30,50,100] [--patients 20] [--out FILE.md]

Workload: the speed benchmark's synthetic data (benchmarks/speed.py) with d features, gbm for
f and σ (100 trees × 31 leaves), normalized family, n = 1000 calibration rows, m = 1000
background rows, α = 0.1; permutation sampling and KernelSHAP at their default budgets (exact
enumeration is refused above 16 features). Past 16 players the tables are read per coalition:
each coalition's per-group buffer offsets are worked out once per design, and a coalition that
extends another by one player (every permutation prefix) is its parent's value plus the groups
that player changes. The side-by-side column times the same kernel with every coalition summed
over all groups (no parents), in the same run. Wall time and CPU time ÷ cores are both given,
since the machine may be shared; the SE is the median reported standard error of φ_C.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from speed import build_workload, fresh_explainer, publish

from core.games.tree_tables import _coalition_values
from core.parallel import parallel_section

N_CALIBRATION, BACKGROUND, ALPHA = 1000, 1000, 0.1
METHODS = ("permutation", "kernel")


def timed(function, *args, **kwargs):  # type: ignore[no-untyped-def]
    wall, cpu = time.perf_counter(), time.process_time()
    result = function(*args, **kwargs)
    return time.perf_counter() - wall, time.process_time() - cpu, result


def all_groups_seconds(explainer, design, rows: np.ndarray) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Per row: the chained kernel and the same kernel summing every group, side by side."""
    tables = explainer.evaluator.tables("sigma")
    _, bits, _ = explainer.evaluator._bits(design.coalitions)
    offsets, order, parent, start, new, old = tables._coalition_reads(bits)
    tail = (tables.base, tables.tests, tables.paths, tables.groups, tables.terms)
    rows = np.ascontiguousarray(rows)
    with parallel_section():
        chained = timed(_coalition_values, rows, offsets, order, parent, start, new, old, *tail)
        summed = timed(_coalition_values, rows, offsets, order, np.full_like(parent, -1), start,
                       new, old, *tail)
    return chained[0] / len(rows), summed[0] / len(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default="20,30,50,100", help="feature counts to measure")
    parser.add_argument("--patients", type=int, default=20, help="single-patient calls timed")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    lines = [
        "# Wide tables: calibration game and one patient on tree tables", "",
        f"n = {N_CALIBRATION}, m = {BACKGROUND}, normalized family, gbm; {cores} cores; "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average "
        f"{os.getloadavg()[0]:.1f} at the start.", "",
        "| d | method | coalitions | calibration game (wall) | CPU ÷ cores | one patient p50 | "
        "median SE of φ_C | per row: chained | per row: all groups | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in (int(x) for x in args.dims.split(",")):
        workload = build_workload(d)
        system = workload.system(N_CALIBRATION)
        for method in METHODS:
            explainer = fresh_explainer(system, BACKGROUND)
            design = explainer.design(method)
            explainer.explain_rows(workload.patients[:2], method=method, alpha=ALPHA)  # JIT, game
            explainer = fresh_explainer(system, BACKGROUND)
            explainer.evaluator.tables("f"), explainer.evaluator.tables("sigma")
            wall, cpu, _ = timed(explainer.calibration_game, method)
            explainer.explain_rows(workload.patients[:1], method=method, alpha=ALPHA)
            one = [timed(explainer.explain_rows, workload.patients[i:i + 1], method=method,
                         alpha=ALPHA)[0] for i in range(args.patients)]
            result = explainer.explain_rows(workload.patients[:50], method=method, alpha=ALPHA)
            se = result.decomposition.calibration_se
            chained, summed = all_groups_seconds(explainer, design,
                                                 system.calibration_rows[:50])
            lines.append(
                f"| {d} | {method} | {len(design.coalitions)} | {wall:.1f} s | "
                f"{cpu / cores:.1f} s | {statistics.median(one) * 1e3:.1f} ms | "
                f"{'—' if se is None else f'{np.median(se[0]):.3g}'} | "
                f"{chained * 1e3:.2f} ms | {summed * 1e3:.2f} ms | {summed / chained:.1f}× |")
            print(lines[-1], flush=True)
    publish("\n".join(lines) + "\n", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

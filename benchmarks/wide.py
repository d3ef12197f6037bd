"""Wide tables: the calibration game and one patient at d = 20-100 on tree tables.

    python benchmarks/wide.py [--dims 20,30,50,100] [--patients 20] [--out FILE.md]
                              [--no-ladder] [--brute-only] [--brute-pairs 15]

Workload: the speed benchmark's synthetic data (benchmarks/speed/workload.py) with d features,
gbm for f and σ (100 trees × 31 leaves), normalized family, n = 1000 calibration rows, m = 1000
background rows, α = 0.1; permutation sampling and KernelSHAP at their default budgets (exact
enumeration is refused above 16 features). Coalitions are boolean masks of any width; past 16
players the tables are read per coalition: each coalition's per-group buffer offsets are worked
out once per design (from the mask, at each group's players), and a coalition that extends
another by one player (every permutation prefix) is its parent's value plus the groups that
player changes. The side-by-side column times the same kernel with every coalition summed over
all groups (no parents), in the same run. Wall time and CPU time ÷ cores are both given, since
the machine may be shared. The SE is the median reported standard error of φ_C, also as a share
of |v_C(N) − v_C(∅)| (the calibration gap the φ_C split). The brute-force table times the
fallback per hybrid row against the models' own predict on the same hybrid rows, in calls as
large as brute force's, and in one call, in interleaved triples (order rotated) at each d; it
gives the median of the paired ratios with their interquartile range and extremes
(`--brute-only` runs this table alone, in a few minutes). It runs the models on one thread and
counts process CPU time: on a shared machine a two-thread OpenMP predict's wall time swings 2-3×
between repeats (its threads wait for each other at every tree) and its CPU time counts that
spinning, while one thread's CPU time is the work done (`--brute-threads 0` keeps the
libraries' own threads, timed by the wall clock). """

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))

from speed import build_workload, fresh_explainer, publish
from speed.harness import timed_cpu as timed
from speed.measures import hybrid_batch, predict_seconds_per_row

from cpdecomp.core.attribution import METHOD_BUDGETS, TARGET_RELATIVE_SE
from cpdecomp.core.games import MaskedEvaluator
from cpdecomp.core.games.tree_kernels import _coalition_values
from cpdecomp.core.parallel import parallel_section

N_CALIBRATION, BACKGROUND, ALPHA = 1000, 1000, 0.1
METHODS = ("permutation", "kernel")
BRUTE_PAIRS = 15
"""Interleaved (brute force, predict) measurements per d: enough for a median and quartiles."""
BRUTE_ROWS = 50
BRUTE_THREADS = 1
"""Threads the models run on in the brute-force table (0: the libraries' default)."""
"""Calibration rows brute force masks per measurement (× m hybrid rows per component)."""
LADDER = {"permutation": (32, 64, 128), "kernel": (1024, 2048, 4096)}
"""Budgets whose standard error is measured beside the default's (the default rule's evidence)."""


def all_groups_seconds(explainer, design, rows: np.ndarray) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Per row: the chained kernel and the same kernel summing every group, side by side."""
    tables = explainer.evaluator.tables("sigma")
    _, over_players = explainer.evaluator._players(design.coalitions)
    offsets, order, parent, start, new, old = tables._design_reads(over_players)
    tail = (tables.base, tables.tests, tables.paths, tables.groups, tables.terms)
    rows = np.ascontiguousarray(rows)
    with parallel_section():
        chained = timed(_coalition_values, rows, offsets, order, parent, start, new, old, *tail)
        summed = timed(_coalition_values, rows, offsets, order, np.full_like(parent, -1), start,
                       new, old, *tail)
    return chained[0] / len(rows), summed[0] / len(rows)


@dataclass
class BruteTimes:
    """Per hybrid row, one entry per interleaved measurement."""

    brute: list[float]
    predict_same_calls: list[float]
    """The models' own predict on the same hybrid rows, in calls as large as brute force's."""
    predict_one_call: list[float]
    """... and all of them in one call."""
    rows_per_call: int
    hybrid_rows: int

    @staticmethod
    def spread(ratios: list[float]) -> str:
        q1, median, q3 = np.percentile(ratios, [25, 50, 75])
        return (f"{median:.3f}× (IQR {q1:.3f}–{q3:.3f}, range {min(ratios):.3f}–"
                f"{max(ratios):.3f})")

    def row(self, d: int) -> str:
        same = [b / p for b, p in zip(self.brute, self.predict_same_calls, strict=True)]
        one = [b / p for b, p in zip(self.brute, self.predict_one_call, strict=True)]
        return (f"| {d} | {self.rows_per_call:,} | {statistics.median(self.brute) * 1e6:.2f} | "
                f"{statistics.median(self.predict_same_calls) * 1e6:.2f} | {self.spread(same)} | "
                f"{statistics.median(self.predict_one_call) * 1e6:.2f} | {self.spread(one)} |")


def brute_against_predict(system, explainer, d: int, pairs: int,  # type: ignore[no-untyped-def]
                          threads: int = BRUTE_THREADS) -> BruteTimes:
    """Brute force on one coalition of half the players over BRUTE_ROWS calibration rows,
    against the models' own predict on the very hybrid rows it builds, interleaved; process CPU
    time on `threads` threads, or wall time on the libraries' own threads (0)."""
    names = system.family.components
    coalition = np.random.default_rng(d).random((1, d)) < 0.5
    rows = system.calibration_rows[:BRUTE_ROWS]
    brute = MaskedEvaluator(system.fitted.components, explainer.background, path="brute")
    batch = hybrid_batch(rows, explainer.background, coalition[0], len(rows) * BACKGROUND)
    per_call = brute.pairs_per_call * BACKGROUND
    times = BruteTimes([], [], [], per_call, len(batch))

    clock = time.process_time if threads else time.perf_counter

    def brute_row() -> None:
        before, start = brute.model_rows, clock()
        brute.evaluate(coalition, rows, names)
        times.brute.append((clock() - start) / (brute.model_rows - before))

    steps = (brute_row,
             lambda: times.predict_same_calls.append(
                 predict_seconds_per_row(system, batch, per_call, clock)),
             lambda: times.predict_one_call.append(
                 predict_seconds_per_row(system, batch, None, clock)))
    with threadpool_limits(threads) if threads else contextlib.nullcontext():
        brute.evaluate(coalition, rows, names)  # first-call costs (the empty value) go first
        for i in range(pairs):
            for k in range(len(steps)):  # the order rotates, so no side always runs first
                steps[(i + k) % len(steps)]()
    return times


def budget_ladder(system, d: int) -> list[str]:  # type: ignore[no-untyped-def]
    """Rows of the SE-by-budget table: the calibration game alone at each budget of LADDER,
    one explainer per d (its tables built once)."""
    explainer = fresh_explainer(system, BACKGROUND)
    rows = []
    for method, budgets in LADDER.items():
        default = METHOD_BUDGETS[method].default  # type: ignore[union-attr]
        for budget in budgets:
            design = explainer.design(method, budget)
            wall, cpu, game = timed(explainer.calibration_game, method, budget)
            values = game.values(ALPHA)
            se = design.standard_errors(values)
            if se is None:  # the budget enumerates every coalition: exact, no error
                continue
            gap = abs(float(values[design.full_index] - values[design.empty_index]))
            share = float(np.median(se)) / gap
            mark = " (default)" if budget == default else ""
            rows.append(f"| {d} | {method} | {budget}{mark} | {len(design.coalitions)} | "
                        f"{wall:.1f} s | {cpu / (os.cpu_count() or 1):.1f} s | "
                        f"{np.median(se):.3g} | {share:.2%} | "
                        f"{'yes' if share <= TARGET_RELATIVE_SE else '**no**'} |")
            print(rows[-1], flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default="20,30,50,100", help="feature counts to measure")
    parser.add_argument("--patients", type=int, default=20, help="single-patient calls timed")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    parser.add_argument("--no-ladder", action="store_true",
                        help="skip the SE-by-budget table")
    parser.add_argument("--brute-only", action="store_true",
                        help="only the brute-force table (a quick rerun)")
    parser.add_argument("--brute-pairs", type=int, default=BRUTE_PAIRS,
                        help="interleaved brute-force/predict measurements per d")
    parser.add_argument("--brute-threads", type=int, default=BRUTE_THREADS,
                        help="model threads in the brute-force table (0: the libraries' own, "
                             "wall time)")
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    started = time.perf_counter()
    load_before = os.getloadavg()
    budgets = ", ".join(f"{m} {METHOD_BUDGETS[m].describe()}"  # type: ignore[union-attr]
                        for m in METHODS)
    lines = [
        "# Wide tables: calibration game and one patient on tree tables", "",
        f"n = {N_CALIBRATION}, m = {BACKGROUND}, normalized family, gbm; {cores} cores; "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average {load_before[0]:.1f} at the "
        "start{LOAD_AFTER}. Default budgets: " + budgets + ".", "",
        "| d | method | budget | coalitions | calibration game (wall) | CPU ÷ cores | "
        "one patient p50 | CPU ÷ cores | median SE of φ_C (width) | "
        "÷ abs(v_C(N) − v_C(∅)) | per row: chained | per row: all groups | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    brute_lines = [
        "", "Brute-force fallback per hybrid row against the models' own predict (f and σ) on "
        f"the same {BRUTE_ROWS * BACKGROUND:,} hybrid rows per component ({BRUTE_ROWS} "
        "calibration rows × m, one coalition of about half the players): in calls as large as "
        "brute force's, and in one call; "
        f"{args.brute_pairs} interleaved measurements, medians; ratios are the median of the "
        "paired ratios, with their interquartile range and extremes; "
        + (f"process CPU time, models on {args.brute_threads} thread(s):" if args.brute_threads
           else "wall time, models on their own threads:"), "",
        "| d | hybrid rows per call | brute µs/row | predict µs/row, same calls | "
        "brute / predict, same calls | predict µs/row, one call | brute / predict, one call |",
        "|---|---|---|---|---|---|---|",
    ]
    ladder_lines = [
        "", "Standard error by budget (the calibration game alone, cold; the rule for the "
        f"defaults: median SE of φ_C ≤ {TARGET_RELATIVE_SE:.1%} of abs(v_C(N) − v_C(∅))):", "",
        "| d | method | budget | coalitions | calibration game (wall) | CPU ÷ cores | "
        "median SE of φ_C (log scale) | ÷ abs(v_C(N) − v_C(∅)) | within target |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for d in (int(x) for x in args.dims.split(",")):
        workload = build_workload(d)
        system = workload.system(N_CALIBRATION)
        explainer = fresh_explainer(system, BACKGROUND)  # the brute table's background
        for method in () if args.brute_only else METHODS:
            explainer = fresh_explainer(system, BACKGROUND)
            design = explainer.design(method)
            explainer.explain_rows(workload.patients[:2], method=method, alpha=ALPHA)  # JIT, game
            explainer = fresh_explainer(system, BACKGROUND)
            explainer.evaluator.tables("f"), explainer.evaluator.tables("sigma")
            wall, cpu, _ = timed(explainer.calibration_game, method)
            explainer.explain_rows(workload.patients[:1], method=method, alpha=ALPHA)
            one = [timed(explainer.explain_rows, workload.patients[i:i + 1], method=method,
                         alpha=ALPHA)[:2] for i in range(args.patients)]
            result = explainer.explain_rows(workload.patients[:50], method=method, alpha=ALPHA)
            se = result.decomposition.calibration_se
            gap = abs(float(result.decomposition.calibration[0].sum()))
            median_se = None if se is None else float(np.median(se[0]))
            chained, summed = all_groups_seconds(explainer, design,
                                                 system.calibration_rows[:50])
            lines.append(
                f"| {d} | {method} | {design.budget} | {len(design.coalitions)} | {wall:.1f} s | "
                f"{cpu / cores:.1f} s | {statistics.median(w for w, _ in one) * 1e3:.1f} ms | "
                f"{statistics.median(c for _, c in one) / cores * 1e3:.1f} ms | "
                f"{'—' if median_se is None else f'{median_se:.3g}'} | "
                f"{'—' if median_se is None else f'{median_se / gap:.2%}'} | "
                f"{chained * 1e3:.2f} ms | {summed * 1e3:.2f} ms | {summed / chained:.1f}× |")
            print(lines[-1], flush=True)
        brute_lines.append(brute_against_predict(system, explainer, d, args.brute_pairs,
                                                 args.brute_threads).row(d))
        print(brute_lines[-1], flush=True)
        if not (args.no_ladder or args.brute_only):
            ladder_lines.extend(budget_ladder(system, d))
    load_after = os.getloadavg()[0]
    tables = ((lines[:3] if args.brute_only else lines) + brute_lines
              + ([] if args.no_ladder or args.brute_only else ladder_lines))
    text = "\n".join(tables) + "\n"
    text = text.replace("{LOAD_AFTER}", f", {load_after:.1f} at the end "
                        f"({(time.perf_counter() - started) / 60:.1f} min)")
    publish(text, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

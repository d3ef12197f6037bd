"""Cost of comparing two calibration sets against one set's explanation with its bootstrap.

    python benchmarks/recalibration.py [--replicates 200] [--patients 1000] [--repeats 5]
                                       [--out FILE.md]

Workload: the speed benchmark's (benchmarks/speed/workload.py: synthetic heteroscedastic data,
gbm for f and σ, normalized family), d = 12, n = 1000 rows in each calibration set, m = 1000
background rows, exact Shapley, width units (the comparison's costliest: its change intervals
are per patient there). Side by side in one process, alternating, per repeat and each from a
cold explainer (tree tables built, games computed, a memory-only cache): the baseline is one
set's `explain` with calibration_bootstrap = 200 (what `cpdecomp explain --calibration-bootstrap
200` computes after fitting), the comparison is `compare_calibrations` of that set and another
with the same bootstrap (both sets' games and resamples, the instance game once, every set's
decomposition, the change intervals and the cross coverage). The ratio is the result (target:
the comparison ≤ 2× the baseline); read single times as ±30 % on a shared machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from speed import CALIBRATION_POOL, TRAINING_ROWS, build_workload, fresh_explainer
from speed.harness import header, publish, row, timed

from cpdecomp.core.recalibration import compare_calibrations

D, N_CALIBRATION, BACKGROUND, ALPHA = 12, 1000, 1000, 0.1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=200, help="bootstrap replicates")
    parser.add_argument("--patients", type=int, default=1000, help="patients explained")
    parser.add_argument("--repeats", type=int, default=5, help="side-by-side repeats")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    workload = build_workload(D)
    first = workload.system(N_CALIBRATION)
    # The other set: as many rows from past the calibration pool; the patients after those.
    start = TRAINING_ROWS + CALIBRATION_POOL
    other = workload.fitted.conformalize(workload.table.iloc[start:start + N_CALIBRATION],
                                         workload.y[start:start + N_CALIBRATION])
    patients = workload.table.iloc[start + N_CALIBRATION:start + N_CALIBRATION + args.patients]
    rows = workload.fitted.encode(patients)

    def baseline() -> None:
        fresh_explainer(first, BACKGROUND).explain_rows(
            rows, alpha=ALPHA, calibration_bootstrap=args.replicates)

    def comparison() -> None:
        compare_calibrations(workload.fitted, {"A": first, "B": other}, patients, alpha=ALPHA,
                             calibration_bootstrap=args.replicates,
                             explainer=fresh_explainer(first, BACKGROUND))

    comparison()  # compile the kernels and warm the libraries once, untimed
    baseline_s, comparison_s = [], []
    for repeat in range(args.repeats):
        # Alternate which goes first, so a machine that speeds up or slows down during a
        # repeat does not favour one side.
        order = (baseline, comparison) if repeat % 2 == 0 else (comparison, baseline)
        for run in order:
            seconds = timed(run)[0]
            (baseline_s if run is baseline else comparison_s).append(seconds)
    base, compared = statistics.median(baseline_s), statistics.median(comparison_s)
    ratios = sorted(c / b for c, b in zip(comparison_s, baseline_s, strict=True))
    lines = [
        "# Recalibration: comparing two calibration sets against one set's bootstrap run", "",
        f"d = {D}, n = {N_CALIBRATION} rows per set, m = {BACKGROUND}, {args.patients} patients, "
        f"exact Shapley, normalized family, gbm, width units; {args.replicates} resamples of "
        f"each set; median of {args.repeats} side-by-side repeats (alternating, each from a "
        f"cold explainer); {datetime.now(UTC):%Y-%m-%d %H:%M} UTC. Command: `python "
        f"benchmarks/recalibration.py --out docs/benchmarks/recalibration.md`.", "",
        *header("what", "median", "× the baseline"),
        row(f"baseline: one set's explain, calibration_bootstrap = {args.replicates}",
            f"{base:.3f} s", "1.00"),
        row("compare_calibrations of that set and another, same bootstrap",
            f"{compared:.3f} s", f"{compared / base:.2f}"),
        row("ratio per repeat (low to high)", "",
            ", ".join(f"{r:.2f}" for r in ratios)), "",
        f"Target: the comparison ≤ 2× the baseline ({'met' if compared / base <= 2 else 'missed'}"
        f"). The two sets share the fitted models, the background's tree tables, the design "
        "and the instance game (evaluated once per chunk of patients); each set adds its own "
        "calibration game and resamples, and every set its decomposition of the patients.",
    ]
    publish("\n".join(lines) + "\n", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How close a run's estimate (Explainer.estimate, what `--max-seconds` and the "expected to take"
line read) comes to the run's own time, and what the groups' path saves the dashboard.

    python benchmarks/estimate.py [--patients 2000] [--repeats 3] [--out FILE.md]

Workload: the speed benchmark's data (benchmarks/speed/workload.py: synthetic heteroscedastic
data, gradient boosting), n = 1,000 calibration rows, m = 100 background rows, exact Shapley,
width units. Per configuration and repeat, from a cold explainer (a memory-only cache, tree
tables built by the estimate's own probe, as in a CLI run): the estimate, then the run it
estimates (`explain_rows`, one process), timed. Each row gives the median estimate ÷ actual
over the repeats (1 is exact; the estimate is a probe of 64 rows, so read ±30 % on a shared
machine) and, beside it, the rule before 2026-12-07 (every cell at the masking's pace, no
scores, sorts or Shapley sums, its probe warmed on two combinations), reconstructed here on a
cold explainer of its own.

The last table is the dashboard's run (exact, fixed-q̂ view, CQR at d = 16): before
2026-12-07 the fixed-q̂ view sent every patient through the 2^d lattice; now it keeps the
trees' leaf groups, since on CQR's identity scale that view's game is v_I plus a constant.
Both sides in one process, alternating; the lattice side is forced with
GROUP_SHAPLEY_PLAYERS above d, as the tests do.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from speed import SEED, TRAINING_ROWS, fresh_explainer, make_data
from speed.harness import header, load_text, publish, row, timed

from cpdecomp import Explainer, fit_system
from cpdecomp.core.explainer import PROBE_ROWS
from cpdecomp.core.games import instance
from cpdecomp.core.progress import unmetered
from cpdecomp.core.system import ConformalSystem

N_CALIBRATION, BACKGROUND, ALPHA = 1000, 100, 0.1
CONFIGURATIONS = (  # (family, d, fixed-q̂ view): the paths a run can take
    ("cqr", 16, False), ("cqr", 16, True), ("cqr", 12, False), ("cqr", 8, False),
    ("normalized", 12, False), ("normalized", 8, False))


def system(family: str, d: int) -> tuple[ConformalSystem, np.ndarray]:
    """The fitted and calibrated system, and the encoded patient pool."""
    table, y = make_data(d)
    fitted = fit_system(table.iloc[:TRAINING_ROWS], y[:TRAINING_ROWS], family=family,
                        model="gbm", seed=SEED)
    start = TRAINING_ROWS
    calibrated = fitted.conformalize(table.iloc[start:start + N_CALIBRATION],
                                     y[start:start + N_CALIBRATION])
    return calibrated, fitted.encode(table.iloc[start + N_CALIBRATION:])


def old_rule(explainer: Explainer, n_patients: int) -> float:
    """The estimate before 2026-12-07 on a cold explainer of its own: every cell (calibration
    and patients) at the masking probe's pace, the probe timed as it was then (warmed on two
    combinations only, so the combinations' own tables were built inside the timing)."""
    design = explainer.design("exact", None, None)
    names = explainer.system.family.components
    rows = explainer.system.calibration_rows[:PROBE_ROWS]
    with unmetered():
        explainer.evaluator.evaluate_by_row(design.coalitions[:2], rows[:1], names)
        started = time.perf_counter()
        explainer.evaluator.evaluate_by_row(design.coalitions, rows, names)
        pace = (time.perf_counter() - started) / (len(design.coalitions) * len(rows))
    return pace * len(design.coalitions) * (explainer.system.n_calibration + n_patients)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patients", type=int, default=2000, help="patients explained")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per configuration")
    parser.add_argument("--out", type=Path, default=None, help="also write the tables here")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    systems = {(family, d): system(family, d) for family, d, _ in CONFIGURATIONS}
    for calibrated, pool in systems.values():  # kernels compiled, untimed
        fresh_explainer(calibrated, BACKGROUND).explain_rows(pool[:3], alpha=ALPHA)
    lines = [
        "# A run's estimate against the run", "",
        f"n = {N_CALIBRATION:,} calibration rows, m = {BACKGROUND} background rows, "
        f"{args.patients:,} patients, exact Shapley, gbm, width units; median of "
        f"{args.repeats} repeats, each from a cold explainer (calibration game included); "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load before {load_text(load_before)}. "
        "Command: `python benchmarks/estimate.py --out docs/benchmarks/estimate.md`.", "",
        *header("family", "d", "fixed-q̂ view", "patients' φ_I from", "estimate", "run",
                "estimate ÷ run", "old rule ÷ run"),
    ]
    for family, d, fixed in CONFIGURATIONS:
        calibrated, pool = systems[(family, d)]
        patients = pool[:args.patients]
        estimates, runs, olds, path = [], [], [], ""
        for _ in range(args.repeats):
            explainer = fresh_explainer(calibrated, BACKGROUND)
            estimate = explainer.estimate(len(patients), fixed_quantile=fixed)
            olds.append(old_rule(fresh_explainer(calibrated, BACKGROUND), len(patients)))
            seconds = timed(explainer.explain_rows, patients, alpha=ALPHA,
                            fixed_quantile=fixed)[0]
            estimates.append(estimate.seconds)
            runs.append(seconds)
            path = estimate.instance_path
        ratio = statistics.median(e / r for e, r in zip(estimates, runs, strict=True))
        old = statistics.median(o / r for o, r in zip(olds, runs, strict=True))
        lines.append(row(family, d, "yes" if fixed else "no", path,
                         f"{statistics.median(estimates):.2f} s",
                         f"{statistics.median(runs):.2f} s", f"{ratio:.2f}", f"{old:.2f}"))

    # The dashboard's run: fixed-q̂ view, CQR at d = 16, lattice against groups.
    calibrated, pool = systems[("cqr", 16)]
    patients = pool[:args.patients]
    explainers = {}
    for side in ("lattice", "groups"):
        explainers[side] = fresh_explainer(calibrated, BACKGROUND)
        explainers[side].explain_rows(patients[:1], alpha=ALPHA, fixed_quantile=True)
    seconds: dict[str, list[float]] = {"lattice": [], "groups": []}
    threshold = instance.GROUP_SHAPLEY_PLAYERS
    for repeat in range(args.repeats):
        order = ("lattice", "groups") if repeat % 2 == 0 else ("groups", "lattice")
        for side in order:
            instance.GROUP_SHAPLEY_PLAYERS = 99 if side == "lattice" else threshold
            try:
                seconds[side].append(timed(explainers[side].explain_rows, patients,
                                           alpha=ALPHA, fixed_quantile=True)[0])
            finally:
                instance.GROUP_SHAPLEY_PLAYERS = threshold
    lattice, groups = (statistics.median(seconds[s]) for s in ("lattice", "groups"))
    lines += [
        "", "## The dashboard's run: CQR, d = 16, with the fixed-q̂ view", "",
        f"{args.patients:,} patients after the calibration game (computed once per side, "
        f"untimed); median of {args.repeats} alternating repeats; load after "
        f"{load_text(os.getloadavg())}.", "",
        *header("patients' φ_I from", "median", "per patient", "× the groups"),
        row("the 2^16 lattice (before)", f"{lattice:.2f} s",
            f"{1e3 * lattice / len(patients):.2f} ms", f"{lattice / groups:.1f}"),
        row("the trees' leaf groups (now)", f"{groups:.2f} s",
            f"{1e3 * groups / len(patients):.2f} ms", "1.0"),
    ]
    publish("\n".join(lines) + "\n", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Run the speed benchmark: `python benchmarks/speed [--quick] [--out FILE]`."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

# Run as `python benchmarks/speed`, this folder is sys.path[0]: benchmarks/ goes first, so the
# package imports as `speed` and user_models beside it as `user_models`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before any OpenMP runtime loads

import numba
import user_models

import speed
from speed.harness import ROOT, core_change, core_fingerprint, describe_machine, log, publish
from speed.hotspots import profile_patient
from speed.measures import measure_cell
from speed.plan import full_plan, quick_plan
from speed.render import Report, render
from speed.workload import Workload, build_workload, warm_up

DEFAULT_OUT = ROOT / "docs" / "benchmarks" / "speed.md"


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(speed.__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small grid (about 1-2 min)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="markdown file to write")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    plan = quick_plan() if args.quick else full_plan()
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join(["python", *(sys.argv if argv is None else ["benchmarks/speed", *argv])])
    clock = time.perf_counter()
    machine = describe_machine()
    fingerprint = core_fingerprint()
    log("warming up numba kernels")
    machine.warmup_s = warm_up()
    machine.numba_layer = numba.threading_layer()
    report = Report(machine, plan, command, started)
    workloads: dict[int, Workload] = {}
    for cell in plan.cells:
        if cell.d not in workloads:
            log(f"fitting f and sigma at d={cell.d}")
            workloads[cell.d] = build_workload(cell.d)
        report.results.append(measure_cell(workloads[cell.d], cell, plan))
    log("profiling single-patient calls")
    report.profile = profile_patient(workloads[plan.profile_cell.d], plan.profile_cell, 100)
    log("models you bring: XGBoost, LightGBM, a Pipeline, against shap's TreeExplainer")
    report.user_models = user_models.measure_all(plan.quick)
    machine.load_after = os.getloadavg()
    machine.core_changed = core_change(fingerprint)
    report.elapsed_s = time.perf_counter() - clock
    publish(render(report), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Cohort scale through the command line: streamed output, memory and throughput by cohort
size, and --jobs / a Dask LocalCluster against one process.

    python benchmarks/scale.py [--sizes 10000,100000] [--out FILE.md]
                               [--scaleout-size N] [--scaleout-only]

Workload: the speed benchmark's synthetic data (benchmarks/speed/workload.py) at d = 12, with
separate training (3,000 rows) and calibration (1,000 rows) files, so DATA is the cohort; gbm
for f and σ, normalized family, exact Shapley, Parquet output. Every run is its own `cpdecomp
explain` process: peak RSS is that process's ru_maxrss (os.wait4), CPU its user + system time,
so the sizes compare side by side in one run. The scale-out rows explain the largest size up to
10^5 (or --scaleout-size) with one process, `--jobs 2` and a 2-worker LocalCluster on
127.0.0.1, counting the workers' CPU too (sampled from their process tree while they run), and
split into the command's own CPU and its workers'; --scaleout-only skips the sizes' rows.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from speed import CALIBRATION_POOL, TRAINING_ROWS, make_data
from speed.harness import header, load_text, publish, row

D = 12


def write_inputs(folder: Path, sizes: Sequence[int]) -> dict[str, Path]:
    """Training, calibration and one cohort file per size (Parquet)."""
    table, y = make_data(D)
    table["y"] = y
    paths = {"train": folder / "train.parquet", "calibration": folder / "calibration.parquet"}
    table.iloc[:TRAINING_ROWS].to_parquet(paths["train"], index=False)
    table.iloc[TRAINING_ROWS:TRAINING_ROWS + CALIBRATION_POOL].to_parquet(
        paths["calibration"], index=False)
    rng = np.random.default_rng(1)
    features = [c for c in table.columns if c != "y"]
    for size in sizes:
        cohort = pd.DataFrame(rng.normal(size=(size, D)), columns=features)
        cohort["x3"] = (cohort["x3"] > 0.3).astype(float)
        cohort.to_parquet(folder / f"cohort_{size}.parquet", index=False)
        paths[f"cohort_{size}"] = folder / f"cohort_{size}.parquet"
    return paths


def run(argv: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS MiB) of one command line process."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as errors:
        child = subprocess.Popen([sys.executable, "-m", "cpdecomp", *argv, "-q"], stderr=errors)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        if status != 0:
            errors.seek(0)
            raise RuntimeError(f"cpdecomp failed ({status}): {errors.read()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def tree_cpu(process: psutil.Process) -> float:
    """User + system seconds of a process and its live descendants."""
    total = 0.0
    for member in (process, *process.children(recursive=True)):
        try:
            times = member.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def run_tree(argv: list[str], cluster_workers: Sequence[psutil.Process] = ()
             ) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds of the command, its worker processes and the given cluster
    workers, CPU seconds of the command alone) of one command line process: worker processes
    exit before the command does, so their CPU is sampled while they run."""
    before = sum(tree_cpu(worker) for worker in cluster_workers)
    started = time.perf_counter()
    child = psutil.Popen([sys.executable, "-m", "cpdecomp", *argv, "-q"],
                         stderr=subprocess.DEVNULL)
    seen: dict[int, float] = {}
    while child.poll() is None:
        for member in (child, *child.children(recursive=True)):
            try:
                times = member.cpu_times()
            except psutil.Error:
                continue
            seen[member.pid] = times.user + times.system
        time.sleep(0.1)
    wall = time.perf_counter() - started
    if child.returncode != 0:
        raise RuntimeError(f"cpdecomp failed ({child.returncode})")
    after = sum(tree_cpu(worker) for worker in cluster_workers)
    return wall, sum(seen.values()) + after - before, seen.get(child.pid, 0.0)


def explain(paths: dict[str, Path], size: int, out: Path, *extra: str) -> list[str]:
    return ["explain", str(paths[f"cohort_{size}"]), "--target", "y", "--train",
            str(paths["train"]), "--calibration", str(paths["calibration"]), "--background",
            "1000", "--max-rows", str(max(size, 10_000)), "--out", str(out), *extra]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="cohort sizes to explain")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    parser.add_argument("--scaleout-size", type=int, default=None,
                        help="patients of the scale-out rows (default: the largest size up to "
                        "10^5)")
    parser.add_argument("--scaleout-only", action="store_true",
                        help="only the scale-out rows (after one warming run)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    size = args.scaleout_size or min(max(sizes), 100_000)
    previous_cache = os.environ.get("CPDECOMP_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="cpdecomp-scale-") as tmp:
        folder = Path(tmp)
        os.environ["CPDECOMP_CACHE_DIR"] = str(folder / "cache")  # warm after the first run
        paths = write_inputs(folder, sorted({1, *sizes, size}))
        run(explain(paths, sizes[0], folder / "warm.parquet"))  # JIT and the calibration game
        # What every run pays whatever its size (imports, reading, fitting f and sigma): one
        # patient. The explaining rate is taken after it, so sizes compare on the work that grows.
        _, fixed_cpu, fixed_rss = run(explain(paths, 1, folder / "one.parquet"))
        lines = [
            "# Cohort scale through the command line", "",
            f"d = {D}, gbm, normalized, exact Shapley, background 1,000, Parquet output, the "
            f"calibration game from the disk cache; {os.cpu_count()} cores; "
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average (1/5/15 min) "
            f"{load_text(os.getloadavg())} at the start.", "",
            f"A one-patient run costs {fixed_cpu:.1f} CPU-s and {fixed_rss:.0f} MiB (imports, "
            "reading, fitting): *patients / CPU-second* is over the CPU above it.", "",
            *header("run", "patients", "wall", "CPU", "patients / CPU-second", "peak RSS",
                    "RSS above the first size"),
        ]
        first_rss = None
        for patients in () if args.scaleout_only else sizes:
            wall, cpu, rss = run(explain(paths, patients, folder / f"out_{patients}.parquet"))
            first_rss = rss if first_rss is None else first_rss
            lines.append(row("one process", f"{patients:,}", f"{wall:.1f} s", f"{cpu:.1f} s",
                             f"{(patients - 1) / max(cpu - fixed_cpu, 1e-9):,.0f}",
                             f"{rss:.0f} MiB", f"{rss - first_rss:+.0f} MiB"))
            print(lines[-1], flush=True)
        lines += ["", f"Scale-out on {size:,} patients, side by side (wall time and the CPU of "
                  "the command and every worker process; the command's own share beside it):",
                  "", *header("run", "wall", "CPU", "of it the command's", "CPU per 1,000 patients",
                              "speed-up (wall)", "load average at the start")]
        out = folder / "jobs.parquet"
        rows = []

        def measure(label: str, argv: list[str],
                    cluster_workers: Sequence[psutil.Process] = ()) -> None:
            load = load_text(os.getloadavg())
            wall, cpu, own = run_tree(argv, cluster_workers)
            rows.append((label, wall, cpu, own, load))
            base_wall = rows[0][1]
            lines.append(row(label, f"{wall:.1f} s", f"{cpu:.1f} s", f"{own:.1f} s",
                             f"{1000 * cpu / size:.2f} s", f"{base_wall / wall:.2f}×", load))
            print(lines[-1], flush=True)

        measure("one process", explain(paths, size, out))
        measure("--jobs 2", explain(paths, size, out, "--jobs", "2"))
        try:
            from dask.distributed import LocalCluster
        except ModuleNotFoundError:
            lines.append(row("LocalCluster", "not run: dask is not installed", "", "", "", "",
                             ""))
        else:
            with LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1",
                              dashboard_address=None, processes=True) as cluster:
                workers = psutil.Process().children(recursive=True)
                measure("2-worker LocalCluster",
                        explain(paths, size, out, "--scheduler", cluster.scheduler_address),
                        workers)
    if previous_cache is None:  # this process's environment as it was
        os.environ.pop("CPDECOMP_CACHE_DIR", None)
    else:
        os.environ["CPDECOMP_CACHE_DIR"] = previous_cache
    publish("\n".join(lines) + "\n", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

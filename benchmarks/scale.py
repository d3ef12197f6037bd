"""Cohort scale through the command line: streamed output, memory and throughput by cohort
size, and --jobs / a Dask LocalCluster against one process.

    python benchmarks/scale.py [--sizes 10000,100000] [--out FILE.md]

Workload: the speed benchmark's synthetic data (benchmarks/speed.py) at d = 12, with separate
training (3,000 rows) and calibration (1,000 rows) files, so DATA is the cohort; gbm for f and
σ, normalized family, exact Shapley, Parquet output. Every run is its own `cpdecomp explain`
process: peak RSS is that process's ru_maxrss (os.wait4), CPU its user + system time, so the
sizes compare side by side in one run. The scale-out rows explain the first size with
`--jobs 1`, `--jobs 2` and a 2-worker LocalCluster on 127.0.0.1.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from speed import CALIBRATION_POOL, TRAINING_ROWS, make_data, publish

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
        child = subprocess.Popen([sys.executable, "-m", "core.cli", *argv, "-q"], stderr=errors)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        if status != 0:
            errors.seek(0)
            raise RuntimeError(f"cpdecomp failed ({status}): {errors.read()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def explain(paths: dict[str, Path], size: int, out: Path, *extra: str) -> list[str]:
    return ["explain", str(paths[f"cohort_{size}"]), "--target", "y", "--train",
            str(paths["train"]), "--calibration", str(paths["calibration"]), "--background",
            "1000", "--max-rows", str(max(size, 10_000)), "--out", str(out), *extra]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="cohort sizes to explain")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    previous_cache = os.environ.get("CPDECOMP_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="cpdecomp-scale-") as tmp:
        folder = Path(tmp)
        os.environ["CPDECOMP_CACHE_DIR"] = str(folder / "cache")  # warm after the first run
        paths = write_inputs(folder, [1, *sizes])
        run(explain(paths, sizes[0], folder / "warm.parquet"))  # JIT and the calibration game
        # What every run pays whatever its size (imports, reading, fitting f and sigma): one
        # patient. The explaining rate is taken after it, so sizes compare on the work that grows.
        _, fixed_cpu, fixed_rss = run(explain(paths, 1, folder / "one.parquet"))
        lines = [
            "# Cohort scale through the command line", "",
            f"d = {D}, gbm, normalized, exact Shapley, background 1,000, Parquet output, the "
            f"calibration game from the disk cache; {os.cpu_count()} cores; "
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average "
            f"{os.getloadavg()[0]:.1f} at the start.", "",
            f"A one-patient run costs {fixed_cpu:.1f} CPU-s and {fixed_rss:.0f} MiB (imports, "
            "reading, fitting): *patients / CPU-second* is over the CPU above it.", "",
            "| run | patients | wall | CPU | patients / CPU-second | peak RSS | "
            "RSS above the first size |", "|---|---|---|---|---|---|---|",
        ]
        first_rss = None
        for size in sizes:
            wall, cpu, rss = run(explain(paths, size, folder / f"out_{size}.parquet"))
            first_rss = rss if first_rss is None else first_rss
            lines.append(f"| one process | {size:,} | {wall:.1f} s | {cpu:.1f} s | "
                         f"{(size - 1) / max(cpu - fixed_cpu, 1e-9):,.0f} | {rss:.0f} MiB | "
                         f"{rss - first_rss:+.0f} MiB |")
            print(lines[-1], flush=True)
        size = sizes[0]
        for label, extra in (("--jobs 1", ["--jobs", "1"]), ("--jobs 2", ["--jobs", "2"])):
            wall, cpu, rss = run(explain(paths, size, folder / "jobs.parquet", *extra))
            lines.append(f"| {label} | {size:,} | {wall:.1f} s | {cpu:.1f} s (parent only) | "
                         f"— | {rss:.0f} MiB | |")
            print(lines[-1], flush=True)
        try:
            from dask.distributed import LocalCluster
        except ModuleNotFoundError:
            lines.append("| LocalCluster | — | not run: dask is not installed | | | | |")
        else:
            with LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1",
                              dashboard_address=None, processes=True) as cluster:
                wall, cpu, rss = run(explain(paths, size, folder / "dask.parquet",
                                             "--scheduler", cluster.scheduler_address))
            lines.append(f"| 2-worker LocalCluster | {size:,} | {wall:.1f} s | {cpu:.1f} s "
                         f"(client only) | — | {rss:.0f} MiB | |")
            print(lines[-1], flush=True)
    if previous_cache is None:  # this process's environment as it was
        os.environ.pop("CPDECOMP_CACHE_DIR", None)
    else:
        os.environ["CPDECOMP_CACHE_DIR"] = previous_cache
    lines += ["", "CPU of --jobs and the cluster counts the parent (or client) process only: the "
              "workers' time is not in it, so compare their wall times."]
    publish("\n".join(lines) + "\n", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

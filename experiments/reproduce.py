"""Run the three claims' experiments and the calibration-faults setting, and write tables, a
markdown summary and one HTML report.

    python -m experiments.reproduce --quick --out results/
    cpdecomp reproduce --quick --out results/          # the same, once wired into the CLI

Every random choice (splits, simulated outcomes, backgrounds, designs, bootstraps) derives from
`seed`, so a rerun with the same seed and library versions writes the same numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from cpdecomp.core.versions import library_versions
from experiments import (
    calibration_faults,
    decision_task,
    figures,
    identity_grid,
    sign_opposition,
    summary,
)
from experiments.calibration_faults import FaultResults
from experiments.config import FULL, QUICK, ExperimentConfig
from experiments.decision_task import DecisionResults
from experiments.identity_grid import GridResults
from experiments.sign_opposition import SignResults
from experiments.verdicts import all_verdicts

CACHE_ENV = "CPDECOMP_CACHE_DIR"

Progress = Callable[[str], None]


@contextmanager
def memory_only_game_cache() -> Iterator[None]:
    """Keep calibration games in memory for the run, unless the user chose a cache directory.

    A run fits hundreds of systems whose games are never asked for again; writing each to the
    disk cache would fill gigabytes for nothing.
    """
    chosen = os.environ.get(CACHE_ENV)
    if chosen is None:
        os.environ[CACHE_ENV] = ""
    try:
        yield
    finally:
        if chosen is None:
            os.environ.pop(CACHE_ENV, None)


def command_line(config: ExperimentConfig, seed: int) -> str:
    if config.name not in ("quick", "full"):
        return f"experiments.reproduce.run_config(out_dir, {config.name.upper()})"
    flags = " --quick" if config.name == "quick" else ""
    seed_flag = f" --seed {seed}" if seed else ""
    return f"cpdecomp reproduce{flags}{seed_flag} --out DIR"


def run(out_dir: Path, quick: bool, seed: int = 0, progress: Progress | None = None) -> dict:
    """Run the quick (CI-sized, a few minutes) or the full reproduction into out_dir."""
    return run_config(Path(out_dir), QUICK if quick else FULL, seed, progress)


def run_config(out_dir: Path, config: ExperimentConfig, seed: int = 0,
               progress: Progress | None = None) -> dict:
    """Run the experiments at the given size; returns the verdicts, files and timings."""
    say = progress or (lambda message: None)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    timings = {}
    cpu_started = time.process_time()
    # Each claim's tables are written as soon as it finishes, so a run stopped part way
    # leaves the finished claims' tables (run.json and summary.md come at the end).
    tables: dict[str, pd.DataFrame] = {}

    def finished(claim: str, started: float, produced: dict[str, pd.DataFrame]) -> None:
        timings[claim] = time.perf_counter() - started
        for name, table in produced.items():
            write_csv(table, out_dir / name)
        tables.update(produced)

    with memory_only_game_cache():
        started = time.perf_counter()
        decision = decision_task.run(config, seed, say)
        finished("claim 2", started, {
            "claim2_scores.csv": decision.scores,
            "claim2_comparisons.csv": decision.comparisons,
            "claim2_units.csv": decision.units,
            "claim2_calibration_offsets.csv": decision.offsets,
        })
        started = time.perf_counter()
        grid = identity_grid.run(config, seed, say)
        finished("claim 3", started, {"claim3_identity_grid.csv": grid.grid,
                                      "claim3_negative_controls.csv": grid.controls})
        started = time.perf_counter()
        sign = sign_opposition.run(config, seed, say)
        finished("claim 1", started, {
            "claim1_sign_opposition.csv": sign.summary,
            "claim1_sign_opposition_resplits.csv": sign.raw,
            "claim1_synthetic_check.csv": sign.check,
            "claim1_null_subtracted.csv": sign.null_subtracted,
            "claim1_calibration_signs.csv": sign.calibration_signs,
        })
        started = time.perf_counter()
        faults = calibration_faults.run(config, seed, say)
        finished("calibration faults", started, calibration_faults.tables(faults))
    say("writing tables and report")
    # Wall time depends on what else the machine runs; CPU time of this process does not.
    cpu = time.process_time() - cpu_started
    return publish(out_dir, config, seed, sign, decision, grid, timings, cpu, list(tables),
                   faults)


def publish(out_dir: Path, config: ExperimentConfig, seed: int, sign: SignResults,
            decision: DecisionResults, grid: GridResults, timings: dict[str, float],
            cpu: float, tables: list[str], faults: FaultResults | None = None) -> dict:
    """Verdicts, summary.md, report.html and run.json from the claims' results (and the
    calibration-faults setting's, when it ran)."""
    verdicts = all_verdicts(sign, decision, grid)
    if faults is not None:
        verdicts.append(calibration_faults.verdict(faults))
    versions = library_versions()
    total = sum(timings.values())
    header = [
        f"Command: `{command_line(config, seed)}` ({config.name} configuration, seed {seed}); "
        f"ran in {total / 60:.1f} min wall clock, {cpu / 60:.1f} min CPU time of this process, "
        f"on {os.cpu_count()} cores.",
        "",
        "Library versions: " + ", ".join(f"{k} {v}" for k, v in versions.items())
        + f", plotly {_version('plotly')}, Python {platform.python_version()}.",
        "",
        "Figures: `report.html` (self-contained). Tables: the CSV files beside this summary.",
    ]
    extra = [] if faults is None else [calibration_faults.section(faults, config)]
    text = summary.render(verdicts, sign, decision, grid, config, header, extra)
    (out_dir / "summary.md").write_text(text, encoding="utf-8")
    figures.write_report(out_dir / "report.html", "cpdecomp: reproducing the paper's claims", [
        ("Verdicts", "\n".join(f"{v.claim}: {v.status}" for v in verdicts), None),
        ("Claim 1: pooled sign opposition", "\n".join(verdicts[0].evidence),
         figures.pooled_shares(sign)),
        ("Claim 1: real features minus null columns", "", figures.null_subtracted(sign)),
        ("Claim 1: per feature", "", figures.per_feature_shares(sign)),
        ("Claim 1: reversals", "", figures.reversal_scatter(sign)),
        ("Claim 2: decision task", "\n".join(verdicts[1].evidence),
         figures.decision_units(decision)),
        ("Claim 3: identity grid", "\n".join(verdicts[2].evidence),
         figures.identity_heatmap(grid)),
        ("Claim 3: negative controls", "", figures.negative_controls(grid)),
        *([] if faults is None else [
            ("Calibration faults: recalibrate or re-measure", "\n".join(verdicts[3].evidence),
             None)]),
        ("About this run", "\n".join(header) + "\n" + summary.PNG_NOTE, None),
    ])
    meta = {
        "command": command_line(config, seed), "config": config.name, "seed": seed,
        "seconds": timings, "cpu_seconds": cpu, "versions": versions,
        "python": platform.python_version(),
        "verdicts": {v.claim: v.status for v in verdicts},
        "png": "not written: " + summary.PNG_NOTE,
        "files": sorted([*tables, "summary.md", "report.html", "run.json"]),
    }
    (out_dir / "run.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return {**meta, "out_dir": str(out_dir), "verdict_details": verdicts}


def write_csv(table: pd.DataFrame, path: Path) -> None:
    """Numbers to 6 significant digits: the tables are read by people, kept small in git."""
    table.to_csv(path, index=False, float_format="%.6g")


def _version(name: str) -> str:
    try:
        from importlib import metadata

        return metadata.version(name)
    except Exception:
        return "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.reproduce",
        description="Reproduce the paper's three empirical claims into a directory.")
    parser.add_argument("--quick", action="store_true", help="CI-sized run (a few minutes)")
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    result = run(args.out, args.quick, args.seed,
                 progress=lambda message: print(message, file=sys.stderr, flush=True))
    for claim, status in result["verdicts"].items():
        print(f"{claim}: {status}")
    print(f"wrote {args.out}/summary.md and report.html")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

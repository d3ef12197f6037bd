"""Recalibration: does Δφ_C's interval cover the population's change of the calibration part?

`cpdecomp compare` (core.recalibration) gives, per feature, Δφ_C = φ_C(B) − φ_C(A) between two
calibration sets of one fitted system, with a 90 % percentile interval from resampling both
sets independently. The interval claims to hold the change that the two *populations* the sets
were drawn from would give: the φ_C of an unlimited calibration set from B's population minus
that from A's. This simulation draws fresh sets from known populations, so the claim can be
counted.

World (oracle components, so no model error mixes in): four standard-normal features x0..x3,
f(x) = x0 + 0.5·x1, σ(x) = exp(0.3·x0 + 0.4·x2), y = f(x) + σ(x)·ε, ε ~ N(0, 1); x3 is used by
no component (a null player: its φ_C is 0 under every set, so it is left out of the counts;
so is x2 in the absolute family, whose only component, f, does not read it).
The fitted system is the oracle, its background 32 rows of a training draw from A's
population; exact Shapley, α = 0.1. Families: normalized (log units, where φ_C is one vector)
and absolute (width units).

Cells (B's population against A's, at n rows per set):
* "same population": B is drawn like A (the population change is 0);
* "noise grows with x2": B's y = f + σ·exp(0.5·x2)·ε (the residual scale grows with x2);
* "x0 moves": B's x0 ~ N(1, 1).
Per cell: `repetitions` pairs of fresh sets (default 200), each compared with
calibration_bootstrap = 200; the population change is the comparison of two sets of
`population_rows` rows each (default 200,000) on the same background, without a bootstrap.

Read per (cell, feature): the share of repetitions whose interval holds the population change
(nominal 90 %), with a 95 % Wilson interval over repetitions; the share whose interval holds 0
(the flag rate is one minus it); the mean interval width. A cell whose coverage interval lies
below 90 % is one where the claim loses, and is reported as such.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cpdecomp.core.explainer import Explainer
from cpdecomp.core.games.cache import GameCache
from cpdecomp.core.recalibration import compare_calibrations
from cpdecomp.core.system import FittedSystem, system_from_functions
from cpdecomp.core.typing import FloatArray
from experiments.resampling import share_interval

Progress = Callable[[str], None]

FEATURES = ("x0", "x1", "x2", "x3")
USED = {"normalized": ("x0", "x1", "x2"), "absolute": ("x0", "x1")}
"""Per family, the features some component reads; the others are null players (Δφ_C ≡ 0:
x3 everywhere, and x2 in the absolute family, whose one component f does not read it)."""
FAMILIES = {"normalized": "log", "absolute": "width"}
"""Family -> the units its comparison is read in (where φ_C is one vector for the cohort)."""
CELLS = ("same population", "noise grows with x2", "x0 moves")
SIZES = (100, 500)
ALPHA = 0.1
LEVEL = 0.9
BOOTSTRAP = 200
BACKGROUND = 32
REPETITIONS = 200
POPULATION_ROWS = 200_000
PATIENTS = 5
"""Patients each comparison explains (their φ_C is the cohort's one vector in these units)."""


def mean(x: FloatArray) -> FloatArray:
    return x[:, 0] + 0.5 * x[:, 1]


def sigma(x: FloatArray) -> FloatArray:
    return np.exp(0.3 * x[:, 0] + 0.4 * x[:, 2])


def draw(rng: np.random.Generator, n: int, cell: str = "same population"
         ) -> tuple[pd.DataFrame, FloatArray]:
    """n rows of A's population, or of B's in `cell`."""
    x = rng.normal(size=(n, len(FEATURES)))
    if cell == "x0 moves":
        x[:, 0] += 1.0
    scale = sigma(x) * (np.exp(0.5 * x[:, 2]) if cell == "noise grows with x2" else 1.0)
    y = mean(x) + scale * rng.normal(size=n)
    return pd.DataFrame(x, columns=list(FEATURES)), y


def oracle(family: str, rng: np.random.Generator) -> FittedSystem:
    """The world's oracle system; its training rows (the background's pool) come from A."""
    training, _ = draw(rng, 2000)
    functions = {"f": mean, "sigma": sigma} if family == "normalized" else {"f": mean}
    return system_from_functions(family, functions, training)


@dataclass(frozen=True, eq=False)
class CoverageResults:
    raw: pd.DataFrame
    """One row per (family, cell, n, repetition, feature)."""
    summary: pd.DataFrame
    """Per (family, cell, n, feature): coverage, holds-0 share, mean width, population Δ."""
    seconds: float


def run(repetitions: int = REPETITIONS, population_rows: int = POPULATION_ROWS,
        sizes: tuple[int, ...] = SIZES, families: tuple[str, ...] = tuple(FAMILIES),
        cells: tuple[str, ...] = CELLS, bootstrap: int = BOOTSTRAP, seed: int = 0,
        progress: Progress | None = None) -> CoverageResults:
    say = progress or (lambda message: None)
    started = time.perf_counter()
    rows: list[dict] = []
    for f, family in enumerate(families):
        units = FAMILIES[family]
        fitted = oracle(family, np.random.default_rng((seed, 29, f)))
        patients, _ = draw(np.random.default_rng((seed, 30, f)), PATIENTS)
        reference_rows = draw(np.random.default_rng((seed, 31, f)), population_rows)
        # One background, one masking evaluator and one design for every comparison of the
        # family: only the calibration sets change, as in a real recalibration.
        explainer = Explainer(fitted.conformalize(*reference_rows), background_size=BACKGROUND,
                              seed=seed, cache=GameCache())
        for c, cell in enumerate(cells):
            b_rows = draw(np.random.default_rng((seed, 32, f, c)), population_rows, cell)
            truth = compare_calibrations(
                fitted, {"A": reference_rows, "B": b_rows}, patients, units=units,
                alpha=ALPHA, calibration_bootstrap=0, explainer=explainer).set("B").change[0]
            for n in sizes:
                say(f"recalibration coverage: {family}, {cell}, n = {n}")
                rng = np.random.default_rng((seed, 33, f, c, n))
                for repetition in range(repetitions):
                    sets = {"A": draw(rng, n), "B": draw(rng, n, cell)}
                    result = compare_calibrations(
                        fitted, sets, patients, units=units, alpha=ALPHA,
                        calibration_bootstrap=bootstrap, level=LEVEL, explainer=explainer,
                        seed=seed).set("B")
                    for j, feature in enumerate(FEATURES):
                        low, high = result.change_low[0, j], result.change_high[0, j]
                        rows.append({
                            "family": family, "units": units, "cell": cell, "n": n,
                            "repetition": repetition, "feature": feature,
                            "population_change": truth[j], "change": result.change[0, j],
                            "low": low, "high": high,
                            "covers": bool(low <= truth[j] <= high),
                            "holds_zero": bool(low <= 0 <= high),
                        })
    raw = pd.DataFrame(rows)
    return CoverageResults(raw, summarise(raw), time.perf_counter() - started)


def used_rows(raw: pd.DataFrame) -> pd.DataFrame:
    """The rows of features some component of the row's family reads."""
    return raw[[feature in USED[family] for family, feature in zip(raw["family"],
                                                                     raw["feature"], strict=True)]]


def summarise(raw: pd.DataFrame) -> pd.DataFrame:
    out = []
    used = used_rows(raw)
    for (family, cell, n, feature), group in used.groupby(["family", "cell", "n", "feature"],
                                                          sort=False):
        covers = share_interval(group["covers"].to_numpy())
        zero = share_interval(group["holds_zero"].to_numpy())
        out.append({
            "family": family, "units": group["units"].iloc[0], "cell": cell, "n": n,
            "feature": feature, "repetitions": len(group),
            "population_change": float(group["population_change"].iloc[0]),
            "mean_change": float(group["change"].mean()),
            "mean_width": float((group["high"] - group["low"]).mean()),
            "coverage": covers.estimate, "coverage_low": covers.low,
            "coverage_high": covers.high,
            "holds_zero": zero.estimate, "holds_zero_low": zero.low,
            "holds_zero_high": zero.high,
            "loses": bool(covers.high < LEVEL),
        })
    return pd.DataFrame(out)


def section(results: CoverageResults) -> str:
    """The markdown page of this simulation (docs/results/recalibration.md)."""
    from experiments.summary import markdown_table

    s = results.summary
    reps = int(s["repetitions"].max()) if len(s) else 0
    losing = s[s["loses"]]
    used = used_rows(results.raw)
    pooled = share_interval(used["covers"].to_numpy())
    same = used[used["cell"] == "same population"]
    null_zero = share_interval(same["holds_zero"].to_numpy())
    lines = [
        "# Recalibration: coverage of Δφ_C's interval", "",
        "Generated by `python -m experiments.recalibration --out docs/results` "
        f"({reps} repetitions per cell, {results.seconds / 60:.1f} min); the setting and its "
        "reading are in experiments/recalibration.py. Each repetition draws two fresh "
        "calibration sets (A from the reference population, B from the cell's), compares them "
        f"with `compare_calibrations` ({BOOTSTRAP} resamples of each set, each on its own "
        f"stream, {LEVEL:.0%} percentile interval) and asks whether the interval holds the "
        f"population change (two sets of {POPULATION_ROWS:,} rows on the same background). "
        "Coverage and 'holds 0' are shares of repetitions with 95 % Wilson intervals; "
        "features no component reads (x3; x2 in the absolute family), whose Δφ_C is exactly 0, "
        "are left out.", "",
        f"Pooled over every cell and feature: coverage {pooled.text(percent=True)} "
        f"(nominal {LEVEL:.0%}). Same population: the interval holds 0 in "
        f"{null_zero.text(percent=True)} of (repetition, feature) pairs.", "",
        "Cells where the claim loses (the coverage's upper 95 % end below 90 %): "
        + ("none." if losing.empty else ", ".join(
            f"{r.family} / {r.cell} / n = {r.n} / {r.feature} ({r.coverage:.0%})"
            for r in losing.itertuples())), "",
    ]
    table = markdown_table(
        ["family (units)", "B's population", "n per set", "feature", "population Δφ_C",
         "mean Δφ_C", "mean interval width", "coverage", "holds 0"],
        [[f"{r.family} ({r.units})", r.cell, r.n, r.feature, f"{r.population_change:+.4f}",
          f"{r.mean_change:+.4f}", f"{r.mean_width:.4f}",
          f"{r.coverage:.0%} [{r.coverage_low:.0%}, {r.coverage_high:.0%}]"
          + (" (loses)" if r.loses else ""),
          f"{r.holds_zero:.0%} [{r.holds_zero_low:.0%}, {r.holds_zero_high:.0%}]"]
         for r in s.itertuples()])
    return "\n".join([*lines, table, ""])


def main(argv: list[str] | None = None) -> int:
    """Run the simulation and write docs/results/recalibration.md and its table."""
    from experiments.reproduce import write_csv

    parser = argparse.ArgumentParser(prog="python -m experiments.recalibration",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repetitions", type=int, default=REPETITIONS)
    parser.add_argument("--population-rows", type=int, default=POPULATION_ROWS)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    results = run(args.repetitions, args.population_rows, seed=args.seed,
                  progress=lambda m: print(m, file=sys.stderr, flush=True))
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(results.summary, args.out / "recalibration_coverage.csv")
    (args.out / "recalibration.md").write_text(section(results), encoding="utf-8")
    print(f"recalibration coverage written to {args.out} in {results.seconds:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

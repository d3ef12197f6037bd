"""Budget against error: each sampled method measured against its exact value, over seeds.

    python -m experiments.convergence sample_data/diabetes.csv

prints the table in docs/attribution.md: games on the full lattice of 2^d coalitions (the
calibration game and some patients' instance and total games of a real conformal system), every
sampled method at several budgets and seeds, the root-mean-square error against exact Shapley
(exact Banzhaf for sampled Banzhaf), the mean reported standard error, and how often the error
is within two reported standard errors.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cpdecomp import Explainer, fit_system, load_table, split_rows, target_values
from cpdecomp.core.attribution import build_design
from cpdecomp.core.attribution.base import Design
from cpdecomp.core.coalitions import bits_from_coalitions
from cpdecomp.core.games import instance_values
from cpdecomp.core.typing import FloatArray

REFERENCE = {"banzhaf-sampled": "banzhaf"}
"""The exact method a sampled one estimates; exact Shapley when not listed."""

SAMPLED = ("permutation", "shap-permutation", "kernel", "shap-kernel", "banzhaf-sampled")
BUDGETS = {
    "permutation": (4, 16, 64, 256),
    "shap-permutation": (4, 16, 64, 256),
    "kernel": (64, 128, 256, 512),
    "shap-kernel": (64, 128, 256, 512),
    "banzhaf-sampled": (8, 32, 128, 512),
}


@dataclass(frozen=True)
class ErrorRow:
    """One method at one budget, over seeds and games."""

    method: str
    budget: int
    evaluations: float
    """Mean number of coalitions evaluated per game."""
    rmse: float
    mean_standard_error: float
    within_two: float
    """Fraction of attributions within two reported standard errors of the exact value."""


def on_lattice(design: Design, lattice: FloatArray) -> FloatArray:
    """The design's game values read from lattice values (..., 2^d), index = bitmask."""
    return lattice[..., bits_from_coalitions(design.coalitions)]


def exact_values(method: str, lattice: FloatArray, n_players: int) -> FloatArray:
    """The exact attributions a sampled `method` estimates."""
    design = build_design(REFERENCE.get(method, "exact"), n_players)
    return design.apply(on_lattice(design, lattice))


def error_by_budget(lattice: FloatArray, n_players: int, methods: Sequence[str] = SAMPLED,
                    budgets: dict[str, Sequence[int]] | None = None,
                    seeds: Sequence[int] = range(20)) -> list[ErrorRow]:
    """RMSE, mean standard error and two-SE coverage of each method at each budget."""
    budgets = BUDGETS if budgets is None else budgets
    rows = []
    for method in methods:
        exact = exact_values(method, lattice, n_players)
        for budget in budgets[method]:
            errors, errs, evaluations = [], [], []
            for seed in seeds:
                design = build_design(method, n_players, budget=budget, seed=seed)
                values = on_lattice(design, lattice)
                errors.append(design.apply(values) - exact)
                errs.append(design.standard_errors(values))
                evaluations.append(design.n_evaluations)
            error, se = np.array(errors), np.array(errs)
            rows.append(ErrorRow(
                method=method, budget=int(budget), evaluations=float(np.mean(evaluations)),
                rmse=float(np.sqrt(np.mean(error**2))), mean_standard_error=float(se.mean()),
                within_two=float(np.mean(np.abs(error) <= 2 * se)),
            ))
    return rows


def markdown(rows: Sequence[ErrorRow]) -> str:
    """The rows as a Markdown table."""
    lines = ["| method | budget | coalitions evaluated | RMSE | mean reported SE | "
             "within 2 SE |", "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.method} | {r.budget} | {r.evaluations:.0f} | {r.rmse:.4f} | "
                     f"{r.mean_standard_error:.4f} | {r.within_two:.0%} |")
    return "\n".join(lines)


def diabetes_lattice(path: str, n_patients: int = 5) -> tuple[FloatArray, int]:
    """Calibration, instance and total games of a normalized-family GBM system, on 2^d."""
    table = load_table(path)
    y = target_values(table, "progression")
    features = [c for c in table.columns if c not in ("patient_id", "progression")]
    train, cal, test = split_rows(len(table), (0.5, 0.25, 0.25), seed=0)
    system = fit_system(table.iloc[train], y[train], features, family="normalized", model="gbm")
    system = system.conformalize(table.iloc[cal], y[cal])
    explainer = Explainer(system, background_size=16)
    design = explainer.design("exact")
    order = np.argsort(bits_from_coalitions(design.coalitions))
    v_c = explainer.calibration_game("exact").values(0.1)
    rows = system.fitted.encode(table.iloc[test[:n_patients]])
    v_i = instance_values(system.family, explainer.evaluator, rows, design.coalitions)
    games = np.vstack([v_c[None, :], v_i, v_c[None, :] + v_i])
    return games[:, order], len(features)


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    lattice, d = diabetes_lattice(argv[0] if argv else "sample_data/diabetes.csv")
    print(f"d = {d}, {len(lattice)} games (calibration, 5 instance, 5 total), 20 seeds")
    print(markdown(error_by_budget(lattice, d)))


if __name__ == "__main__":
    main()

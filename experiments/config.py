"""How big a reproduction run is: resplits, alphas, data sets, bootstrap replicates.

`FULL` produced the results committed under docs/results; `QUICK` is the CI-sized run of
`cpdecomp reproduce --quick`; `TINY` only proves the pipeline runs end to end (tests).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class ExperimentConfig:
    """Sizes of the three experiments; every random choice derives from the run's seed."""

    name: str
    resplits: int
    """Seeded train/calibration/test resplits per data set (claims 1 and 2)."""
    decision_resplits: int
    """Resplits of the clinical decision task, each with a fresh simulated outcome."""
    alphas: tuple[float, ...]
    sign_datasets: tuple[str, ...]
    """Real samples for claim 1 (the synthetic cohort is always added)."""
    sign_families: tuple[str, ...]
    grid_datasets: tuple[str, ...]
    grid_patients: int
    """Patients explained per (data set, family, method) cell of the identity grid."""
    grid_rows: int
    """The grid subsamples each table to this many rows: it checks identities, not statistics,
    and the brute-force masking of the gamma family costs coalitions × calibration rows ×
    background rows model evaluations per design."""
    grid_background: int
    bootstrap: int
    model: str = "gbm"
    background: int | None = 64
    """Background rows of claim 2 (None: the library's choice, 1,000 with tree tables)."""
    sign_background: int | None = None
    """Background rows of claim 1's fitted systems; None: the library's choice, 1,000 where
    every component has tree tables or a closed form (all of claim 1's gbm systems)."""
    null_noise: int = 5
    """Claim 1's pure-noise columns (standard normal, redrawn every resplit)."""
    null_permuted: int = 3
    """Claim 1's permuted copies of real columns (a seeded choice of columns, re-permuted every
    resplit): same marginal as a real column, no relation to anything."""
    sign_method: str = "permutation"
    """With the null columns d reaches 20, past what exact Shapley affords per resplit; the
    sampled method's Monte Carlo errors decide which signs count."""
    sign_budget: int = 64
    calibration_bootstrap: int = 200
    """Replicates behind each φ_C's interval: a sign counts only where it excludes 0."""
    synthetic_rows: int = 2000
    max_rows: int | None = None
    """Subsample every table to this many rows (the tiny test configuration only)."""
    thresholds: tuple[float, ...] = (0.0, float(np.log(1.25)), float(np.log(1.5)))
    """Natural decision thresholds on the log scale: a feature shown raising the width at all,
    by ≥ 25 %, by ≥ 50 %."""
    budgets: tuple[float, ...] = (0.15, 0.30)
    """Matched flagging budgets: share of patients flagged by every rule."""
    high_uncertainty_share: float = 0.15

    def with_changes(self, **changes: object) -> ExperimentConfig:
        return replace(self, **changes)


REAL_DATASETS = ("diabetes", "actg175", "rand_hie")

FULL = ExperimentConfig(
    name="full", resplits=12, decision_resplits=20, alphas=(0.05, 0.1, 0.2),
    sign_datasets=REAL_DATASETS, sign_families=("normalized", "cqr"),
    grid_datasets=("diabetes", "actg175"), grid_patients=50, grid_rows=800, grid_background=32,
    bootstrap=2000,
)

QUICK = ExperimentConfig(
    name="quick", resplits=3, decision_resplits=4, alphas=(0.05, 0.1, 0.2),
    sign_datasets=REAL_DATASETS, sign_families=("normalized", "cqr"),
    grid_datasets=("diabetes", "actg175"), grid_patients=10, grid_rows=400, grid_background=16,
    bootstrap=300,
    synthetic_rows=1000,
    # CI-sized: a 200-row background and 100 bootstrap replicates keep the run to minutes; at
    # 3 resplits its claim-1 verdict has little power anyway (only the full run's counts).
    sign_background=200, calibration_bootstrap=100,
)

TINY = ExperimentConfig(
    name="tiny", resplits=2, decision_resplits=2, alphas=(0.1, 0.2),
    sign_datasets=("diabetes",), sign_families=("normalized",),
    grid_datasets=("diabetes",), grid_patients=3, grid_rows=200, grid_background=8, bootstrap=50,
    synthetic_rows=400, max_rows=400, background=16, sign_background=16, null_noise=5,
    null_permuted=1, sign_budget=8, calibration_bootstrap=50,
)

CONFIGS = {config.name: config for config in (FULL, QUICK, TINY)}

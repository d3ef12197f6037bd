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
    background: int = 64
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
)

TINY = ExperimentConfig(
    name="tiny", resplits=2, decision_resplits=2, alphas=(0.1, 0.2),
    sign_datasets=("diabetes",), sign_families=("normalized",),
    grid_datasets=("diabetes",), grid_patients=3, grid_rows=200, grid_background=8, bootstrap=50,
    synthetic_rows=400, max_rows=400, background=16,
)

CONFIGS = {config.name: config for config in (FULL, QUICK, TINY)}

"""How big a reproduction run is: resplits, alphas, data sets, bootstrap replicates.

FULL's claim-2 size is the preregistration's amended design (experiments/
claim2_preregistration.md): 10 outcome draws per cell, not 20, for compute.

`FULL` produced the results committed under docs/results; `QUICK` is the CI-sized run of
`cpdecomp reproduce --quick`; `TINY` only proves the pipeline runs end to end (tests).
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ExperimentConfig:
    """Sizes of the three experiments; every random choice derives from the run's seed."""

    name: str
    resplits: int
    """Seeded train/calibration/test resplits per data set (claims 1 and 2)."""
    decision_draws: int
    """Outcome draws per cell of claim 2's factorial design (each a fresh outcome, split, fit)."""
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
    decision_settings: tuple[str, ...] = (
        "|β|=0", "|β|=0.4 same", "|β|=0.4 opposite", "|β|=0.8 same", "|β|=0.8 opposite",
        "null (homoscedastic)")
    """Claim 2's mean-effect settings (experiments.decision_task.SETTINGS)."""
    decision_n_cal: tuple[int, ...] = (100, 500, 2000)
    decision_models: tuple[str, ...] = ("gbm", "linear")
    decision_train: int = 1000
    decision_test: int = 500
    budgets: tuple[float, ...] = (0.15, 0.30)
    """Matched flagging budgets: share of patients flagged by every rule."""
    high_uncertainty_share: float = 0.15
    fault_replicates: int = 20
    """Seeded replicates of the calibration-faults setting (experiments.calibration_faults)."""

    def with_changes(self, **changes: object) -> ExperimentConfig:
        return replace(self, **changes)


PRIMARY_ALPHA = 0.1
"""The α the verdicts judge (the other α levels are reported)."""

REAL_DATASETS = ("diabetes", "actg175", "rand_hie")

FULL = ExperimentConfig(
    name="full", resplits=12, decision_draws=10, alphas=(0.05, 0.1, 0.2),
    sign_datasets=REAL_DATASETS, sign_families=("normalized", "cqr"),
    grid_datasets=("diabetes", "actg175"), grid_patients=50, grid_rows=800, grid_background=32,
    bootstrap=2000,
)

QUICK = ExperimentConfig(
    name="quick", resplits=3, decision_draws=5, alphas=(0.05, 0.1, 0.2),
    sign_datasets=REAL_DATASETS, sign_families=("normalized", "cqr"),
    grid_datasets=("diabetes", "actg175"), grid_patients=10, grid_rows=400, grid_background=16,
    bootstrap=300,
    synthetic_rows=1000,
    # Claim 2: a handful of cells (both sides of phi_C's sign and the null), 5 draws (the
    # fewest that give a p-value, decision_task.MIN_DRAWS).
    decision_settings=("|β|=0", "|β|=0.8 same", "null (homoscedastic)"),
    decision_n_cal=(500,), decision_models=("gbm",),
    # CI-sized: a 200-row background and 100 bootstrap replicates keep the run to minutes; at
    # 3 resplits its claim-1 verdict has little power anyway (only the full run's counts).
    sign_background=200, calibration_bootstrap=100, fault_replicates=5,
)

TINY = ExperimentConfig(
    name="tiny", resplits=2, decision_draws=2, alphas=(0.1, 0.2),
    sign_datasets=("diabetes",), sign_families=("normalized",),
    grid_datasets=("diabetes",), grid_patients=3, grid_rows=200, grid_background=8, bootstrap=50,
    synthetic_rows=400, max_rows=400, background=16, sign_background=16, null_noise=5,
    null_permuted=1, sign_budget=8, calibration_bootstrap=50,
    decision_settings=("|β|=0.8 same", "null (homoscedastic)"), decision_n_cal=(100,),
    decision_models=("linear",), decision_train=300, decision_test=200, fault_replicates=2,
)

CONFIGS = {config.name: config for config in (FULL, QUICK, TINY)}

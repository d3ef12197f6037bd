"""Semi-synthetic clinical cohort: real ACTG 175 covariates, a simulated heteroscedastic outcome.

    data = make_semisynthetic(seed=0)
    data.table              # patient_id, the real covariates, the simulated outcome
    data.true_sigma         # each patient's true noise scale
    data.contributions      # each patient's true per-feature push on ln sigma

The outcome is

    y = sum_j beta_j z_j + sigma_0 · exp(sum_j gamma_j z_j) · eps,   eps ~ N(0, 1)

with z_j the covariate standardized by the cohort's mean and standard deviation. ln sigma is
additive in the features, so each patient's true noise drivers are known exactly: feature j
pushes the patient's noise up by gamma_j·z_j on the log scale (its Shapley value over a product
background of the cohort). A *true driver* of a patient is a feature with gamma_j·z_j ≥ ln 1.1
(it raises the true noise scale by at least 10 %).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
COVARIATES_FILE = HERE / "actg175.csv"
ID_COLUMN = "patient_id"
TARGET = "outcome"
DRIVER_THRESHOLD = float(np.log(1.1))
"""A feature is a patient's true driver when it raises the true noise scale by ≥ 10 %."""

MEAN_EFFECTS: dict[str, float] = {
    "cd4_baseline": 0.8,
    "karnofsky": 0.15,
    "weight_kg": 0.15,
    "prior_art_days": -0.2,
    "cd8_baseline": 0.1,
}
"""Mean effects per standard deviation of each covariate (outcome units)."""

NOISE_EFFECTS: dict[str, float] = {
    "cd4_baseline": -0.35,  # dual role: low CD4 lowers the mean and widens the spread
    "symptomatic": 0.45,
    "age": 0.30,
    "karnofsky": -0.30,     # dual role, weak in the mean: poor performance status, more noise
    "iv_drugs": 0.40,
}
"""Effects on ln sigma per standard deviation of each covariate: the true noise drivers."""

BASE_SIGMA = 0.5


@dataclass(frozen=True, eq=False)
class SemiSyntheticData:
    """A drawn semi-synthetic cohort with its ground truth."""

    table: pd.DataFrame
    features: tuple[str, ...]
    true_sigma: np.ndarray
    contributions: pd.DataFrame
    """(n, features) true push of each feature on ln sigma: gamma_j z_j (0 for non-drivers)."""
    mean_effects: Mapping[str, float]
    noise_effects: Mapping[str, float]
    standardization: pd.DataFrame = field(repr=False)
    """Mean and standard deviation used to standardize each driver."""

    @property
    def noise_drivers(self) -> tuple[str, ...]:
        return tuple(f for f in self.features if self.noise_effects.get(f, 0.0) != 0.0)

    def true_drivers(self, threshold: float = DRIVER_THRESHOLD) -> pd.DataFrame:
        """Boolean (n, features): feature raises this patient's true noise by the threshold."""
        return self.contributions >= threshold


def load_covariates() -> pd.DataFrame:
    """The bundled ACTG 175 baseline covariates (the target column dropped)."""
    table = pd.read_csv(COVARIATES_FILE)
    return table.drop(columns=["cd4_week20"])


def make_semisynthetic(seed: int = 0, covariates: pd.DataFrame | None = None,
                       mean_effects: Mapping[str, float] | None = None,
                       noise_effects: Mapping[str, float] | None = None,
                       base_sigma: float = BASE_SIGMA) -> SemiSyntheticData:
    """Simulate the outcome on real covariates (seeded; the covariates are kept as they are)."""
    covariates = load_covariates() if covariates is None else covariates.reset_index(drop=True)
    mean_effects = dict(MEAN_EFFECTS if mean_effects is None else mean_effects)
    noise_effects = dict(NOISE_EFFECTS if noise_effects is None else noise_effects)
    features = tuple(c for c in covariates.columns if c != ID_COLUMN)
    used = sorted(set(mean_effects) | set(noise_effects))
    missing = [f for f in used if f not in features]
    if missing:
        raise ValueError(f"effects name columns the covariates lack: {missing}")
    values = covariates[used].astype(float)
    standardization = pd.DataFrame({"mean": values.mean(), "sd": values.std(ddof=0)})
    z = (values - standardization["mean"]) / standardization["sd"]
    mean = sum((mean_effects[f] * z[f] for f in mean_effects), start=pd.Series(0.0, index=z.index))
    contributions = pd.DataFrame(0.0, index=covariates.index, columns=list(features))
    for f, g in noise_effects.items():
        contributions[f] = g * z[f]
    sigma = base_sigma * np.exp(contributions.sum(axis=1).to_numpy())
    rng = np.random.default_rng(seed)
    table = covariates.copy()
    if ID_COLUMN not in table.columns:
        table.insert(0, ID_COLUMN, [f"P{i:05d}" for i in range(1, len(table) + 1)])
    table[TARGET] = mean.to_numpy() + sigma * rng.standard_normal(len(table))
    return SemiSyntheticData(table, features, sigma, contributions, mean_effects, noise_effects,
                             standardization)

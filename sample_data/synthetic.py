"""A synthetic cohort whose features have known roles in the mean and the noise of the outcome.

    data = make_synthetic(2000, seed=0)
    data.table            # patient_id, the five features, y
    data.true_instance()  # the exact instance-driven attribution of the oracle sigma

Five features, each with one role:

| feature      | role                                                        |
|--------------|-------------------------------------------------------------|
| `mean_only`  | moves the mean of y, not its spread                         |
| `noise_only` | moves the spread of y, not its mean                         |
| `dual`       | moves both                                                  |
| `dummy`      | independent of everything                                   |
| `correlated` | correlated with `mean_only` (rho), used by neither          |

    y = b_m·mean_only + b_d·dual + exp(g_n·noise_only + g_d·dual)·eps,   eps ~ N(0, 1)

All features are standard normal. With the oracle components f(x) = b_m x_m + b_d x_d and
sigma(x) = exp(g_n x_n + g_d x_d), the instance game of the normalized family is additive over a
product background, so its Shapley values are known in closed form (method page §8):
phi_I,j = g_j x_j − ln mean_b exp(g_j b_j), and phi_I = 0 exactly for the other three features.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

FEATURES = ("mean_only", "noise_only", "dual", "dummy", "correlated")
ROLES = {
    "mean_only": "mean",
    "noise_only": "noise",
    "dual": "mean and noise",
    "dummy": "none",
    "correlated": "none (correlated with mean_only)",
}
TARGET = "y"
ID_COLUMN = "patient_id"


@dataclass(frozen=True)
class SyntheticSpec:
    """Effect sizes of the synthetic cohort (per standard deviation of each feature)."""

    beta_mean: float = 1.0
    beta_dual: float = 0.5
    gamma_noise: float = 0.6
    gamma_dual: float = 0.5
    rho: float = 0.8
    """Correlation of `correlated` with `mean_only`."""

    @property
    def beta(self) -> np.ndarray:
        """Mean coefficients in FEATURES order."""
        return np.array([self.beta_mean, 0.0, self.beta_dual, 0.0, 0.0])

    @property
    def gamma(self) -> np.ndarray:
        """Log-noise coefficients in FEATURES order."""
        return np.array([0.0, self.gamma_noise, self.gamma_dual, 0.0, 0.0])

    def mean(self, x: np.ndarray) -> np.ndarray:
        """The oracle point prediction f(x) on rows in FEATURES order."""
        return np.asarray(x, dtype=float) @ self.beta

    def sigma(self, x: np.ndarray) -> np.ndarray:
        """The oracle noise scale sigma(x) on rows in FEATURES order."""
        return np.exp(np.asarray(x, dtype=float) @ self.gamma)

    def noise_features(self) -> tuple[str, ...]:
        return tuple(f for f, g in zip(FEATURES, self.gamma, strict=True) if g != 0)

    def mean_features(self) -> tuple[str, ...]:
        return tuple(f for f, b in zip(FEATURES, self.beta, strict=True) if b != 0)


@dataclass(frozen=True, eq=False)
class SyntheticData:
    """A drawn synthetic cohort with its generating spec."""

    table: pd.DataFrame
    spec: SyntheticSpec

    @property
    def features(self) -> np.ndarray:
        """(n, 5) feature matrix in FEATURES order."""
        return self.table[list(FEATURES)].to_numpy(dtype=float)

    @property
    def true_sigma(self) -> np.ndarray:
        return self.spec.sigma(self.features)

    def true_instance(self, background: np.ndarray | None = None) -> np.ndarray:
        """Exact phi_I (log units) of the oracle sigma over a product of `background`'s columns.

        Defaults to the population background (standard normal), where
        ln mean exp(g b) = g²/2.
        """
        gamma = self.spec.gamma
        if background is None:
            offset = gamma**2 / 2
        else:
            offset = np.log(np.mean(np.exp(np.asarray(background) * gamma), axis=0))
        return self.features * gamma - offset


def make_synthetic(n: int = 2000, seed: int = 0,
                   spec: SyntheticSpec = SyntheticSpec()) -> SyntheticData:
    """Draw n patients (seeded)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, len(FEATURES)))
    # The correlated column copies part of mean_only: only the model's use tells them apart.
    x[:, 4] = spec.rho * x[:, 0] + np.sqrt(1 - spec.rho**2) * x[:, 4]
    y = spec.mean(x) + spec.sigma(x) * rng.standard_normal(n)
    table = pd.DataFrame(x, columns=list(FEATURES))
    table.insert(0, ID_COLUMN, [f"S{i:05d}" for i in range(1, n + 1)])
    table[TARGET] = y
    return SyntheticData(table, spec)

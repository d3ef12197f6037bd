"""The speed benchmark's workload: seeded synthetic data, the fitted models, cold explainers.

Seeded synthetic data with a heteroscedastic outcome, d features, 3,000 training rows, gradient
boosting (100 trees x 31 leaves) for f and sigma, the normalized family, alpha = 0.1. scale.py,
wide.py and bootstrap.py measure on the same data (through `speed`'s re-exports).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from cpdecomp import Explainer, fit_system
from cpdecomp.core.games.cache import GameCache
from cpdecomp.core.system import ConformalSystem, FittedSystem

SEED = 0
ALPHA = 0.1
METHOD = "exact"
TRAINING_ROWS = 3000
CALIBRATION_POOL = 1000
PATIENT_POOL = 10_000
FAMILY = "normalized"
MODEL = "gbm"


def make_data(d: int, seed: int = SEED) -> tuple[pd.DataFrame, np.ndarray]:
    """Training, calibration-pool and patient rows; noise grows with x0, x5 and x6."""
    rows = TRAINING_ROWS + CALIBRATION_POOL + PATIENT_POOL
    rng = np.random.default_rng((seed, d))
    x = rng.normal(size=(rows, d))
    x[:, 3] = (x[:, 3] > 0.3).astype(float)
    signal = 2 * x[:, 0] + np.sin(2 * x[:, 1]) + x[:, 2] * x[:, 3] + 0.3 * x[:, 4:].sum(axis=1)
    scale = 0.2 + 0.8 * np.abs(x[:, 0]) + 0.6 * (x[:, 5] > 0) + 0.3 * x[:, 6] ** 2
    y = signal + scale * rng.normal(size=rows)
    return pd.DataFrame(x, columns=[f"x{j}" for j in range(d)]), y


@dataclass
class Workload:
    fitted: FittedSystem
    table: pd.DataFrame
    y: np.ndarray
    patients: np.ndarray

    def system(self, n: int) -> ConformalSystem:
        start = TRAINING_ROWS
        return self.fitted.conformalize(self.table.iloc[start:start + n], self.y[start:start + n])


def build_workload(d: int) -> Workload:
    table, y = make_data(d)
    fitted = fit_system(table.iloc[:TRAINING_ROWS], y[:TRAINING_ROWS], family=FAMILY,
                        model=MODEL, seed=SEED)
    patients = fitted.encode(table.iloc[TRAINING_ROWS + CALIBRATION_POOL:])
    return Workload(fitted, table, y, patients)


def fresh_explainer(system: ConformalSystem, m: int) -> Explainer:
    """A cold explainer: memory-only cache, so neither the disk nor an earlier run helps."""
    return Explainer(system, background_size=m, seed=SEED, cache=GameCache(None))


def warm_up() -> float:
    """Compile (or load from numba's disk cache) every kernel once, on a tiny system."""
    table, y = make_data(8)
    small = fit_system(table.iloc[:300], y[:300], family=FAMILY, model=MODEL, seed=SEED)
    system = small.conformalize(table.iloc[300:400], y[300:400])
    start = time.perf_counter()
    explainer = fresh_explainer(system, 20)
    explainer.explain_rows(system.fitted.encode(table.iloc[400:403]), method=METHOD, alpha=ALPHA)
    return time.perf_counter() - start

"""The closed-form worlds of the method page (§8), drawn as tables with oracle components.

    world = cf_dual(seed=0)
    system = system_from_functions(world.family, world.functions, world.train)
    system = system.conformalize(world.calibration, world.calibration_targets)

Each world carries the values the method page derives, so a test (or a reader) can check that
the engine recovers them. Standard errors of the Monte Carlo parts are stated per world.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import norm

Function = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True, eq=False)
class KnownAnswerWorld:
    """Training, calibration and patient tables, oracle components and the expected answers."""

    name: str
    family: str
    alpha: float
    units: str
    """'width' or 'log': the units the expected values are stated in."""
    train: pd.DataFrame
    calibration: pd.DataFrame
    calibration_targets: np.ndarray
    patients: pd.DataFrame
    functions: dict[str, Function]
    expected_calibration: float
    """phi_C of feature x (the same for every patient)."""
    expected_instance: np.ndarray
    """phi_I of feature x, one value per patient."""
    tolerance_calibration: float
    """About four Monte Carlo standard errors of the calibration quantile."""
    tolerance_instance: float
    notes: dict[str, float] = field(default_factory=dict)


def _frame(x: np.ndarray, extra: dict[str, np.ndarray] | None = None) -> pd.DataFrame:
    return pd.DataFrame({"x": x, **(extra or {})})


def cf_abs(n: int = 40_000, seed: int = 0, b: float = 1.0, tau: float = 1.0, s: float = 1.0,
           alpha: float = 0.1) -> KnownAnswerWorld:
    """y = bX + s·eps, oracle f = bx, absolute family: phi_I = 0, phi_C = 2z(s − sqrt(b²tau² + s²)).

    A constant column rides along: it must be a null player in every game.
    """
    rng = np.random.default_rng(seed)
    x_cal = rng.normal(0, tau, n)
    y_cal = b * x_cal + s * rng.standard_normal(n)
    x_train = rng.normal(0, tau, 500)
    patients = np.array([-2.0, 0.0, 1.5])
    z = norm.ppf(1 - alpha / 2)

    def constant(k: int) -> dict[str, np.ndarray]:
        return {"constant": np.full(k, 3.0)}

    return KnownAnswerWorld(
        name="CF-abs", family="absolute", alpha=alpha, units="width",
        train=_frame(x_train, constant(len(x_train))),
        calibration=_frame(x_cal, constant(n)), calibration_targets=y_cal,
        patients=_frame(patients, constant(len(patients))),
        functions={"f": lambda m: b * m[:, 0]},
        expected_calibration=float(2 * z * (s - np.sqrt(b**2 * tau**2 + s**2))),
        expected_instance=np.zeros(len(patients)),
        # Standard error of a 0.9-quantile of |N| at n = 40,000 is about 0.01 in width units.
        tolerance_calibration=0.06, tolerance_instance=0.0,
    )


def cf_noise(seed: int = 0, n_calibration: int = 2000) -> KnownAnswerWorld:
    """y = sigma(x)·eps, sigma in {1, 4}, P(sigma = 4) = 0.2, oracle f = 0: phi_I = ln(sigma/1.6).

    The training rows hold exactly 20 % high-noise rows, so the background mean of sigma is 1.6
    and the instance values are exact (log units).
    """
    rng = np.random.default_rng(seed)
    x_train = np.r_[np.ones(200), np.zeros(800)]
    x_cal = (rng.random(n_calibration) < 0.2).astype(float)
    y_cal = (1.0 + 3.0 * x_cal) * rng.standard_normal(n_calibration)
    patients = np.array([1.0, 0.0])
    return KnownAnswerWorld(
        name="CF-noise", family="normalized", alpha=0.1, units="log",
        train=_frame(x_train), calibration=_frame(x_cal), calibration_targets=y_cal,
        patients=_frame(patients),
        functions={"f": lambda m: np.zeros(len(m)), "sigma": lambda m: 1.0 + 3.0 * m[:, 0]},
        expected_calibration=float("nan"),  # the method page states no value: it is α-specific
        expected_instance=np.log(np.array([4.0, 1.0]) / 1.6),
        tolerance_calibration=float("nan"), tolerance_instance=1e-12,
    )


def cf_dual(seed: int = 0, n: int = 40_000, n_train: int = 20_000) -> KnownAnswerWorld:
    """X ~ N(0,1), y = X + exp(X/2)·eps, oracle f = x, sigma = exp(x/2), alpha = 0.1 (log units).

    phi_I(x) = x/2 − ln mean_b exp(b/2) ≈ x/2 − 0.125 and phi_C ≈ −0.269; for x in (0.25, 0.79)
    the instance part is positive while the total is not.
    """
    rng = np.random.default_rng(seed)
    x_cal = rng.standard_normal(n)
    y_cal = x_cal + np.exp(0.5 * x_cal) * rng.standard_normal(n)
    x_train = rng.standard_normal(n_train)
    patients = np.array([-1.0, 0.3, 0.5, 0.7, 2.0])
    exact_offset = float(np.log(np.mean(np.exp(0.5 * x_train))))
    return KnownAnswerWorld(
        name="CF-dual", family="normalized", alpha=0.1, units="log",
        train=_frame(x_train), calibration=_frame(x_cal), calibration_targets=y_cal,
        patients=_frame(patients),
        functions={"f": lambda m: m[:, 0], "sigma": lambda m: np.exp(0.5 * m[:, 0])},
        expected_calibration=-0.269,
        expected_instance=0.5 * patients - 0.125,
        # Quantile standard errors at n = 40,000 are about 0.01 (log units); the background
        # mean of exp(b/2) at n_train = 20,000 has a standard error of about 0.005.
        tolerance_calibration=0.04, tolerance_instance=0.02,
        notes={"exact_offset": exact_offset, "sign_gap_low": 0.25, "sign_gap_high": 0.79},
    )


WORLDS: dict[str, Callable[..., KnownAnswerWorld]] = {
    "CF-abs": cf_abs,
    "CF-noise": cf_noise,
    "CF-dual": cf_dual,
}

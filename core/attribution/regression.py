"""KernelSHAP's estimator as a linear map: weighted least squares with the efficiency constraint.

For coalitions z_k (0 < |z_k| < d) with kernel weights w_k, φ minimises
Σ w_k (v(z_k) − v(∅) − z_k·φ)² subject to Σφ = v(N) − v(∅). With A = Σ w z zᵀ and the KKT
matrix [[A, 1], [1ᵀ, 0]], whose inverse has blocks K (d × d) and c (d), the solution is

    φ = K Σ_k w_k z_k (v(z_k) − v(∅)) + c (v(N) − v(∅)),

linear in the values: one matrix, built before any game is evaluated, serves all three games.

Standard errors (delta method). The sampled coalitions come in draws (a coalition and, for
paired sizes, its complement), and the sampled part of A and b is a ratio of draw sums, so to
first order δφ = K(δb − δA φ). Each draw t contributes g_t = Σ_{z in t} z (v(z) − v(∅) − z·φ);
with e_t = g_t − n_t ḡ (n_t coalitions per draw, ḡ the count-weighted ratio Σg/Σn), the
variance of φ is (mass²/(Σn)²) Σ_t (K e_t)². It is checked against the spread over seeds in
tests/test_attribution_methods.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cpdecomp.core.attribution.base import MatrixDesign, as_games
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.typing import Coalitions, FloatArray

MAX_CONDITION = 1e12
"""Beyond this condition number the regression is under-determined by its coalitions."""

GAMES_PER_BLOCK = 32
"""Games per block in the standard errors, bounding the (games × draws × d) buffer."""


@dataclass(frozen=True, eq=False)
class Draws:
    """The sampled part of a regression design: distinct draws and how often each was drawn."""

    first: np.ndarray
    """(n_draws,) row in `coalitions` of the drawn coalition."""
    second: np.ndarray
    """(n_draws,) row of its complement when the draw is paired, else -1."""
    count: np.ndarray
    """(n_draws,) times the draw was made (repeats merge into one coalition)."""
    mass: float
    """Kernel weight shared by all sampled coalitions (the enumerated ones hold the rest)."""


@dataclass(frozen=True, eq=False, kw_only=True)
class RegressionDesign(MatrixDesign):
    """A KernelSHAP map φ = v @ matrix, with the pieces its standard errors need."""

    operator: FloatArray
    """K, the (d, d) block of the inverse KKT matrix."""
    draws: Draws | None = None

    def standard_errors(self, values: FloatArray) -> FloatArray | None:
        if self.draws is None:
            return None
        flat, lead = as_games(values)
        draws = self.draws
        total_draws = draws.count.sum()
        if total_draws < 2:
            return np.full((*lead, self.n_players), np.nan)
        members = self.coalitions.astype(float)
        paired = draws.second >= 0
        second = np.where(paired, draws.second, draws.first)
        size = 1.0 + paired
        appearances = float((draws.count * size).sum())
        out = np.zeros((len(flat), self.n_players))
        for start in range(0, len(flat), GAMES_PER_BLOCK):
            block = flat[start:start + GAMES_PER_BLOCK]
            phi = block @ self.matrix
            residual = block - block[:, [self.empty_index]] - phi @ members.T
            g = (residual[:, draws.first, None] * members[draws.first]
                 + (residual[:, second, None] * members[second]) * paired[:, None])
            ratio = np.einsum("u,bud->bd", draws.count, g) / appearances
            spread = (g - size[None, :, None] * ratio[:, None, :]) @ self.operator
            variance = np.einsum("u,bud->bd", draws.count, spread**2)
            variance *= total_draws / (total_draws - 1)
            out[start:start + len(block)] = draws.mass * np.sqrt(variance) / appearances
        return out.reshape((*lead, self.n_players))


def regression_design(method: str, sampled: Coalitions, weight: FloatArray,
                      draws: Draws | None = None, budget: int | None = None,
                      seed: int | None = None) -> RegressionDesign:
    """The constrained WLS map for coalitions `sampled` (n, d masks; neither ∅ nor N) with
    kernel `weight`.

    The design's coalitions are `sampled` in the given order, then ∅, then N; `draws` index
    rows of `sampled`.
    """
    sampled = np.asarray(sampled, dtype=bool)
    d = sampled.shape[1]
    weight = np.asarray(weight, dtype=float)
    members = sampled.astype(float)
    kkt = np.zeros((d + 1, d + 1))
    kkt[:d, :d] = (members * weight[:, None]).T @ members
    kkt[:d, d] = kkt[d, :d] = 1.0
    condition = np.linalg.cond(kkt)
    if not np.isfinite(condition) or condition > MAX_CONDITION:
        raise CpdecompError(
            f"{method}: its {len(sampled)} sampled coalitions do not determine {d} attributions "
            f"(the regression is singular; shap would return a minimum-norm answer); raise "
            f"the budget or change the seed"
        )
    inverse = np.linalg.inv(kkt)
    operator, constant = inverse[:d, :d].astype(float), inverse[:d, d]
    sampled_rows = (operator @ (members * weight[:, None]).T).T
    matrix = np.vstack([sampled_rows, -sampled_rows.sum(axis=0) - constant, constant])
    coalitions = np.concatenate([sampled, np.zeros((1, d), dtype=bool),
                                 np.ones((1, d), dtype=bool)])
    return RegressionDesign(
        method=method, coalitions=coalitions, matrix=matrix, operator=operator, draws=draws,
        efficient=True, budget=budget, seed=seed, sampled=draws is not None,
    )

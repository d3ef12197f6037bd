"""A coalition design: which coalitions to evaluate, and a linear map from their values to φ.

Every method offered is linear in the game, so one design applied to the calibration, instance
and total games gives φ_T = φ_C + φ_I exactly (method page §5). Two forms share one interface:

* `TermDesign` (core/attribution/terms.py) stores the map as weighted marginal contributions,
  φ_j = Σ w · (v(with) − v(without)), the way Shapley-type values are defined: a player that
  never changes the game gets exactly 0.0, not a rounding residue (exact and permutation
  Shapley, Banzhaf, leave-one-out, shap's PermutationExplainer); its numba kernels are in
  core/attribution/term_kernels.py;
* `MatrixDesign` (here) stores a dense (n_coalitions, n_players) matrix, φ = v @ W, for
  estimators that are a linear solve of the values (KernelSHAP, shap's KernelExplainer).

A sampled design also knows its Monte Carlo standard errors: `standard_errors(values)` has the
shape of `apply(values)` and is None for a design with nothing random in it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from cpdecomp.core.typing import Coalitions, FloatArray


@dataclass(frozen=True, eq=False, kw_only=True)
class Design(ABC):
    """Coalitions (n_coalitions, n_columns) and a linear map from their values to attributions."""

    method: str
    coalitions: Coalitions
    efficient: bool
    """True when Σφ = v(all players) − v(no player) for every game."""
    budget: int | None = None
    """The budget actually spent, in the method's unit (see BUDGET_UNITS); None when unbudgeted."""
    seed: int | None = None
    sampled: bool = False
    """True when the map depends on random draws: it then has standard errors."""
    groups: tuple[tuple[int, ...], ...] | None = None
    """Columns of each player when players are feature groups; None when player = column."""

    @property
    def n_players(self) -> int:
        """Number of attributions per game (features, or groups of them)."""
        return self.coalitions.shape[1] if self.groups is None else len(self.groups)

    @property
    def n_evaluations(self) -> int:
        """Coalitions each game is evaluated on: the real cost of the design."""
        return len(self.coalitions)

    @abstractmethod
    def apply(self, values: FloatArray) -> FloatArray:
        """Attributions (..., n_players) of game values (..., n_coalitions)."""

    @abstractmethod
    def weight_matrix(self) -> FloatArray:
        """The same map as a dense (n_coalitions, n_players) matrix: φ = v @ W."""

    def standard_errors(self, values: FloatArray) -> FloatArray | None:
        """Monte Carlo standard errors (..., n_players) of `apply(values)`; None if not sampled."""
        return None

    def apply_offset(self, offset: FloatArray, values: FloatArray) -> tuple[FloatArray, FloatArray]:
        """(apply(values), apply(offset + values)) for games (n_games, n_coalitions) and one
        game `offset` (n_coalitions,): the instance and total games of a cohort at once."""
        return self.apply(values), self.apply(offset[None, :] + values)

    def index_of(self, members: np.ndarray) -> int:
        """Row of the coalition with exactly these members (a mask over columns)."""
        hits = np.flatnonzero((self.coalitions == members[None, :]).all(axis=1))
        if hits.size == 0:
            raise KeyError("coalition not in design")
        return int(hits[0])

    @cached_property
    def full_index(self) -> int:
        return self.index_of(np.ones(self.coalitions.shape[1], dtype=bool))

    @cached_property
    def empty_index(self) -> int:
        return self.index_of(np.zeros(self.coalitions.shape[1], dtype=bool))


def as_games(values: FloatArray) -> tuple[FloatArray, tuple[int, ...]]:
    """Values as a 2-D (games, n_coalitions) array, and the leading shape to restore."""
    values = np.asarray(values, dtype=float)
    return values.reshape(-1, values.shape[-1]), values.shape[:-1]


@dataclass(frozen=True, eq=False, kw_only=True)
class MatrixDesign(Design):
    """A dense map φ = v @ matrix, (n_coalitions, n_players)."""

    matrix: FloatArray

    def apply(self, values: FloatArray) -> FloatArray:
        flat, lead = as_games(values)
        return (flat @ self.matrix).reshape((*lead, self.n_players))

    def weight_matrix(self) -> FloatArray:
        return self.matrix.copy()

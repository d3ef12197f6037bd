"""The components a family needs (f, sigma, lo, hi), fitted by a built-in model.

sigma is a random forest on the absolute out-of-fold residual of the point model (so it learns
honest difficulty), floored after masking; lo and hi are quantile models at alpha/2 and
1 - alpha/2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import RandomForestRegressor
from sklearn.model_selection import KFold

from cpdecomp.core.models.base import BaseModel, Component, Predictor
from cpdecomp.core.models.design import DesignPredictor
from cpdecomp.core.models.random_forest import RandomForest
from cpdecomp.core.typing import BoolArray, FloatArray

SIGMA_FLOOR = 0.01
"""sigma is floored at this fraction of the mean absolute out-of-fold residual: a smaller value
is an extrapolation artifact of the difficulty model, and it would blow up the scores."""


def out_of_fold_residuals(model: BaseModel, x: FloatArray, y: FloatArray, categorical: BoolArray,
                          seed: int, folds: int = 5) -> FloatArray:
    """Residuals y - f(x) where f never saw the row, so sigma learns honest difficulty."""
    residuals = np.empty(len(y))
    splitter = KFold(n_splits=min(folds, len(y)), shuffle=True, random_state=seed)
    for fit_rows, held_out in splitter.split(x):
        fold_model = model.point(x[fit_rows], y[fit_rows], categorical, seed)
        residuals[held_out] = y[held_out] - fold_model.predict(x[held_out])
    return residuals


@dataclass(frozen=True)
class TrainingData:
    """What every component is fitted on: encoded training rows, targets, settings."""

    x: FloatArray
    y: FloatArray
    categorical: BoolArray
    seed: int
    quantile_alpha: float


def difficulty_component(x: FloatArray, spread: FloatArray, categorical: BoolArray,
                         seed: int) -> Component:
    """sigma: a random forest on |residual|, floored at SIGMA_FLOOR of the mean |residual|.

    Every leaf is a mean of non-negative values, so sigma, and every mean of it over a background
    (what masking takes), is >= 0 by construction; and a forest is a sum of leaf values, so
    masking keeps exact tree tables. A least-squares fit with no link (as gradient boosting was)
    goes <= 0 on some rows, which the floor then turned into intervals a few percent of the
    median width that were rarely covered. The floor stays as a guard: see sigma_lower_bound.
    """
    floor = SIGMA_FLOOR * max(float(np.mean(spread)), np.finfo(float).tiny)
    return Component("sigma", RandomForest().point(x, spread, categorical, seed), floor=floor)


def sigma_lower_bound(predictor: Predictor) -> float | None:
    """The smallest value sigma's forest can give any row (or mean of rows): the mean over trees
    of each tree's smallest leaf; None when sigma is not such a forest (a user's model)."""
    if not isinstance(predictor, DesignPredictor) or not isinstance(predictor.estimator,
                                                                    RandomForestRegressor):
        return None
    estimator = predictor.estimator
    lowest = [float(tree.tree_.value[tree.tree_.children_left == -1, 0, 0].min())
              for tree in estimator.estimators_]
    return float(np.mean(lowest))


def _difficulty(model: BaseModel, data: TrainingData, point: Component) -> Component:
    spread = np.abs(out_of_fold_residuals(model, data.x, data.y, data.categorical, data.seed))
    return difficulty_component(data.x, spread, data.categorical, data.seed)


def _lower(model: BaseModel, data: TrainingData, point: Component) -> Component:
    tau = data.quantile_alpha / 2
    return Component("lo", model.quantile(data.x, data.y, data.categorical, data.seed, tau))


def _upper(model: BaseModel, data: TrainingData, point: Component) -> Component:
    tau = 1 - data.quantile_alpha / 2
    return Component("hi", model.quantile(data.x, data.y, data.categorical, data.seed, tau))


COMPONENT_BUILDERS: dict[str, Callable[[BaseModel, TrainingData, Component], Component]] = {
    "f": lambda model, data, point: point,
    "sigma": _difficulty,
    "lo": _lower,
    "hi": _upper,
}


def fit_components(
    family_components: tuple[str, ...], model: BaseModel, x: FloatArray, y: FloatArray,
    categorical: BoolArray, seed: int, quantile_alpha: float, positive_point: bool,
) -> tuple[Component, dict[str, Component]]:
    """The point model (always, for display) and the components a family's scores use."""
    data = TrainingData(x, y, categorical, seed, quantile_alpha)
    point = Component("f", model.point(x, y, categorical, seed, positive=positive_point))
    components = {name: COMPONENT_BUILDERS[name](model, data, point)
                  for name in family_components}
    return point, components

"""The components a family needs (f, sigma, lo, hi), fitted by a built-in model.

sigma is a histogram gradient boosting with a log link (Poisson deviance) on the absolute
out-of-fold residual of the point model (so it learns honest difficulty), floored after masking;
lo and hi are quantile models at alpha/2 and 1 - alpha/2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import KFold

from cpdecomp.core.models.base import BaseModel, Component, Predictor
from cpdecomp.core.models.design import LogDifficultyPredictor
from cpdecomp.core.models.gradient_boosting import GradientBoosting
from cpdecomp.core.typing import BoolArray, FloatArray

SIGMA_FLOOR = 0.01
"""sigma is floored at this fraction of the mean absolute out-of-fold residual: a smaller value
is an extrapolation artifact of the difficulty model, and it would blow up the scores."""


SIGMA_LEAF_ROWS = 50
"""The fewest training rows in a leaf of sigma's trees, from 300 training rows up."""

SIGMA_LEAF_SHARE = 6
"""Below 300 training rows a leaf needs a sixth of them (at least SIGMA_SMALLEST_LEAF): a fixed
50 let no tree split from fewer than 100 rows, so sigma was one constant and every patient of a
160-row cohort got the same width."""

SIGMA_SMALLEST_LEAF = 5

SIGMA_MAX_DEPTH = 6
"""The deepest a tree of sigma may grow (31 leaves fit in 5 levels). Every patient's tables
walk each tree's paths, and their cost grows with the features a path splits on: grown without
a bound from 3,000 training rows, sigma's trees were 12 levels deep, and a patient of the
normalized family cost 0.35-0.38 CPU-ms against 0.17-0.18 at 6 levels (d = 12, background
1,000; docs/benchmarks/sigma.md), a third more than the forest's before it."""


def sigma_leaf_rows(n_rows: int) -> int:
    """The fewest training rows in a leaf of sigma's trees, for n_rows training rows."""
    return min(SIGMA_LEAF_ROWS, max(SIGMA_SMALLEST_LEAF, n_rows // SIGMA_LEAF_SHARE))


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
    """sigma = exp(eta): a boosting of |residual| with a log link, floored at SIGMA_FLOOR of the
    mean |residual|.

    The Poisson deviance fits the mean of |residual| (as a forest's leaf means did) and takes
    zeros; eta is a sum of trees, so masking averages it over the background by exact tree
    tables and sigma_S = exp(mean of eta) > 0 for every row and coalition. A least-squares
    boosting with no link (sigma before the forest) went <= 0 on some rows, which the floor then
    turned into intervals a few percent of the median width that were rarely covered; the
    forest that replaced it was positive too, but took 54 x this fit's time from 100,000 rows,
    half of a cold explain's CPU (docs/benchmarks/sigma.md). The floor stays as a guard: see
    sigma_lower_bound.
    """
    scale = float(np.mean(spread))
    floor = SIGMA_FLOOR * max(scale, np.finfo(float).tiny)
    # The deviance's hessian is the prediction itself, and a split needs a hessian sum of 1e-3
    # (scikit-learn's min_hessian_to_split): residuals in small units would grow no tree. Fitted
    # on |residual| / its mean, the trees are the same in any unit; ln of the mean then goes
    # into the booster's starting margin, so its own predict (and the tree tables, which read
    # that margin) are in the target's units, summed in the same order. A constant sample
    # weight would do the same, but scikit-learn's weighted histograms took 2-5 x as long.
    # All residuals 0 (a perfect fit) leave nothing to learn: sigma is 1 then.
    # |residual| is a noisy target (one draw of |noise| per row): leaves of at least 50 rows
    # (from 300 training rows up: sigma_leaf_rows)
    # instead of 20 gave 7 % narrower median intervals at the same coverage over 10 resplits
    # of 300 training rows (docs/benchmarks/sigma.md), about the forest's width.
    estimator = GradientBoosting().estimator(categorical, seed, loss="poisson",
                                             min_samples_leaf=sigma_leaf_rows(len(spread)),
                                             max_depth=SIGMA_MAX_DEPTH)
    if scale > 0:
        estimator.fit(x, spread / scale)
        estimator._baseline_prediction = estimator._baseline_prediction + np.log(scale)
    else:
        estimator.fit(x, np.ones_like(spread))
    return Component("sigma", LogDifficultyPredictor(estimator), floor=floor)


def sigma_lower_bound(predictor: Predictor) -> float | None:
    """The smallest value the built-in sigma can give any row, or any mean over a background
    (of its margin, or of itself): exp(baseline + the sum over trees of each tree's smallest
    leaf); None when sigma is not that model (a user's)."""
    if not isinstance(predictor, LogDifficultyPredictor):
        return None
    estimator = predictor.estimator
    lowest = float(np.ravel(estimator._baseline_prediction)[0])
    for (tree,) in estimator._predictors:
        lowest += float(tree.nodes["value"][tree.nodes["is_leaf"] == 1].min())
    return float(np.exp(lowest))


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

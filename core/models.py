"""The base models offered (gradient boosting, random forest, linear) and the components they fit.

A component maps the encoded feature matrix (one column per player, category codes for
strings) to one number per row. Gradient boosting reads codes natively (categorical splits and
missing values); the forest and the linear model see a design matrix with one-hot categories and
imputed numbers, built here, so every expanded column still belongs to exactly one player.
Every model is seeded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
from sklearn.linear_model import GammaRegressor, LinearRegression, QuantileRegressor
from sklearn.model_selection import KFold

from core.errors import CpdecompError
from core.typing import BoolArray, FloatArray

SIGMA_FLOOR = 0.01
"""sigma is floored at this fraction of the mean absolute out-of-fold residual: a smaller value
is an extrapolation artifact of the difficulty model, and it would blow up the scores."""

N_TREES = 100
MAX_LEAVES = 31


class Predictor(Protocol):
    """Anything with predict(encoded rows) -> one value per row."""

    def predict(self, encoded: FloatArray) -> FloatArray: ...


@dataclass(frozen=True, eq=False)
class Component:
    """A fitted function of the features that a family uses (f, sigma, lo, hi).

    `floor` is applied after masking (after the mean over the background), so the calibration
    and instance games see the same function of the coalition.
    """

    name: str
    predictor: Predictor
    floor: float | None = None

    def finish(self, raw: FloatArray) -> FloatArray:
        return raw if self.floor is None else np.maximum(raw, self.floor)

    def predict(self, encoded: FloatArray) -> FloatArray:
        return self.finish(np.asarray(self.predictor.predict(encoded), dtype=float))

    @property
    def is_additive(self) -> bool:
        return hasattr(self.predictor, "additive_terms")


class FunctionPredictor:
    """A plain function of the encoded rows, e.g. an oracle in a test."""

    def __init__(self, function: Callable[[FloatArray], FloatArray]) -> None:
        self.function = function

    def predict(self, encoded: FloatArray) -> FloatArray:
        return np.asarray(self.function(encoded), dtype=float)


# --- design matrix for models that need numbers only -------------------------------------


class DesignMatrix:
    """Median-imputed numbers (+ a missing flag where training had gaps) and one-hot categories.

    The first category of each categorical column is the reference (all zeros); a missing or
    unseen category gets its own column when training had missing values there.
    """

    def fit(self, encoded: FloatArray, categorical: BoolArray) -> DesignMatrix:
        self.categorical_ = np.asarray(categorical, dtype=bool)
        self.fill_ = np.zeros(encoded.shape[1])
        self.flag_missing_ = np.isnan(encoded).any(axis=0)
        self.n_categories_ = np.zeros(encoded.shape[1], dtype=int)
        roles: list[tuple[int, str, int]] = []
        for j in range(encoded.shape[1]):
            column = encoded[:, j]
            if self.categorical_[j]:
                self.n_categories_[j] = int(np.nanmax(column)) + 1
                roles += [(j, "level", level) for level in range(1, self.n_categories_[j])]
            else:
                self.fill_[j] = float(np.nanmedian(column))
                if np.nanmax(column) > np.nanmin(column):
                    roles.append((j, "value", 0))
            if self.flag_missing_[j]:
                roles.append((j, "missing", 0))
        self.column_roles_ = roles
        """Per expanded column: (player, 'value' | 'level' | 'missing', category level)."""
        self.player_of_column_ = np.array([r[0] for r in roles], dtype=int)
        # A constant column carries no information; leaving it out keeps it an exact null player.
        self.varying_ = {j for j in range(encoded.shape[1]) if not self.categorical_[j]
                         and np.nanmax(encoded[:, j]) > np.nanmin(encoded[:, j])}
        return self

    def transform(self, encoded: FloatArray) -> FloatArray:
        blocks = []
        for j in range(encoded.shape[1]):
            column = encoded[:, j]
            missing = np.isnan(column)
            if self.categorical_[j]:
                levels = np.arange(1, self.n_categories_[j])
                blocks.append((column[:, None] == levels[None, :]).astype(float))
            elif j in self.varying_:
                blocks.append(np.where(missing, self.fill_[j], column)[:, None])
            if self.flag_missing_[j]:
                blocks.append(missing[:, None].astype(float))
        return np.hstack(blocks) if blocks else np.empty((len(encoded), 0))


class DesignPredictor:
    """A scikit-learn regressor on the design matrix."""

    def __init__(self, design: DesignMatrix, estimator: object) -> None:
        self.design = design
        self.estimator = estimator

    def predict(self, encoded: FloatArray) -> FloatArray:
        return self.estimator.predict(self.design.transform(encoded))


class LinearDesignPredictor(DesignPredictor):
    """A linear model: its prediction is an intercept plus one additive term per player."""

    def additive_terms(self, encoded: FloatArray) -> tuple[float, FloatArray]:
        expanded = self.design.transform(encoded) * np.asarray(self.estimator.coef_)[None, :]
        n_players = encoded.shape[1]
        terms = np.zeros((len(encoded), n_players))
        np.add.at(terms.T, self.design.player_of_column_, expanded.T)
        return float(self.estimator.intercept_), terms


class EncodedPredictor:
    """A scikit-learn regressor that reads the encoded matrix directly."""

    def __init__(self, estimator: object) -> None:
        self.estimator = estimator

    def predict(self, encoded: FloatArray) -> FloatArray:
        return self.estimator.predict(encoded)


class LeafQuantileForest:
    """Random-forest quantile model: each leaf holds the tau-quantile of its training targets.

    The prediction stays an average of leaf values (like the forest's mean), which keeps it a
    tree-ensemble sum; Meinshausen's weighted quantile would not be.
    """

    def __init__(self, design: DesignMatrix, forest: RandomForestRegressor, x: FloatArray,
                 y: FloatArray, tau: float) -> None:
        self.design = design
        self.forest = forest
        leaves = forest.apply(x)
        self.leaf_values_ = []
        for t, tree in enumerate(forest.estimators_):
            table = np.zeros(tree.tree_.node_count)
            ids = leaves[:, t]
            for leaf in np.unique(ids):
                table[leaf] = np.quantile(y[ids == leaf], tau)
            self.leaf_values_.append(table)

    def predict(self, encoded: FloatArray) -> FloatArray:
        leaves = self.forest.apply(self.design.transform(encoded))
        total = np.zeros(len(encoded))
        for t, table in enumerate(self.leaf_values_):
            total += table[leaves[:, t]]
        return total / len(self.leaf_values_)


# --- the three models ----------------------------------------------------------------------


class BaseModel(Protocol):
    name: str
    label: str

    def point(self, x: FloatArray, y: FloatArray, categorical: BoolArray, seed: int,
              positive: bool = False) -> Predictor: ...

    def quantile(self, x: FloatArray, y: FloatArray, categorical: BoolArray, seed: int,
                 tau: float) -> Predictor: ...


class GradientBoosting:
    name = "gbm"
    label = "Gradient boosting"

    def _estimator(self, categorical: BoolArray, seed: int, **loss: object):
        return HistGradientBoostingRegressor(
            max_iter=N_TREES, max_leaf_nodes=MAX_LEAVES, learning_rate=0.1,
            categorical_features=categorical if categorical.any() else None,
            early_stopping=False, random_state=seed, **loss,
        )

    def point(self, x, y, categorical, seed, positive=False):
        # A log link keeps f > 0 everywhere, so the gamma family does not refuse real data.
        loss = {"loss": "gamma"} if positive else {}
        return EncodedPredictor(self._estimator(categorical, seed, **loss).fit(x, y))

    def quantile(self, x, y, categorical, seed, tau):
        estimator = self._estimator(categorical, seed, loss="quantile", quantile=tau)
        return EncodedPredictor(estimator.fit(x, y))


class RandomForest:
    name = "rf"
    label = "Random forest"

    def _forest(self, seed: int) -> RandomForestRegressor:
        # Leaves are capped so the trees stay shallow enough to explain (and tabulate) exactly.
        return RandomForestRegressor(
            n_estimators=N_TREES, min_samples_leaf=5, max_leaf_nodes=MAX_LEAVES,
            random_state=seed, n_jobs=-1,
        )

    def _fit(self, x: FloatArray, y: FloatArray, seed: int) -> RandomForestRegressor:
        forest = self._forest(seed).fit(x, y)
        # Threads add the trees' predictions in whatever order they finish; one thread keeps
        # predictions bit-for-bit repeatable (and null players exactly null).
        forest.n_jobs = 1
        return forest

    def point(self, x, y, categorical, seed, positive=False):
        # Leaf means of a positive target are positive, so no link is needed for gamma.
        design = DesignMatrix().fit(x, categorical)
        return DesignPredictor(design, self._fit(design.transform(x), y, seed))

    def quantile(self, x, y, categorical, seed, tau):
        design = DesignMatrix().fit(x, categorical)
        expanded = design.transform(x)
        return LeafQuantileForest(design, self._fit(expanded, y, seed), expanded, y, tau)


class Linear:
    name = "linear"
    label = "Linear (least squares)"

    def point(self, x, y, categorical, seed, positive=False):
        design = DesignMatrix().fit(x, categorical)
        expanded = design.transform(x)
        if positive:
            # Unpenalized gamma GLM: linear on the log scale, so f > 0 for the gamma family.
            glm = GammaRegressor(alpha=0.0, solver="newton-cholesky", max_iter=1000)
            return DesignPredictor(design, glm.fit(expanded, y))
        return LinearDesignPredictor(design, LinearRegression().fit(expanded, y))

    def quantile(self, x, y, categorical, seed, tau):
        design = DesignMatrix().fit(x, categorical)
        regressor = QuantileRegressor(quantile=tau, alpha=0.0, solver="highs")
        return LinearDesignPredictor(design, regressor.fit(design.transform(x), y))


MODELS: dict[str, BaseModel] = {m.name: m for m in (GradientBoosting(), RandomForest(), Linear())}


def get_model(name: str) -> BaseModel:
    try:
        return MODELS[name]
    except KeyError:
        raise CpdecompError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}") from None


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


def _difficulty(model: BaseModel, data: TrainingData, point: Component) -> Component:
    spread = np.abs(out_of_fold_residuals(model, data.x, data.y, data.categorical, data.seed))
    floor = SIGMA_FLOOR * max(float(spread.mean()), np.finfo(float).tiny)
    # sigma regresses |residual| itself (no link), so masking averages its output.
    return Component("sigma", model.point(data.x, spread, data.categorical, data.seed),
                     floor=floor)


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

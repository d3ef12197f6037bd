"""Design matrix for models that need numbers only, and the predictors that read it.

The forest and the linear model see a design matrix with one-hot categories and imputed
numbers, built here, so every expanded column still belongs to exactly one player.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.typing import BoolArray, FloatArray

UNSEEN_CATEGORY_HINT = (
    "its training rows had none there, so a model on the one-hot design (the linear model, the "
    "forest) cannot tell it from the first category; give those "
    "rows a category seen in training, or add training rows with gaps in that column"
)


class DesignMatrix:
    """Median-imputed numbers (+ a missing flag where training had gaps) and one-hot categories.

    The first category of each categorical column is the reference (all zeros); a missing or
    unseen category gets its own column when training had missing values there, and is refused
    where it had none: a flag never seen in training is a constant the model ignores, so it
    would silently be read as the reference category.
    """

    def fit(self, encoded: FloatArray, categorical: BoolArray) -> DesignMatrix:
        self.categorical_ = np.asarray(categorical, dtype=bool)
        self.fill_ = np.zeros(encoded.shape[1])
        self.flag_missing_: BoolArray = np.asarray(np.isnan(encoded).any(axis=0), dtype=bool)
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

    def unlearned_gaps(self, encoded: FloatArray) -> list[int]:
        """Categorical columns with a missing or unseen category where training had none."""
        return [int(j) for j in np.flatnonzero(self.categorical_ & ~self.flag_missing_)
                if np.isnan(encoded[:, j]).any()]

    def transform(self, encoded: FloatArray) -> FloatArray:
        unlearned = self.unlearned_gaps(encoded)
        if unlearned:
            # FittedSystem.encode names the column first; this guards rows given encoded.
            raise CpdecompError(f"feature number {unlearned[0] + 1} has a missing or unseen "
                                f"category, but {UNSEEN_CATEGORY_HINT}")
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

    def __init__(self, design: DesignMatrix, estimator: Any) -> None:  # a fitted regressor
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

    def __init__(self, estimator: Any) -> None:  # a fitted scikit-learn regressor
        self.estimator = estimator

    def predict(self, encoded: FloatArray) -> FloatArray:
        return self.estimator.predict(encoded)


class LogLinearDesignPredictor(LinearDesignPredictor):
    """A log-link GLM (the gamma family's built-in linear model) on its link scale: the linear
    predictor intercept + coef · design, additive per player, so masking has a closed form
    there; the component applies exp after masking."""

    link = "log"

    def predict(self, encoded: FloatArray) -> FloatArray:
        return self.estimator._linear_predictor(self.design.transform(encoded))


class MarginPredictor:
    """A histogram gradient boosting with a log link (gamma or Poisson loss) on its link scale:
    the raw sum of its trees, which masking tabulates exactly; the component applies exp after
    masking, which is the estimator's own predict."""

    link = "log"

    def __init__(self, estimator: Any) -> None:  # a fitted HistGradientBoostingRegressor
        self.estimator = estimator

    def predict(self, encoded: FloatArray) -> FloatArray:
        return np.asarray(self.estimator._raw_predict(encoded), dtype=float)[:, 0]


class LogDifficultyPredictor(MarginPredictor):
    """The normalized family's built-in sigma: a Poisson-deviance boosting of |residual|, so
    sigma = exp(raw margin), on its log scale.

    Its log scale is part of what sigma is, not an outcome scale a user reads, so masking always
    averages the margin (the response-scale option is for the models whose predictions are the
    outcome: core.models.base.Component.on_response_scale).
    """

    link_scale_only = True

"""Adapters for fitted scikit-learn estimators and Pipelines that read the raw table.

The players are the raw columns; a Pipeline's transformers run on each decoded (hybrid) row, so
the one-hot columns of one raw column move together. Which masking path an instance gets is
decided when its trees are read (core.games.tree_extract): tree tables for the tree ensembles
below and for Pipelines whose transformers act column by column and monotonically (scalers,
imputers) or on categories (one-hot, ordinal); brute force otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.ensemble import (
    ExtraTreesRegressor,
    GradientBoostingRegressor,
    HistGradientBoostingRegressor,
    RandomForestRegressor,
)
from sklearn.linear_model._base import LinearModel
from sklearn.pipeline import Pipeline
from sklearn.tree import DecisionTreeRegressor, ExtraTreeRegressor

from cpdecomp.core.models.base import ModelKind
from cpdecomp.core.typing import FloatArray

TREE_ENSEMBLES = (HistGradientBoostingRegressor, GradientBoostingRegressor, RandomForestRegressor,
                  ExtraTreesRegressor, DecisionTreeRegressor, ExtraTreeRegressor)


def feature_names(model: Any) -> list[str] | None:
    names = getattr(model, "feature_names_in_", None)
    return None if names is None else [str(n) for n in names]


def n_features(model: Any) -> int | None:
    n = getattr(model, "n_features_in_", None)
    return None if n is None else int(n)


def call(model: Any, frame: pd.DataFrame) -> FloatArray:
    # A model fitted on an array warns when it gets names: give it the array it knows.
    data = frame if feature_names(model) is not None else frame.to_numpy()
    return np.asarray(model.predict(data), dtype=float)


def category_dtype(model: Any) -> str:
    """A bare histogram boosting reads strings only as pandas categories ('from_dtype')."""
    if isinstance(model, HistGradientBoostingRegressor) and getattr(
            model, "is_categorical_", None) is not None and model.is_categorical_.any():
        return "category"
    return "object"


def is_linear(model: Any) -> bool:
    coef = getattr(model, "coef_", None)
    return isinstance(model, LinearModel) and coef is not None and np.ndim(coef) == 1


PIPELINE = ModelKind(
    name="sklearn-pipeline", label="scikit-learn Pipeline", fast_path="tree tables",
    notes="tree tables when the last step is a tree ensemble below and every transformer acts "
          "column by column (StandardScaler, MinMaxScaler, MaxAbsScaler, RobustScaler, "
          "SimpleImputer without indicators, OneHotEncoder and OrdinalEncoder on text columns, "
          "passthrough, in a ColumnTransformer or a Pipeline); a closed form when the last step "
          "is a linear model under the same transformers; brute force otherwise",
    recognises=lambda model: isinstance(model, Pipeline),
    feature_names=feature_names, n_features=n_features, call=call,
)
TREES = ModelKind(
    name="sklearn-trees", label="scikit-learn tree ensemble", fast_path="tree tables",
    notes="HistGradientBoosting (identity-link losses, numeric columns), GradientBoosting "
          "(constant init), RandomForest, ExtraTrees, DecisionTree regressors on numeric "
          "columns; brute force for a log link, a HistGradientBoosting reading text columns "
          "or a GradientBoosting with an estimator as init",
    recognises=lambda model: isinstance(model, TREE_ENSEMBLES),
    feature_names=feature_names, n_features=n_features, call=call, category_dtype=category_dtype,
)
LINEAR = ModelKind(
    name="sklearn-linear", label="scikit-learn linear model", fast_path="closed form",
    notes="an intercept plus coef_ times each numeric column (least squares, ridge, lasso, "
          "quantile, Huber...); generalized linear models have a link: brute force",
    recognises=is_linear,
    feature_names=feature_names, n_features=n_features, call=call,
)
ESTIMATOR = ModelKind(
    name="sklearn", label="scikit-learn estimator", fast_path="brute force",
    notes="any other fitted regressor: exact masking by batched brute force",
    recognises=lambda model: isinstance(model, BaseEstimator) and hasattr(model, "predict"),
    feature_names=feature_names, n_features=n_features, call=call,
)

"""Adapters for fitted scikit-learn estimators and Pipelines that read the raw table.

The players are the raw columns; a Pipeline's transformers run on each decoded (hybrid) row, so
the one-hot columns of one raw column move together. Which masking path an instance gets is
decided when its trees are read (core.games.tree_extract): tree tables for the tree ensembles
below and for Pipelines whose transformers act column by column and monotonically (scalers,
imputers) or on categories (one-hot, ordinal); brute force otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
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

import cpdecomp.core.models.lightgbm_model as lightgbm_model
import cpdecomp.core.models.xgboost_model as xgboost_model
from cpdecomp.core.models.base import ModelKind, text_levels
from cpdecomp.core.models.pipeline_columns import encoder_categories, encoder_numbers
from cpdecomp.core.typing import FloatArray

LOG_LINK_LOSSES = {"gamma", "poisson"}
"""HistGradientBoosting losses whose prediction is exp(raw tree sum)."""

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


def tree_link(model: Any) -> str | None:
    """'log' for a histogram boosting with a gamma or Poisson loss."""
    if isinstance(model, HistGradientBoostingRegressor) and model.loss in LOG_LINK_LOSSES:
        return "log"
    return None


def tree_margin(model: Any, frame: pd.DataFrame) -> FloatArray:
    """A log-link histogram boosting's raw margin: the sum of its trees (exp of it is its
    predict)."""
    data = frame if feature_names(model) is not None else frame.to_numpy()
    return np.asarray(model._raw_predict(data), dtype=float)[:, 0]


def _last_step_kind(last: Any) -> tuple[Callable[[Any], str | None],
                                         Callable[[Any, pd.DataFrame], FloatArray]]:
    """(link, margin) of a Pipeline's last step: a booster's own, else a tree ensemble's."""
    for library in (lightgbm_model, xgboost_model):
        if library.recognises(last):
            return library.link, library.margin
    return tree_link, tree_margin


def pipeline_link(pipeline: Pipeline) -> str | None:
    """The link of a Pipeline's last step (the transformers before it have none)."""
    last = pipeline.steps[-1][1]
    return _last_step_kind(last)[0](last)


def pipeline_margin(pipeline: Pipeline, frame: pd.DataFrame) -> FloatArray:
    """The raw margin of a Pipeline whose last step has a link."""
    last = pipeline.steps[-1][1]
    transformed = pipeline[:-1].transform(frame)
    if not isinstance(transformed, pd.DataFrame):
        transformed = pd.DataFrame(np.asarray(transformed))
    return _last_step_kind(last)[1](last, transformed)


def category_dtype(model: Any) -> str:
    """A bare histogram boosting reads strings only as pandas categories ('from_dtype')."""
    if isinstance(model, HistGradientBoostingRegressor) and getattr(
            model, "is_categorical_", None) is not None and model.is_categorical_.any():
        return "category"
    return "object"


def tree_categories(model: Any) -> dict[int, tuple[str, ...]]:
    """A histogram boosting's text categories ('from_dtype'), read from its own encoder; the
    other tree ensembles read numbers only."""
    if not isinstance(model, HistGradientBoostingRegressor) or model._preprocessor is None:
        return {}
    encoder = model._preprocessor.named_transformers_["encoder"]
    columns = np.flatnonzero(model.is_categorical_)
    return {int(j): text_levels(seen) for j, seen in zip(columns, encoder.categories_,
                                                         strict=True)}


def pipeline_categories(pipeline: Pipeline) -> dict[int, tuple[str, ...]] | None:
    """The text categories of a Pipeline's encoders (OneHotEncoder, OrdinalEncoder), by raw
    column; None when it has no fitted column count to map them by."""
    n = n_features(pipeline)
    return None if n is None else encoder_categories(pipeline[:-1], n)


def pipeline_numbers(pipeline: Pipeline) -> dict[int, tuple[float, ...]]:
    """The numbers a Pipeline's encoders read as categories, by raw column."""
    n = n_features(pipeline)
    return {} if n is None else encoder_numbers(pipeline[:-1], n)


def is_linear(model: Any) -> bool:
    coef = getattr(model, "coef_", None)
    return isinstance(model, LinearModel) and coef is not None and np.ndim(coef) == 1


PIPELINE = ModelKind(
    name="sklearn-pipeline", label="scikit-learn Pipeline", fast_path="tree tables",
    notes="tree tables when the last step is a tree ensemble below and every transformer acts "
          "column by column (StandardScaler, MinMaxScaler, MaxAbsScaler, RobustScaler, "
          "SimpleImputer without indicators, OneHotEncoder and OrdinalEncoder on text columns or "
          "integer codes, "
          "passthrough, in a ColumnTransformer or a Pipeline), on the log scale for a last step "
          "with a log link; a closed form when the last step is a linear model under the same "
          "transformers; brute force otherwise",
    recognises=lambda model: isinstance(model, Pipeline),
    feature_names=feature_names, n_features=n_features, call=call,
    link=pipeline_link, margin=pipeline_margin, categories=pipeline_categories,
    number_categories=pipeline_numbers,
)
TREES = ModelKind(
    name="sklearn-trees", label="scikit-learn tree ensemble", fast_path="tree tables",
    notes="HistGradientBoosting (identity-link losses; gamma and poisson on the log scale, "
          "averaged there when features are removed; numeric columns), GradientBoosting "
          "(constant init), RandomForest, ExtraTrees, DecisionTree regressors on numeric "
          "columns; brute force for a HistGradientBoosting reading text columns or a "
          "GradientBoosting with an estimator as init",
    recognises=lambda model: isinstance(model, TREE_ENSEMBLES),
    feature_names=feature_names, n_features=n_features, call=call, category_dtype=category_dtype,
    link=tree_link, margin=tree_margin, categories=tree_categories,
)
LINEAR = ModelKind(
    name="sklearn-linear", label="scikit-learn linear model", fast_path="closed form",
    notes="an intercept plus coef_ times each numeric column (least squares, ridge, lasso, "
          "quantile, Huber...); generalized linear models have a link: brute force",
    recognises=is_linear,
    feature_names=feature_names, n_features=n_features, call=call,
    categories=lambda model: {},  # numbers only
)
ESTIMATOR = ModelKind(
    name="sklearn", label="scikit-learn estimator", fast_path="brute force",
    notes="any other fitted regressor: exact masking by batched brute force",
    recognises=lambda model: isinstance(model, BaseEstimator) and hasattr(model, "predict"),
    feature_names=feature_names, n_features=n_features, call=call,
)

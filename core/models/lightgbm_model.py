"""Adapter for fitted LightGBM models (Booster, LGBMRegressor), imported only when used."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cpdecomp.core.models.base import ModelKind, text_levels
from cpdecomp.core.typing import FloatArray


def recognises(model: Any) -> bool:
    return type(model).__module__.split(".")[0] == "lightgbm" and hasattr(model, "predict")


def booster(model: Any) -> Any:
    return model.booster_ if hasattr(model, "booster_") else model


def feature_names(model: Any) -> list[str] | None:
    names = list(booster(model).feature_name())
    # LightGBM names columns of an unnamed array Column_0, Column_1, ...
    return None if names == [f"Column_{i}" for i in range(len(names))] else names


def n_features(model: Any) -> int | None:
    return int(booster(model).num_feature())


def category_dtype(model: Any) -> str:
    """Text columns fitted as pandas categories are given as pandas categories again."""
    return "category" if booster(model).pandas_categorical else "object"


def categories(model: Any) -> dict[int, tuple[str, ...]] | None:
    """The text categories of the columns fitted as pandas categories.

    `pandas_categorical` lists them for those columns in column order, without naming the
    columns; the categorical features are those whose feature_infos hold values. When more
    features are categorical (integer codes named in categorical_feature) the lists cannot be
    placed: None.
    """
    raw = booster(model)
    listed = raw.pandas_categorical or []
    if not listed:
        return {}
    infos = raw.dump_model(num_iteration=1).get("feature_infos", {})
    names = raw.feature_name()
    categorical = [j for j, name in enumerate(names) if infos.get(name, {}).get("values")]
    if len(categorical) != len(listed):
        return None
    return {j: text_levels(levels) for j, levels in zip(categorical, listed, strict=True)}


LOG_LINKS = {"poisson", "tweedie", "gamma"}
"""Objectives whose prediction is exp(raw score)."""


def call(model: Any, frame: pd.DataFrame) -> FloatArray:
    data = frame if feature_names(model) is not None else frame.to_numpy(dtype=float)
    return np.asarray(model.predict(data), dtype=float)


def margin(model: Any, frame: pd.DataFrame) -> FloatArray:
    """The raw score (log scale) of a booster with a log link."""
    data = frame if feature_names(model) is not None else frame.to_numpy(dtype=float)
    return np.asarray(model.predict(data, raw_score=True), dtype=float)


def link(model: Any) -> str | None:
    # The first tree's dump carries the objective's name (its parameters follow a space).
    objective = str(booster(model).dump_model(num_iteration=1).get("objective", "")).split()
    return "log" if objective and objective[0] in LOG_LINKS else None


LIGHTGBM = ModelKind(
    name="lightgbm", label="LightGBM", fast_path="tree tables",
    notes="gbdt boosters with an identity link (regression, regression_l1, huber, fair, "
          "quantile) or a log link (poisson, tweedie, gamma: tables on the log scale, averaged "
          "there when features are removed), read from dump_model(): thresholds with <=, "
          "missing types None/Zero/NaN and default directions, categorical splits (integer "
          "codes or pandas categories); brute force for linear trees and rf boosting",
    recognises=recognises, feature_names=feature_names, n_features=n_features, call=call,
    category_dtype=category_dtype, spelled=lambda column: column.replace(" ", "_"),
    link=link, margin=margin, categories=categories,
)

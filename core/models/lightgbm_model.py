"""Adapter for fitted LightGBM models (Booster, LGBMRegressor), imported only when used."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cpdecomp.core.models.base import ModelKind
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


def call(model: Any, frame: pd.DataFrame) -> FloatArray:
    data = frame if feature_names(model) is not None else frame.to_numpy(dtype=float)
    return np.asarray(model.predict(data), dtype=float)


LIGHTGBM = ModelKind(
    name="lightgbm", label="LightGBM", fast_path="tree tables",
    notes="gbdt boosters with an identity link (regression, regression_l1, huber, fair, "
          "quantile), read from dump_model(): thresholds with <=, missing types None/Zero/NaN "
          "and default directions, categorical splits (integer codes or pandas categories); "
          "brute force for log links, linear trees and rf boosting",
    recognises=recognises, feature_names=feature_names, n_features=n_features, call=call,
    category_dtype=category_dtype, spelled=lambda column: column.replace(" ", "_"),
)

"""Adapter for fitted XGBoost models (Booster, XGBRegressor), imported only when used."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from core.models.base import ModelKind
from core.typing import FloatArray


def _module(model: Any) -> str:
    return type(model).__module__.split(".")[0]


def recognises(model: Any) -> bool:
    return _module(model) == "xgboost" and hasattr(model, "predict")


def booster(model: Any) -> Any:
    return model.get_booster() if hasattr(model, "get_booster") else model


def feature_names(model: Any) -> list[str] | None:
    names = booster(model).feature_names
    return None if names is None else list(names)


def n_features(model: Any) -> int | None:
    return int(booster(model).num_features())


def call(model: Any, frame: pd.DataFrame) -> FloatArray:
    data = frame if feature_names(model) is not None else frame.to_numpy(dtype=float)
    if hasattr(model, "get_booster"):
        return np.asarray(model.predict(data), dtype=float)
    return np.asarray(model.inplace_predict(data), dtype=float)


XGBOOST = ModelKind(
    name="xgboost", label="XGBoost", fast_path="tree tables",
    notes="gbtree boosters with an identity link (reg:squarederror, reg:absoluteerror, "
          "reg:pseudohubererror, one reg:quantileerror level) on numeric columns, read from the "
          "booster's JSON: float32 thresholds, default directions, base score; brute force for "
          "other objectives (log links), dart and gblinear",
    recognises=recognises, feature_names=feature_names, n_features=n_features, call=call,
)

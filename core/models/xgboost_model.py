"""Adapter for fitted XGBoost models (Booster, XGBRegressor), imported only when used."""

from __future__ import annotations

import json
import math
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from cpdecomp.core.models.base import ModelKind, text_levels
from cpdecomp.core.optional import require
from cpdecomp.core.typing import FloatArray

IDENTITY_LINKS = {"reg:squarederror", "reg:absoluteerror", "reg:pseudohubererror",
                  "reg:quantileerror"}
"""Objectives whose prediction is base_score plus the sum of leaf values (no link)."""
LOG_LINKS = {"count:poisson", "reg:gamma", "reg:tweedie"}
"""Objectives whose prediction is exp(log(base_score) + the sum of leaf values): the JSON model
keeps base_score on the response scale, and the booster starts its margin at its log."""


@dataclass(frozen=True)
class BoosterTrees:
    """The trees of a gbtree booster with an identity or a log link, read from its JSON model.

    XGBoost stores thresholds and leaf values as float32; its predict compares
    float32(x) < threshold (NaN takes the default direction) and sums leaves in float32.
    """

    base: float
    """Where the margin starts: base_score, or its log under a log link."""
    link: str | None
    """None (identity) or 'log'."""
    trees: list[dict]
    """Per tree: left, right, feature, threshold (float32), default_left, value (float32)."""
    n_trees: int
    """Trees the model's own predict uses (early stopping keeps the best iteration's)."""


_TREES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _float32(text: str) -> float:
    return float(np.float32(text.strip("[]")))


def booster_trees(model: Any) -> BoosterTrees | None:
    """The booster's trees when they are a plain tree sum we can read exactly, else None."""
    raw = booster(model)
    try:
        return _TREES[raw] if raw in _TREES else _TREES.setdefault(raw, _read(model, raw))
    except TypeError:  # not weak-referenceable: read it each time
        return _read(model, raw)


def _read(model: Any, raw: Any) -> BoosterTrees | None:
    learner = json.loads(bytes(raw.save_raw("json")))["learner"]
    params = learner["learner_model_param"]
    booster_json = learner["gradient_booster"]
    objective = learner["objective"]["name"]
    if (objective not in IDENTITY_LINKS | LOG_LINKS or booster_json["name"] != "gbtree"
            or int(params.get("num_target", "1")) != 1 or int(params.get("num_class", "0")) > 1):
        return None
    missing = getattr(model, "missing", math.nan)
    if missing is not None and not (isinstance(missing, float) and math.isnan(missing)):
        return None  # another value marks missing cells: the trees' NaN rule does not apply
    trees = booster_json["model"]["trees"]
    if any(any(t["split_type"]) for t in trees) or len(set(booster_json["model"]["tree_info"])) > 1:
        return None  # categorical splits or several outputs
    indptr = booster_json["model"].get("iteration_indptr")
    n_trees = len(trees)
    best = getattr(model, "best_iteration", None) if hasattr(model, "get_booster") else None
    if best is not None and indptr is not None:
        n_trees = int(indptr[int(best) + 1])
    parsed = [{
        "left": t["left_children"], "right": t["right_children"], "feature": t["split_indices"],
        "threshold": np.asarray(t["split_conditions"], dtype=np.float32),
        "default_left": t["default_left"],
    } for t in trees[:n_trees]]
    link = "log" if objective in LOG_LINKS else None
    base = _float32(params["base_score"])
    # XGBoost takes the log in float32 (ProbToMargin) before adding its float32 leaves.
    base = float(np.log(np.float32(base))) if link == "log" else base
    return BoosterTrees(base, link, parsed, n_trees)


def leaf_sum(model: Any, frame: pd.DataFrame, trees: BoosterTrees) -> FloatArray:
    """base + Σ leaf values in float64, over the leaves the booster itself routes rows to: the
    prediction under an identity link, the raw margin under a log link."""
    xgboost = require("xgboost", "an XGBoost model")
    data = xgboost.DMatrix(frame if feature_names(model) is not None
                           else frame.to_numpy(dtype=float))
    leaves = booster(model).predict(data, pred_leaf=True, iteration_range=(0, trees.n_trees))
    leaves = np.asarray(leaves, dtype=np.int64).reshape(len(frame), -1)
    total = np.full(len(frame), trees.base)
    for t, tree in enumerate(trees.trees):
        total += tree["threshold"].astype(np.float64)[leaves[:, t]]
    return total


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
    """The booster's own routing of each row, summed in float64 when its trees can be read
    (XGBoost's predict adds in float32: ~1e-7 relative apart), else its own predict."""
    trees = booster_trees(model)
    if trees is not None:
        total = leaf_sum(model, frame, trees)
        return total if trees.link is None else np.exp(total)
    return _own_predict(model, frame, margin=False)


def margin(model: Any, frame: pd.DataFrame) -> FloatArray:
    """The raw margin (log scale) of a booster with a log link: its leaves summed in float64
    from log(base_score), or its own margin output when its trees cannot be read."""
    trees = booster_trees(model)
    if trees is not None:
        return leaf_sum(model, frame, trees)
    return _own_predict(model, frame, margin=True)


def _own_predict(model: Any, frame: pd.DataFrame, margin: bool) -> FloatArray:
    data = frame if feature_names(model) is not None else frame.to_numpy(dtype=float)
    if hasattr(model, "get_booster"):
        return np.asarray(model.predict(data, output_margin=margin), dtype=float)
    kind = "margin" if margin else "value"
    return np.asarray(model.inplace_predict(data, predict_type=kind), dtype=float)


def _reads_categories(model: Any) -> bool:
    return "c" in (booster(model).feature_types or ())


def category_dtype(model: Any) -> str:
    """A booster fitted with enable_categorical reads text columns as pandas categories."""
    return "category" if _reads_categories(model) else "object"


def categories(model: Any) -> dict[int, tuple[str, ...]] | None:
    """The text categories a booster fitted with enable_categorical stores (XGBoost 3.1 and
    later keep them in the model and re-code a frame's categories by value); None where an
    older booster reads the frame's own category codes and keeps no names (a model saved by
    one gives an empty tuple: no names to match)."""
    if not _reads_categories(model):
        return {}
    stored = getattr(booster(model), "get_categories", None)
    if stored is None:
        return None
    kinds = booster(model).feature_types
    return {j: text_levels([] if levels is None else levels.to_pylist())
            for j, (_, levels) in enumerate(stored(export_to_arrow=True).to_arrow())
            if kinds[j] == "c"}


def link(model: Any) -> str | None:
    config = json.loads(booster(model).save_config())
    return "log" if config["learner"]["objective"]["name"] in LOG_LINKS else None


XGBOOST = ModelKind(
    name="xgboost", label="XGBoost", fast_path="tree tables",
    notes="gbtree boosters with an identity link (reg:squarederror, reg:absoluteerror, "
          "reg:pseudohubererror, one reg:quantileerror level) or a log link (count:poisson, "
          "reg:gamma, reg:tweedie: tables on the log scale, averaged there when features are "
          "removed) on numeric columns, read from the booster's JSON: float32 thresholds, "
          "default directions, base score. Predictions are the booster's own leaves summed in "
          "float64 (its predict sums in float32). Brute force (its own predict) for other "
          "objectives, dart, gblinear, categorical splits, several outputs or a non-NaN "
          "missing value",
    recognises=recognises, feature_names=feature_names, n_features=n_features, call=call,
    link=link, margin=margin, category_dtype=category_dtype, categories=categories,
)

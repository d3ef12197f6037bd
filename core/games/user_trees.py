"""Tree tables for a user's fitted model: which extractor reads it, and how its input columns
map to the raw columns (players).

* a bare tree model on numeric columns: its input columns are the players;
* LightGBM with text columns fitted as pandas categories: those splits are rewritten through
  LightGBM's own category codes;
* a Pipeline: the trees of its last step, rewritten through its preprocessing when every
  transformer acts column by column (core.models.pipeline_columns);
* anything else (and an XGBoost last step in a Pipeline, whose predict sums leaves in float32
  while the tables sum in float64): None, so masking uses brute force.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

import cpdecomp.core.games.tree_extract_lightgbm as tree_extract_lightgbm
import cpdecomp.core.games.tree_extract_sklearn as tree_extract_sklearn
import cpdecomp.core.games.tree_extract_xgboost as tree_extract_xgboost
from cpdecomp.core.games.tree_records import LeafEnsemble
from cpdecomp.core.games.tree_rewrite import PreprocessedInputs, rewrite
from cpdecomp.core.models import model_kind
from cpdecomp.core.models.lightgbm_model import booster as lightgbm_booster
from cpdecomp.core.models.pipeline_columns import ColumnSources, column_sources
from cpdecomp.core.models.user_model import UserModelPredictor

INPUT_LEAVES: dict[str, Callable[[Any, bool], LeafEnsemble | None]] = {
    "sklearn-trees": tree_extract_sklearn.input_leaves,
    "xgboost": tree_extract_xgboost.input_leaves,
    "lightgbm": tree_extract_lightgbm.input_leaves,
}
"""Readers of a bare model's trees over its input columns; with the flag set, a model with a log
link too, read on its link scale (the predictor then gives its raw margin)."""
PIPELINE_LAST_STEPS = {"sklearn-trees", "lightgbm"}


def _lightgbm_codes(model: Any, decoder) -> Callable[[pd.DataFrame], np.ndarray]:
    """The values LightGBM's trees see: pandas categories become its training codes."""
    categories = lightgbm_booster(model).pandas_categorical or []

    def transform(frame: pd.DataFrame) -> np.ndarray:
        out = frame.copy()
        text = [name for name in frame.columns
                if isinstance(frame[name].dtype, pd.CategoricalDtype)]
        for name, known in zip(text, categories, strict=True):
            codes = out[name].cat.set_categories(known).cat.codes.to_numpy(dtype=float)
            out[name] = np.where(codes < 0, np.nan, codes)
        return out.to_numpy(dtype=float)

    return transform


def _numbers(frame: pd.DataFrame) -> np.ndarray:
    return frame.to_numpy(dtype=float)


def _bare(ensemble: LeafEnsemble, predictor: UserModelPredictor) -> LeafEnsemble | None:
    decoder = predictor.decoder
    if not decoder.has_categories and not decoder.has_coded_numbers:
        return ensemble
    n = len(decoder.kinds)
    identity = ColumnSources(tuple(range(n)), (True,) * n)
    if not decoder.has_categories:
        # Numbers coded as categories for another model: its splits on their values are
        # rewritten as tests on the codes.
        return rewrite(ensemble, PreprocessedInputs(_numbers, identity, decoder,
                                                    numeric_as_is=True))
    if predictor.kind.name != "lightgbm":
        return None  # text columns read as pandas categories by scikit-learn or XGBoost
    return rewrite(ensemble, PreprocessedInputs(
        _lightgbm_codes(predictor.model, decoder), identity, decoder, "category",
        numeric_as_is=True))


def _pipeline(predictor: UserModelPredictor) -> LeafEnsemble | None:
    pipeline = predictor.model
    last = pipeline.steps[-1][1]
    name = model_kind(last).name
    if name not in PIPELINE_LAST_STEPS:
        return None
    sources = column_sources(pipeline[:-1], len(predictor.decoder.kinds))
    ensemble = INPUT_LEAVES[name](last, predictor.link is not None)
    if sources is None or ensemble is None:
        return None
    try:
        return rewrite(ensemble, PreprocessedInputs(pipeline[:-1].transform, sources,
                                                    predictor.decoder))
    except (ValueError, TypeError):  # the preprocessing refused a probe row: not column-wise
        return None


def user_leaf_ensemble(predictor: UserModelPredictor) -> LeafEnsemble | None:
    """The user's model as base + leaf values over the players, or None (brute force)."""
    if predictor.kind.name == "sklearn-pipeline":
        return _pipeline(predictor)
    extract = INPUT_LEAVES.get(predictor.kind.name)
    ensemble = None if extract is None else extract(predictor.model, predictor.link is not None)
    return None if ensemble is None else _bare(ensemble, predictor)

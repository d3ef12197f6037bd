"""Which reader turns a component's predictor into a tree sum (base + leaf values), if any.

Built-in models are read by core.games.tree_extract, a user's fitted models (scikit-learn trees
and Pipelines, XGBoost, LightGBM) by core.games.user_trees; a mean of tree sums is one tree sum.
Anything else returns None and is evaluated by brute force.
"""

from __future__ import annotations

from cpdecomp.core.games.tree_extract import builtin_leaf_ensemble
from cpdecomp.core.games.tree_records import LeafEnsemble, mean_of
from cpdecomp.core.games.user_trees import user_leaf_ensemble
from cpdecomp.core.models import MeanPredictor, Predictor, UserModelPredictor


def leaf_ensemble(predictor: Predictor) -> LeafEnsemble | None:
    """The predictor as base + leaf values, or None when it is not a supported tree sum."""
    if isinstance(predictor, MeanPredictor):
        return mean_of([leaf_ensemble(part) for part in predictor.parts])
    if isinstance(predictor, UserModelPredictor):
        # Reading a user's trees can cost probes of its pipeline: once per predictor.
        if "_leaf_ensemble" not in predictor.__dict__:
            predictor.__dict__["_leaf_ensemble"] = user_leaf_ensemble(predictor)
        return predictor.__dict__["_leaf_ensemble"]
    return builtin_leaf_ensemble(predictor)

"""scikit-learn's trees as leaves with conditions on their input columns.

Decision trees, random and extra-trees forests and gradient boosting compare float32(x) <=
threshold (a double) and send NaN the way `missing_go_to_left` says; histogram gradient
boosting is read by core.games.tree_extract. The conditions' `player` is the input column.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.dummy import DummyRegressor
from sklearn.ensemble import (
    ExtraTreesRegressor,
    GradientBoostingRegressor,
    HistGradientBoostingRegressor,
    RandomForestRegressor,
)
from sklearn.tree import DecisionTreeRegressor

from cpdecomp.core.games.tree_extract import hgb_leaves
from cpdecomp.core.games.tree_records import Condition, LeafEnsemble, leaf_paths


def _tree_leaves(estimators: list, scale: float) -> tuple[list, list, list]:
    values, paths, trees = [], [], []
    for t, estimator in enumerate(estimators):
        tree = estimator.tree_
        missing = getattr(tree, "missing_go_to_left", np.zeros(tree.node_count, dtype=bool))
        for leaf, path in leaf_paths(
            lambda i, tree=tree: tree.children_left[i] == -1,
            lambda i, tree=tree: (int(tree.children_left[i]), int(tree.children_right[i])),
            lambda i, go_left, tree=tree, missing=missing: Condition(
                int(tree.feature[i]), False, float(tree.threshold[i]), bool(missing[i]), None,
                go_left, single_precision=True),
        ):
            values.append(float(tree.value[leaf, 0, 0]) * scale)
            paths.append(path)
            trees.append(t)
    return values, paths, trees


def input_leaves(model: Any, margin: bool = False) -> LeafEnsemble | None:
    """A fitted scikit-learn tree regressor over its input columns, or None; a log-link
    histogram boosting only with `margin` (its raw margin, which the caller's predictor gives)."""
    if isinstance(model, HistGradientBoostingRegressor):
        preprocessor = model._preprocessor
        if preprocessor is not None and not all(
                np.issubdtype(np.asarray(seen).dtype, np.number) for seen in
                preprocessor.named_transformers_["encoder"].categories_):
            return None  # text categories read from pandas dtypes: brute force (not mapped)
        return hgb_leaves(model, margin)
    if isinstance(model, RandomForestRegressor | ExtraTreesRegressor):
        if model.n_outputs_ != 1:
            return None
        values, paths, trees = _tree_leaves(model.estimators_, 1.0 / len(model.estimators_))
        return LeafEnsemble(0.0, np.array(values), paths, np.array(trees))
    if isinstance(model, DecisionTreeRegressor):  # ExtraTreeRegressor is one too
        if model.n_outputs_ != 1:
            return None
        values, paths, trees = _tree_leaves([model], 1.0)
        return LeafEnsemble(0.0, np.array(values), paths, np.array(trees))
    if isinstance(model, GradientBoostingRegressor):
        if isinstance(model.init_, DummyRegressor):
            base = float(np.ravel(model.init_.constant_)[0])
        elif isinstance(model.init_, str) and model.init_ == "zero":
            base = 0.0
        else:
            return None  # an estimator as init: not a constant
        values, paths, trees = _tree_leaves(list(model.estimators_[:, 0]), model.learning_rate)
        return LeafEnsemble(base, np.array(values), paths, np.array(trees))
    return None

"""XGBoost's trees (read from the booster's JSON) as leaves with conditions on input columns.

XGBoost goes left when float32(x) < threshold, with float32 thresholds; for float32 values
that is float32(x) <= the next float32 below the threshold, the kernels' single-precision test.
NaN takes the node's default direction. Under a log link the trees sum to the raw margin,
from log(base_score).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cpdecomp.core.games.tree_records import Condition, LeafEnsemble, leaf_paths
from cpdecomp.core.models.xgboost_model import booster_trees


def _condition(tree: dict, node: int, go_left: bool) -> Condition:
    below = np.nextafter(tree["threshold"][node], np.float32(-np.inf))
    return Condition(int(tree["feature"][node]), False, float(below),
                     bool(tree["default_left"][node]), None, go_left, single_precision=True)


def input_leaves(model: Any, margin: bool = False) -> LeafEnsemble | None:
    """A gbtree booster over its input columns, or None; a log-link booster only with `margin`
    (its raw margin, which the caller's predictor must give)."""
    read = booster_trees(model)
    if read is None or (read.link is not None and not margin):
        return None
    values, paths, trees = [], [], []
    for t, tree in enumerate(read.trees):
        for leaf, path in leaf_paths(
            lambda i, tree=tree: tree["left"][i] == -1,
            lambda i, tree=tree: (tree["left"][i], tree["right"][i]),
            lambda i, go_left, tree=tree: _condition(tree, i, go_left),
        ):
            values.append(float(tree["threshold"][leaf]))  # a leaf's value sits there
            paths.append(path)
            trees.append(t)
    return LeafEnsemble(read.base, np.array(values), paths, np.array(trees))

"""LightGBM's trees (read from `dump_model()`) as leaves with conditions on input columns.

LightGBM compares doubles, x <= threshold. Its missing types: NaN (NaN takes the default
direction), None (NaN is read as 0.0) and Zero (0 and NaN take the default direction; exact
here only when that agrees with the threshold on the zero band, else the model stays on brute
force). A categorical split sends the listed integer categories left and NaN, negative values
and unlisted categories right. One case differs: LightGBM truncates a value in (-1, 0) to
category 0, the tables read it as negative (right); integer codes never fall there. Leaf
values already include the shrinkage, and the initial score is folded into the first tree.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cpdecomp.core.games.tree_records import (
    LEFT,
    N_CODES,
    RIGHT,
    Condition,
    LeafEnsemble,
    leaf_paths,
)
from cpdecomp.core.models.lightgbm_model import LOG_LINKS, booster

IDENTITY_LINKS = {"regression", "regression_l1", "huber", "fair", "quantile", "mape"}
ZERO_BAND = float(np.float32(1e-35))
"""LightGBM's kZeroThreshold: |x| <= this counts as zero for missing type Zero."""


class _NotExact(Exception):
    """A split the tree-table conditions cannot express exactly."""


def _condition(node: dict, go_left: bool) -> Condition:
    feature = int(node["split_feature"])
    default_left = bool(node["default_left"])
    if node["decision_type"] == "==":
        categories = [int(c) for c in str(node["threshold"]).split("||")]
        if max(categories) >= N_CODES:
            raise _NotExact
        codes = np.full(N_CODES, RIGHT, dtype=np.uint8)
        codes[categories] = LEFT
        return Condition(feature, True, 0.0, False, codes, go_left)
    threshold = float(node["threshold"])
    missing = node["missing_type"]
    if missing == "NaN":
        missing_left = default_left
    elif missing == "None":
        missing_left = 0.0 <= threshold
    else:  # Zero: values in the zero band go the default way, which must be the threshold's
        band_left = {threshold >= ZERO_BAND, not threshold < -ZERO_BAND}
        if len(band_left) != 1 or band_left.pop() != default_left:
            raise _NotExact
        missing_left = default_left
    return Condition(feature, False, threshold, missing_left, None, go_left)


def input_leaves(model: Any, margin: bool = False) -> LeafEnsemble | None:
    """A gbdt booster over its input columns, or None; a log-link booster only with `margin`
    (its raw score, which the caller's predictor must give)."""
    dump = booster(model).dump_model()
    objective = str(dump.get("objective", "")).split()
    readable = IDENTITY_LINKS | (LOG_LINKS if margin else set())
    if (not objective or objective[0] not in readable or "sqrt" in objective
            or dump.get("average_output") or dump.get("num_tree_per_iteration", 1) != 1):
        return None
    values, paths, trees = [], [], []
    try:
        for t, info in enumerate(dump["tree_info"]):
            nodes: list[dict] = []

            def index(node: dict, nodes: list[dict] = nodes) -> int:
                nodes.append(node)
                return len(nodes) - 1

            index(info["tree_structure"])
            for leaf, path in leaf_paths(
                lambda i, nodes=nodes: "leaf_value" in nodes[i],
                lambda i, nodes=nodes: (index(nodes[i]["left_child"]),
                                        index(nodes[i]["right_child"])),
                lambda i, go_left, nodes=nodes: _condition(nodes[i], go_left),
            ):
                if "leaf_coeff" in nodes[leaf] or "leaf_features" in nodes[leaf]:
                    return None  # linear trees
                values.append(float(nodes[leaf]["leaf_value"]))
                paths.append(path)
                trees.append(t)
    except _NotExact:
        return None
    return LeafEnsemble(0.0, np.array(values), paths, np.array(trees))

"""Reading fitted tree ensembles as leaves with conditions on the players' encoded values.

A leaf is reached when every split on its path sends the row its way. Each split is rewritten
as a test on one player's encoded value (a threshold, or a table over category codes), with the
model's own rule for missing values, so a leaf's cell per player can be checked for any row.
Forests on the one-hot design matrix are rewritten through the design's column roles.

Supported: histogram gradient boosting with an identity link (squared error, absolute error,
quantile), or a log link (gamma, Poisson) read on its link scale (a raw tree sum) when its
predictor gives that scale, random forests, and the leaf-quantile forest (a user's fitted
models are read by core.games.user_trees; core.games.trees chooses the reader). Anything else
returns None and is evaluated by brute force.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor

from cpdecomp.core.games.tree_records import (
    LEFT,
    MISSING,
    N_CODES,
    RIGHT,
    Condition,
    LeafEnsemble,
    leaf_paths,
)
from cpdecomp.core.models import (
    DesignMatrix,
    DesignPredictor,
    EncodedPredictor,
    LeafQuantileForest,
    MarginPredictor,
    Predictor,
)
from cpdecomp.core.models.sklearn_model import LOG_LINK_LOSSES

IDENTITY_LINK_LOSSES = {"squared_error", "absolute_error", "quantile"}


@dataclass(frozen=True)
class _BoostingInputs:
    """How gradient boosting re-encodes the encoded matrix before its trees see it.

    With categorical features, scikit-learn puts them first (a ColumnTransformer) and maps each
    category code to its rank among the codes seen in training (an OrdinalEncoder).
    """

    player_of: np.ndarray
    """Player of each internal feature."""
    internal_code: dict[int, np.ndarray]
    """Per categorical player: internal code of each of our codes, -1 when unseen."""
    known: np.ndarray
    f_idx_map: np.ndarray

    @classmethod
    def of(cls, model: HistGradientBoostingRegressor) -> _BoostingInputs:
        known, f_idx_map = model._bin_mapper.make_known_categories_bitsets()
        preprocessor = model._preprocessor
        if preprocessor is None:
            players = np.arange(model.n_features_in_)
            return cls(players, {}, known, f_idx_map)
        categorical = np.flatnonzero(model.is_categorical_)
        players = np.r_[categorical, np.flatnonzero(~model.is_categorical_)]
        encoder = preprocessor.named_transformers_["encoder"]
        internal = {}
        for player, seen in zip(categorical, encoder.categories_, strict=True):
            lookup = np.full(N_CODES, -1, dtype=np.int64)
            for rank, code in enumerate(seen[~np.isnan(seen)]):
                if 0 <= code < N_CODES:
                    lookup[int(code)] = rank
            internal[int(player)] = lookup
        return cls(players, internal, known, f_idx_map)


def _hgb_condition(node: dict, go_left: bool, left_sets: np.ndarray,
                   inputs: _BoostingInputs) -> Condition:
    """A boosting split, with the rule of scikit-learn's predictor for codes and NaN."""
    feature = node["feature_idx"]
    player = int(inputs.player_of[feature])
    missing_left = bool(node["missing_go_to_left"])
    if not node["is_categorical"]:
        return Condition(player, False, node["num_threshold"], missing_left, None, go_left)
    codes = np.full(N_CODES, MISSING, dtype=np.uint8)  # unknown categories count as missing
    internal = inputs.internal_code.get(player, np.arange(N_CODES))
    for code in range(N_CODES):
        if internal[code] < 0:
            continue
        word, bit = divmod(int(internal[code]), 32)
        if (left_sets[node["bitset_idx"], word] >> bit) & 1:
            codes[code] = LEFT
        elif (inputs.known[inputs.f_idx_map[feature], word] >> bit) & 1:
            codes[code] = RIGHT
    return Condition(player, True, 0.0, missing_left, codes, go_left)


NODE_FIELDS = ("feature_idx", "num_threshold", "missing_go_to_left", "is_categorical",
               "bitset_idx", "is_leaf", "left", "right", "value")


def _hgb_nodes(nodes: np.ndarray) -> list[dict]:
    """The predictor's node records as plain Python values: reading fields of a numpy record
    one at a time costs microseconds each, and a forest has thousands of nodes."""
    columns = {name: nodes[name].tolist() for name in NODE_FIELDS}
    return [dict(zip(NODE_FIELDS, values, strict=True)) for values in
            zip(*(columns[name] for name in NODE_FIELDS), strict=True)]


def hgb_leaves(model: HistGradientBoostingRegressor, margin: bool = False) -> LeafEnsemble | None:
    """The boosting's trees, or None; with `margin`, a log-link model's too (its raw margin:
    the caller's predictor must give that scale, not the response)."""
    readable = IDENTITY_LINK_LOSSES | (LOG_LINK_LOSSES if margin else set())
    if model.loss not in readable or model.n_trees_per_iteration_ != 1:
        return None
    inputs = _BoostingInputs.of(model)
    values, paths, trees = [], [], []
    for tree, (predictor,) in enumerate(model._predictors):
        nodes = _hgb_nodes(predictor.nodes)
        for leaf, path in leaf_paths(
            lambda i, nodes=nodes: nodes[i]["is_leaf"],
            lambda i, nodes=nodes: (nodes[i]["left"], nodes[i]["right"]),
            lambda i, go_left, nodes=nodes, sets=predictor.raw_left_cat_bitsets: _hgb_condition(
                nodes[i], go_left, sets, inputs),
        ):
            values.append(nodes[leaf]["value"])
            paths.append(path)
            trees.append(tree)
    base = float(np.ravel(model._baseline_prediction)[0])
    return LeafEnsemble(base, np.array(values, dtype=np.float64), paths, np.array(trees))


def _forest_leaves(design: DesignMatrix, forest: RandomForestRegressor,
                   leaf_values: list[np.ndarray] | None = None) -> LeafEnsemble:
    values, paths, trees = [], [], []
    n_trees = len(forest.estimators_)
    for t, estimator in enumerate(forest.estimators_):
        tree = estimator.tree_
        table = tree.value[:, 0, 0] if leaf_values is None else leaf_values[t]
        for leaf, path in leaf_paths(
            lambda i, tree=tree: tree.children_left[i] == -1,
            lambda i, tree=tree: (int(tree.children_left[i]), int(tree.children_right[i])),
            lambda i, go_left, tree=tree: _design_condition(
                design, int(tree.feature[i]), float(tree.threshold[i]), go_left),
        ):
            values.append(float(table[leaf]) / n_trees)  # the forest averages its trees
            paths.append(path)
            trees.append(t)
    return LeafEnsemble(0.0, np.array(values), paths, np.array(trees))


def _design_condition(design: DesignMatrix, column: int, threshold: float,
                      go_left: bool) -> Condition:
    """A split 'expanded column <= threshold' as a test on the player's encoded value."""
    player, role, level = design.column_roles_[column]
    if role == "value":
        # Missing values were imputed with the median before the forest saw them.
        missing_left = bool(np.float32(design.fill_[player]) <= threshold)
        return Condition(player, False, threshold, missing_left, None, go_left,
                         single_precision=True)
    if role == "missing":
        present_left = 0.0 <= threshold
        if design.categorical_[player]:
            codes = np.full(N_CODES, LEFT if present_left else RIGHT, dtype=np.uint8)
            return Condition(player, True, 0.0, 1.0 <= threshold, codes, go_left)
        return Condition(player, False, np.inf if present_left else -np.inf, 1.0 <= threshold,
                         None, go_left)
    # One-hot level: the column is 1 for this code, 0 for other codes, missing or unseen.
    codes = np.full(N_CODES, LEFT if 0.0 <= threshold else RIGHT, dtype=np.uint8)
    codes[level] = LEFT if 1.0 <= threshold else RIGHT
    return Condition(player, True, 0.0, 0.0 <= threshold, codes, go_left)


def builtin_leaf_ensemble(predictor: Predictor) -> LeafEnsemble | None:
    """A built-in model's predictor as base + leaf values, or None when it is not a tree sum
    these readers support (core.games.trees dispatches a user's models elsewhere)."""
    if isinstance(predictor, LeafQuantileForest):
        return _forest_leaves(predictor.design, predictor.forest, predictor.leaf_values_)
    if isinstance(predictor, DesignPredictor) and isinstance(predictor.estimator,
                                                             RandomForestRegressor):
        return _forest_leaves(predictor.design, predictor.estimator)
    if isinstance(predictor, EncodedPredictor) and isinstance(predictor.estimator,
                                                              HistGradientBoostingRegressor):
        return hgb_leaves(predictor.estimator)
    if isinstance(predictor, MarginPredictor):
        return hgb_leaves(predictor.estimator, margin=True)
    return None

"""Random forest on the design matrix, and its leaf-quantile variant for CQR (seeded)."""

from __future__ import annotations

import numpy as np
from sklearn.ensemble import RandomForestRegressor

from cpdecomp.core.models.base import MAX_LEAVES, N_TREES
from cpdecomp.core.models.design import DesignMatrix, DesignPredictor
from cpdecomp.core.typing import FloatArray


class LeafQuantileForest:
    """Random-forest quantile model: each leaf holds the tau-quantile of its training targets.

    The prediction stays an average of leaf values (like the forest's mean), which keeps it a
    tree-ensemble sum; Meinshausen's weighted quantile would not be.
    """

    def __init__(self, design: DesignMatrix, forest: RandomForestRegressor, x: FloatArray,
                 y: FloatArray, tau: float) -> None:
        self.design = design
        self.forest = forest
        leaves = forest.apply(x)
        self.leaf_values_ = []
        for t, tree in enumerate(forest.estimators_):
            table = np.zeros(tree.tree_.node_count)
            ids = leaves[:, t]
            for leaf in np.unique(ids):
                table[leaf] = np.quantile(y[ids == leaf], tau)
            self.leaf_values_.append(table)

    def predict(self, encoded: FloatArray) -> FloatArray:
        leaves = self.forest.apply(self.design.transform(encoded))
        total = np.zeros(len(encoded))
        for t, table in enumerate(self.leaf_values_):
            total += table[leaves[:, t]]
        return total / len(self.leaf_values_)


class RandomForest:
    name = "rf"
    label = "Random forest"
    fast_path = "tree tables"

    def _forest(self, seed: int) -> RandomForestRegressor:
        # Leaves are capped so the trees stay shallow enough to explain (and tabulate) exactly.
        return RandomForestRegressor(
            n_estimators=N_TREES, min_samples_leaf=5, max_leaf_nodes=MAX_LEAVES,
            random_state=seed, n_jobs=-1,
        )

    def _fit(self, x: FloatArray, y: FloatArray, seed: int) -> RandomForestRegressor:
        forest = self._forest(seed).fit(x, y)
        # Threads add the trees' predictions in whatever order they finish; one thread keeps
        # predictions bit-for-bit repeatable (and null players exactly null).
        forest.n_jobs = 1
        return forest

    def point(self, x, y, categorical, seed, positive=False):
        # Leaf means of a positive target are positive, so no link is needed for gamma.
        design = DesignMatrix().fit(x, categorical)
        return DesignPredictor(design, self._fit(design.transform(x), y, seed))

    def quantile(self, x, y, categorical, seed, tau):
        design = DesignMatrix().fit(x, categorical)
        expanded = design.transform(x)
        return LeafQuantileForest(design, self._fit(expanded, y, seed), expanded, y, tau)

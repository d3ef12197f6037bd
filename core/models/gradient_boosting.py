"""Histogram gradient boosting: reads category codes natively (categorical splits, missing
values), seeded. Its identity-link losses are tree sums, and so is the gamma loss's raw margin
(log link): masking has exact tree tables either way (core.models.base.MASKING_SCALES)."""

from __future__ import annotations

from sklearn.ensemble import HistGradientBoostingRegressor

from cpdecomp.core.models.base import MAX_LEAVES, N_TREES
from cpdecomp.core.models.design import EncodedPredictor, MarginPredictor


class GradientBoosting:
    name = "gbm"
    label = "Gradient boosting"
    fast_path = "tree tables (on the log scale for the gamma family's log link)"

    def estimator(self, categorical, seed: int, **settings: object):
        """The built-in boosting's settings (sigma's too), unfitted."""
        return HistGradientBoostingRegressor(
            max_iter=N_TREES, max_leaf_nodes=MAX_LEAVES, learning_rate=0.1,
            categorical_features=categorical if categorical.any() else None,
            early_stopping=False, random_state=seed, **settings,
        )

    def point(self, x, y, categorical, seed, positive=False):
        if positive:
            # A log link keeps f > 0 everywhere, so the gamma family does not refuse real data.
            return MarginPredictor(self.estimator(categorical, seed, loss="gamma").fit(x, y))
        return EncodedPredictor(self.estimator(categorical, seed).fit(x, y))

    def quantile(self, x, y, categorical, seed, tau):
        estimator = self.estimator(categorical, seed, loss="quantile", quantile=tau)
        return EncodedPredictor(estimator.fit(x, y))

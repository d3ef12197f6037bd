"""Linear models on the design matrix: least squares, linear quantile regression, and an
unpenalized gamma GLM for the gamma family. All mask in closed form (the GLM on its log scale)."""

from __future__ import annotations

from sklearn.linear_model import GammaRegressor, LinearRegression, QuantileRegressor

from cpdecomp.core.models.design import (
    DesignMatrix,
    LinearDesignPredictor,
    LogLinearDesignPredictor,
)


class Linear:
    name = "linear"
    label = "Linear (least squares)"
    fast_path = "closed form (on the log scale for the gamma family's GLM)"

    def point(self, x, y, categorical, seed, positive=False):
        design = DesignMatrix().fit(x, categorical)
        expanded = design.transform(x)
        if positive:
            # Unpenalized gamma GLM: linear on the log scale, so f > 0 for the gamma family.
            glm = GammaRegressor(alpha=0.0, solver="newton-cholesky", max_iter=1000)
            return LogLinearDesignPredictor(design, glm.fit(expanded, y))
        return LinearDesignPredictor(design, LinearRegression().fit(expanded, y))

    def quantile(self, x, y, categorical, seed, tau):
        design = DesignMatrix().fit(x, categorical)
        regressor = QuantileRegressor(quantile=tau, alpha=0.0, solver="highs")
        return LinearDesignPredictor(design, regressor.fit(design.transform(x), y))

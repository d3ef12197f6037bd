"""A user's fitted model as a predictor of encoded rows: decode the rows, then ask the model.

The adapters (one file per library) say how to read a model's feature names, how to call it
on a raw-table DataFrame, and which exact masking path it has; this wrapper is what the games
see. Tree tables for it are read from the model itself (core.games.tree_extract).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.models.base import ModelKind
from cpdecomp.core.models.pipeline_columns import column_sources, dense
from cpdecomp.core.models.raw_table import TableDecoder
from cpdecomp.core.models.sklearn_model import is_linear
from cpdecomp.core.typing import FloatArray


class UserModelPredictor:
    """A fitted model that reads the raw table, as a function of encoded rows.

    A model with a link (Poisson, gamma, Tweedie objectives) is given on its link scale, its
    raw margin, and declares the link: the component applies the inverse after masking.
    """

    def __init__(self, model: Any, kind: ModelKind, decoder: TableDecoder) -> None:
        self.model = model
        self.kind = kind
        self.decoder = decoder
        self._categories = kind.category_dtype(model)
        self.link = kind.link(model) if kind.margin is not None else None
        self._call = kind.call if self.link is None or kind.margin is None else kind.margin

    def frame(self, encoded: FloatArray):
        return self.decoder.frame(encoded, self._categories)

    def predict(self, encoded: FloatArray) -> FloatArray:
        values = self._call(self.model, self.frame(encoded))
        values = np.asarray(values, dtype=float)
        if values.ndim != 1 or len(values) != len(encoded):
            values = values.reshape(len(encoded), -1)
            if values.shape[1] != 1:
                raise CpdecompError(
                    f"the {self.kind.label} model gives {values.shape[1]} outputs per row; a "
                    "component needs one (fit one model per quantile, or one target)")
            values = values[:, 0]
        return values


class AdditiveUserModelPredictor(UserModelPredictor):
    """A linear model, bare or after column-wise transformers: an intercept plus one term per
    raw column, so masking has a closed form."""

    def additive_terms(self, encoded: FloatArray) -> tuple[float, FloatArray]:
        frame = self.frame(encoded)
        model = self.model
        if isinstance(model, Pipeline):
            outputs = dense(model[:-1].transform(frame))
            sources = column_sources(model[:-1], len(self.decoder.kinds))
            assert sources is not None
            last = model.steps[-1][1]
            owner = np.asarray(sources.source)
        else:
            outputs, last = frame.to_numpy(dtype=float), model
            owner = np.arange(outputs.shape[1])
        weighted = outputs * np.asarray(last.coef_, dtype=float)[None, :]
        terms = np.zeros((len(encoded), len(self.decoder.kinds)))
        np.add.at(terms.T, owner, weighted.T)
        return float(np.ravel(last.intercept_)[0]), terms


def wrap_user_model(model: object, kind: ModelKind, decoder: TableDecoder) -> UserModelPredictor:
    """The predictor for a user's model: additive (closed-form masking) when it is linear over
    the raw columns, else plain (tree tables or brute force, decided by the games)."""
    if kind.name == "sklearn-linear" and not decoder.has_categories:
        return AdditiveUserModelPredictor(model, kind, decoder)
    if isinstance(model, Pipeline) and is_linear(model.steps[-1][1]) and column_sources(
            model[:-1], len(decoder.kinds)) is not None:
        return AdditiveUserModelPredictor(model, kind, decoder)
    return UserModelPredictor(model, kind, decoder)

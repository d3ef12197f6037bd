"""A user's fitted model as a predictor of encoded rows: decode the rows, then ask the model.

The adapters (one file per library) say how to read a model's feature names, how to call it
on a raw-table DataFrame, and which exact masking path it has; this wrapper is what the games
see. Tree tables for it are read from the model itself (core.games.tree_extract).
"""

from __future__ import annotations

import numpy as np

from core.errors import CpdecompError
from core.models.base import ModelKind
from core.models.raw_table import TableDecoder
from core.typing import FloatArray


class UserModelPredictor:
    """A fitted model that reads the raw table, as a function of encoded rows."""

    def __init__(self, model: object, kind: ModelKind, decoder: TableDecoder) -> None:
        self.model = model
        self.kind = kind
        self.decoder = decoder
        self._categories = kind.category_dtype(model)

    def frame(self, encoded: FloatArray):
        return self.decoder.frame(encoded, self._categories)

    def predict(self, encoded: FloatArray) -> FloatArray:
        values = self.kind.call(self.model, self.frame(encoded))
        values = np.asarray(values, dtype=float)
        if values.ndim != 1 or len(values) != len(encoded):
            values = values.reshape(len(encoded), -1)
            if values.shape[1] != 1:
                raise CpdecompError(
                    f"the {self.kind.label} model gives {values.shape[1]} outputs per row; a "
                    "component needs one (fit one model per quantile, or one target)")
            values = values[:, 0]
        return values

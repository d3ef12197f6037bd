"""Adapter for any callable over the raw table: masked by batched brute force."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cpdecomp.core.models.base import ModelKind
from cpdecomp.core.typing import FloatArray


def call(model: Any, frame: pd.DataFrame) -> FloatArray:
    function = model.predict if hasattr(model, "predict") else model
    return np.asarray(function(frame), dtype=float)


CALLABLE = ModelKind(
    name="callable", label="function of the raw table", fast_path="brute force",
    notes="f(DataFrame of the raw feature columns) -> one value per row, or any object with "
          "such a predict; masked by batched brute force",
    recognises=lambda model: callable(model) or hasattr(model, "predict"),
    feature_names=lambda model: None, n_features=lambda model: None, call=call,
)

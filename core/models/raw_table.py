"""The raw table again, from encoded rows: what a user's fitted model reads.

Masking works on the encoded matrix (one float column per player, category codes for strings),
so a model fitted on the raw table gets each (hybrid) row decoded first: numbers as they are,
codes back to their category strings. A player is a raw column, so the one-hot columns a
pipeline makes of one raw column always move together. A category unseen in training was
encoded as missing, so the model reads it as missing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from cpdecomp.core.data import FeatureKind
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.typing import FloatArray


class TableDecoder:
    """Encoded rows -> a DataFrame with the raw feature columns, in the players' order."""

    def __init__(self, kinds: Sequence[FeatureKind]) -> None:
        self.kinds = tuple(kinds)
        self._labels = {j: np.array([*kind.categories, np.nan], dtype=object)
                        for j, kind in enumerate(self.kinds)
                        if kind.categories is not None and not kind.numbers}
        # Numbers a model reads as categories go back to it as the numbers themselves.
        self._numbers = {j: np.array([*map(float, kind.categories or ()), np.nan])
                         for j, kind in enumerate(self.kinds) if kind.numbers}

    @property
    def names(self) -> list[str]:
        return [kind.name for kind in self.kinds]

    @property
    def has_categories(self) -> bool:
        """Whether the model reads text categories (numbers coded as categories reach it as
        numbers)."""
        return bool(self._labels)

    @property
    def has_coded_numbers(self) -> bool:
        """Whether a numeric column is coded as categories (see FeatureKind.numbers)."""
        return bool(self._numbers)

    def frame(self, encoded: FloatArray, categories: str = "object") -> pd.DataFrame:
        """The rows as the raw table: strings (object, or pandas categories) for categories."""
        columns = {}
        for j, kind in enumerate(self.kinds):
            values = encoded[:, j]
            labels = self._labels.get(j)
            if labels is None:
                numbers = self._numbers.get(j)
                if numbers is not None:
                    values = numbers[np.where(np.isnan(values), len(numbers) - 1,
                                              values).astype(np.int64)]
                columns[kind.name] = values
                continue
            codes = np.where(np.isnan(values), len(labels) - 1, values).astype(np.int64)
            strings = labels[codes]
            columns[kind.name] = (strings if categories == "object" else
                                  pd.Categorical(strings, categories=list(labels[:-1])))
        return pd.DataFrame(columns, copy=False)

    def column_codes(self, j: int) -> tuple[np.ndarray, FloatArray]:
        """A categorical player's raw values and their codes, missing last (NaN code)."""
        labels = self._labels[j] if j in self._labels else self._numbers[j]
        return labels, np.r_[np.arange(len(labels) - 1, dtype=float), np.nan]


def check_model_columns(model_columns: Sequence[str] | None, features: Sequence[str],
                        component: str) -> None:
    """Refuse a model whose feature names are not the table's features in the same order."""
    if model_columns is None:
        return
    model_columns = [str(c) for c in model_columns]
    features = [str(c) for c in features]
    if model_columns == features:
        return
    missing = [c for c in model_columns if c not in features]
    extra = [c for c in features if c not in model_columns]
    listing = ", ".join(map(repr, model_columns))
    if missing or extra:
        parts = []
        if missing:
            parts.append("the table lacks " + ", ".join(map(repr, missing)))
        if extra:
            parts.append("the model was not fitted on " + ", ".join(map(repr, extra)))
        detail = " and ".join(parts)
    else:
        detail = "the table has them in another order"
    raise CpdecompError(f"the {component} model's columns do not match the training table: "
                        f"{detail}; the model reads {listing}")

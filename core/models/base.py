"""What every model of the models axis is: a predictor of encoded rows, the components built
from it, and the registry record that says which exact masking path it has.

A component maps the encoded feature matrix (one column per player, category codes for
strings) to one number per row. Built-in models fit such predictors; adapters wrap a user's
fitted model (which reads the raw table) as one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
import pandas as pd

from cpdecomp.core.typing import BoolArray, FloatArray

FastPath = Literal["tree tables", "closed form", "brute force"]


class Predictor(Protocol):
    """Anything with predict(encoded rows) -> one value per row."""

    def predict(self, encoded: FloatArray) -> FloatArray: ...


@dataclass(frozen=True, eq=False)
class Component:
    """A fitted function of the features that a family uses (f, sigma, lo, hi).

    `floor` is applied after masking (after the mean over the background), so the calibration
    and instance games see the same function of the coalition.
    """

    name: str
    predictor: Predictor
    floor: float | None = None

    def finish(self, raw: FloatArray) -> FloatArray:
        return raw if self.floor is None else np.maximum(raw, self.floor)

    def predict(self, encoded: FloatArray) -> FloatArray:
        return self.finish(np.asarray(self.predictor.predict(encoded), dtype=float))

    @property
    def is_additive(self) -> bool:
        return hasattr(self.predictor, "additive_terms")


class FunctionPredictor:
    """A plain function of the encoded rows, e.g. an oracle in a test."""

    def __init__(self, function: Callable[[FloatArray], FloatArray]) -> None:
        self.function = function

    def predict(self, encoded: FloatArray) -> FloatArray:
        return np.asarray(self.function(encoded), dtype=float)


class MeanPredictor:
    """The mean of some predictors (e.g. (lo + hi) / 2 as a CQR system's shown prediction)."""

    def __init__(self, parts: tuple[Predictor, ...]) -> None:
        self.parts = parts

    def predict(self, encoded: FloatArray) -> FloatArray:
        values = [np.asarray(p.predict(encoded), dtype=float) for p in self.parts]
        return np.sum(values, axis=0) / len(values)


class BaseModel(Protocol):
    """A built-in model: fits point and quantile predictors on encoded rows (seeded)."""

    name: str
    label: str
    fast_path: str
    """Which exact masking path its predictors have (see ModelKind.fast_path)."""

    def point(self, x: FloatArray, y: FloatArray, categorical: BoolArray, seed: int,
              positive: bool = False) -> Predictor: ...

    def quantile(self, x: FloatArray, y: FloatArray, categorical: BoolArray, seed: int,
                 tau: float) -> Predictor: ...


@dataclass(frozen=True)
class ModelKind:
    """A registry entry for a kind of fitted model a user brings: how it is recognised and
    called on the raw table, and what masking gets for it.

    `fast_path` is what masking gets without evaluating hybrid rows: exact tree tables, a
    closed form, or brute force; `notes` says when an instance falls back to brute force.
    """

    name: str
    label: str
    fast_path: FastPath
    notes: str
    recognises: Callable[[object], bool]
    feature_names: Callable[[Any], list[str] | None]
    """The column names the model was fitted on, or None when it has none."""
    n_features: Callable[[Any], int | None]
    call: Callable[[Any, pd.DataFrame], FloatArray]
    """The model's own prediction on a DataFrame of the raw columns."""
    category_dtype: Callable[[Any], str] = lambda model: "object"
    """'object' (strings) or 'category' (pandas categories): how it reads string columns."""
    spelled: Callable[[str], str] = lambda column: column
    """How the library stores a column's name (LightGBM writes spaces as underscores)."""

N_TREES = 100
MAX_LEAVES = 31
"""Trees and leaves per tree of the built-in ensembles: shallow enough to tabulate exactly."""

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
    """Anything with predict(encoded rows) -> one value per row.

    A predictor may also declare `link` (a key of INVERSE_LINKS): its predict then gives the
    model's output on the link scale (its raw margin, e.g. log of the expected length of stay),
    and the component it serves applies the inverse link after masking (Component.finish).
    """

    def predict(self, encoded: FloatArray) -> FloatArray: ...


INVERSE_LINKS: dict[str, Callable[[FloatArray], FloatArray]] = {"log": np.exp}
"""The inverse of each link a predictor may declare. Poisson, gamma and Tweedie boosters (and
GLMs) use the log link: their prediction is exp(raw margin)."""

def text_levels(values: Any) -> tuple[str, ...]:
    """The text categories among a model's fitted categories (missing markers and numbers are
    not text categories: a numeric column keeps its values)."""
    return tuple(str(v) for v in values if isinstance(v, str))


def link_of(predictor: Predictor) -> str | None:
    """The link a predictor declares (None: its predict is already the response)."""
    return getattr(predictor, "link", None)


class ResponsePredictor:
    """A predictor with a link, on the response scale: g⁻¹ of its raw margin.

    It declares no link and is no tree sum, so masking averages the response itself (by brute
    force): the "response" masking scale, and the mean of two linked quantile models.
    """

    def __init__(self, margin: Predictor) -> None:
        link = link_of(margin)
        if link is None:
            raise ValueError("a ResponsePredictor wraps a predictor that declares a link")
        self.margin = margin
        self.inverse = INVERSE_LINKS[link]

    def predict(self, encoded: FloatArray) -> FloatArray:
        return self.inverse(np.asarray(self.margin.predict(encoded), dtype=float))


@dataclass(frozen=True, eq=False)
class Component:
    """A fitted function of the features that a family uses (f, sigma, lo, hi).

    The inverse link (when the predictor declares one) and `floor` are applied after masking
    (after the mean over the background), so the calibration and instance games see the same
    function of the coalition.
    """

    name: str
    predictor: Predictor
    floor: float | None = None

    @property
    def link(self) -> str | None:
        return link_of(self.predictor)

    def finish(self, raw: FloatArray) -> FloatArray:
        link = self.link
        values = raw if link is None else INVERSE_LINKS[link](raw)
        return values if self.floor is None else np.maximum(values, self.floor)

    def predict(self, encoded: FloatArray) -> FloatArray:
        return self.finish(np.asarray(self.predictor.predict(encoded), dtype=float))

    @property
    def has_response_scale(self) -> bool:
        """Whether masking may average this component's response instead of its raw margin:
        it has a link, and the link is not part of its definition (sigma's log scale is)."""
        return self.link is not None and not getattr(self.predictor, "link_scale_only", False)

    def on_response_scale(self) -> Component:
        """The same function, with its link (if any) inside the predictor: masking then
        averages the response over the background, not the raw margin. A component whose
        link is part of its definition (has_response_scale False) stays as it is."""
        if not self.has_response_scale:
            return self
        return Component(self.name, ResponsePredictor(self.predictor), self.floor)

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
    link: Callable[[Any], str | None] = lambda model: None
    """The model's link (a key of INVERSE_LINKS: 'log' for Poisson, gamma and Tweedie
    objectives), or None when its prediction is a plain sum."""
    margin: Callable[[Any, pd.DataFrame], FloatArray] | None = None
    """The model's raw margin (its prediction on the link scale), for a model with a link."""
    categories: Callable[[Any], dict[int, tuple[str, ...]] | None] = lambda model: None
    """The text categories the model was fitted with, by the position of the raw column it
    reads as categories (an empty tuple: categories without text names, e.g. numbers), {} when
    it reads none, or None when it cannot tell: the background pool may lack a rare category,
    and the encoder must still give it a code."""
    number_categories: Callable[[Any], dict[int, tuple[float, ...]]] = lambda model: {}
    """The numbers the model reads as categories (integer codes one-hot encoded in a
    Pipeline), by the position of the raw numeric column: coded as categories, they get tree
    tables where the model's splits on their one-hot columns would need brute force."""

N_TREES = 100
MAX_LEAVES = 31
"""Trees and leaves per tree of the built-in ensembles: shallow enough to tabulate exactly."""

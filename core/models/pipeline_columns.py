"""Which raw column each output column of a Pipeline's preprocessing comes from.

A transformer that acts column by column keeps every output column a function of one raw
column. Then a linear last step is additive over raw columns (a closed form for masking), and a
tree split on an output column is a test on one raw column (tree tables). Only transformers
known to act column by column are read; anything else gives None, and masking falls back to
brute force. `monotone` marks output columns that are non-decreasing functions of a numeric
raw column (scalers, imputers, passthrough): a threshold on them is a threshold on the raw
column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    MaxAbsScaler,
    MinMaxScaler,
    OneHotEncoder,
    OrdinalEncoder,
    RobustScaler,
    StandardScaler,
)

from cpdecomp.core.models.base import text_levels

MONOTONE = (StandardScaler, MinMaxScaler, MaxAbsScaler, RobustScaler)
"""Scalers with a positive scale: x -> (x - centre) / scale is non-decreasing, and so is its
floating-point evaluation (correctly rounded subtraction and division are monotone)."""


@dataclass(frozen=True)
class ColumnSources:
    """Per output column: its raw column, and whether it is non-decreasing in it."""

    source: tuple[int, ...]
    monotone: tuple[bool, ...]


def _identity(n: int, inputs: ColumnSources) -> ColumnSources:
    return inputs if n == len(inputs.source) else _unknown()


def _unknown() -> ColumnSources:
    raise _Unsupported


class _Unsupported(Exception):
    """A transformer not known to act column by column."""


def _n_out(transformer: Any) -> int | None:
    try:
        return len(transformer.get_feature_names_out())
    except Exception:
        return None


def _through(transformer: Any, inputs: ColumnSources) -> ColumnSources:
    """The sources of a fitted transformer's outputs, given the sources of its inputs."""
    if transformer == "passthrough" or transformer is None:
        return inputs
    if isinstance(transformer, Pipeline):
        for _, step in transformer.steps:
            inputs = _through(step, inputs)
        return inputs
    if isinstance(transformer, ColumnTransformer):
        return _column_transformer(transformer, inputs)
    if isinstance(transformer, FunctionTransformer):
        if transformer.func is None:  # ColumnTransformer's remainder="passthrough"
            return inputs
        raise _Unsupported
    if isinstance(transformer, MONOTONE):
        scale = getattr(transformer, "scale_", None)
        if scale is not None and not (np.asarray(scale) > 0).all():
            raise _Unsupported
        return _identity(_n_out(transformer) or -1, inputs)
    if isinstance(transformer, SimpleImputer):
        missing = transformer.missing_values
        # Another missing marker (0, say) replaces real values: no longer non-decreasing.
        if transformer.add_indicator or not (isinstance(missing, float) and np.isnan(missing)):
            raise _Unsupported
        return _identity(_n_out(transformer) or -1, inputs)
    if isinstance(transformer, OneHotEncoder):
        counts = getattr(transformer, "_n_features_outs", None)
        if counts is None or len(counts) != len(inputs.source):
            raise _Unsupported
        source = tuple(s for s, n in zip(inputs.source, counts, strict=True) for _ in range(n))
        return ColumnSources(source, (False,) * len(source))
    if isinstance(transformer, OrdinalEncoder):
        if _n_out(transformer) != len(inputs.source):
            raise _Unsupported
        return ColumnSources(inputs.source, (False,) * len(inputs.source))
    raise _Unsupported


def _column_transformer(transformer: ColumnTransformer, inputs: ColumnSources) -> ColumnSources:
    indices = getattr(transformer, "_transformer_to_input_indices", None)
    slices = getattr(transformer, "output_indices_", None)
    if indices is None or slices is None:
        raise _Unsupported
    n_out = max((s.stop for s in slices.values()), default=0)
    source = [-1] * n_out
    monotone = [False] * n_out
    for name, step, _ in transformer.transformers_:
        where = slices.get(name)
        if step == "drop" or where is None or where.stop == where.start:
            continue
        picked = [int(i) for i in indices[name]]
        part = _through(step, ColumnSources(tuple(inputs.source[i] for i in picked),
                                            tuple(inputs.monotone[i] for i in picked)))
        if len(part.source) != where.stop - where.start:
            raise _Unsupported
        source[where] = part.source
        monotone[where] = part.monotone
    if -1 in source:
        raise _Unsupported
    return ColumnSources(tuple(source), tuple(monotone))


Found = tuple[dict[int, tuple[str, ...]], dict[int, tuple[float, ...]]]
"""Per raw column, the text categories and the numeric categories of the encoders reading it."""


def number_levels(values: Any) -> tuple[float, ...]:
    """The numbers among a model's fitted categories (integer codes, say; not missing)."""
    found = []
    for v in values:
        if isinstance(v, bool | np.bool_) or isinstance(v, str):
            continue
        try:
            number = float(v)
        except (TypeError, ValueError):
            continue
        if not np.isnan(number):
            found.append(number)
    return tuple(found)


def _collect_categories(transformer: Any, inputs: ColumnSources, found: Found) -> ColumnSources:
    """Record the categories of every encoder whose inputs are raw columns (through
    column-wise steps), and return the sources of the transformer's outputs."""
    if isinstance(transformer, Pipeline):
        for _, step in transformer.steps:
            inputs = _collect_categories(step, inputs, found)
        return inputs
    if isinstance(transformer, ColumnTransformer):
        indices = getattr(transformer, "_transformer_to_input_indices", None) or {}
        for name, step, _ in getattr(transformer, "transformers_", []):
            if step == "drop" or name not in indices:
                continue
            picked = [int(i) for i in indices[name]]
            try:
                _collect_categories(step, ColumnSources(
                    tuple(inputs.source[i] for i in picked),
                    tuple(inputs.monotone[i] for i in picked)), found)
            except _Unsupported:
                continue  # this branch's later steps cannot be traced; the others can
        return _through(transformer, inputs)
    if isinstance(transformer, OneHotEncoder | OrdinalEncoder):
        seen = getattr(transformer, "categories_", None)
        text, numbers = found
        if seen is not None and len(seen) == len(inputs.source):
            for source, levels in zip(inputs.source, seen, strict=True):
                text[source] = tuple(sorted({*text.get(source, ()), *text_levels(levels)}))
                known = number_levels(levels)
                if known:
                    numbers[source] = tuple(sorted({*numbers.get(source, ()), *known}))
    return _through(transformer, inputs)


def _encoders(preprocessing: Any, n_columns: int) -> Found:
    found: Found = ({}, {})
    try:
        _collect_categories(preprocessing,
                            ColumnSources(tuple(range(n_columns)), (True,) * n_columns), found)
    except _Unsupported:
        pass  # encoders found before an untraceable step still count
    return found


def encoder_categories(preprocessing: Any, n_columns: int) -> dict[int, tuple[str, ...]]:
    """The text categories the preprocessing's encoders (OneHotEncoder, OrdinalEncoder) were
    fitted with, by raw column; columns reached only through other transformers are absent."""
    return _encoders(preprocessing, n_columns)[0]


def encoder_numbers(preprocessing: Any, n_columns: int) -> dict[int, tuple[float, ...]]:
    """The numbers the preprocessing's encoders were fitted with as categories (a one-hot
    encoder of integer codes), by raw column: such a column is coded as categories, so its
    one-hot columns get tree tables, not brute force."""
    return _encoders(preprocessing, n_columns)[1]


def column_sources(preprocessing: Any, n_columns: int) -> ColumnSources | None:
    """Sources of the preprocessing's output columns over n_columns raw columns, or None."""
    raw = ColumnSources(tuple(range(n_columns)), (True,) * n_columns)
    try:
        return _through(preprocessing, raw)
    except _Unsupported:
        return None


def dense(matrix: Any) -> np.ndarray:
    """A transformer's output as a float array (ColumnTransformer may return sparse)."""
    if hasattr(matrix, "toarray"):
        matrix = matrix.toarray()
    return np.asarray(matrix, dtype=float)

"""The masked pipeline: each component's mean over a background when features are removed.

g_S(x) = mean over b in B of g(x with the features outside S replaced by b's values).
Two exact evaluators: a closed form for additive components (linear models), and batched brute
force for everything else, with one predict call per batch of at most ROWS_PER_CALL hybrid rows
(never a Python loop per coalition or per background row).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from core.models import Component
from core.typing import Coalitions, FloatArray

ROWS_PER_CALL = 250_000
"""Hybrid rows per model call: large enough that per-call overhead vanishes, small in memory."""


def exact_mean(values: FloatArray) -> FloatArray:
    """Mean along the last axis that returns a value bit for bit when all values are equal.

    Shifting by the first value keeps a feature the model ignores an exact null player:
    the masked means with and without it are then identical, not one rounding apart.
    """
    first = values[..., :1]
    return first[..., 0] + (values - first).mean(axis=-1)


class MaskedEvaluator:
    """Evaluates masked components on many (coalition, row) pairs at once."""

    def __init__(self, components: Mapping[str, Component], background: FloatArray,
                 rows_per_call: int = ROWS_PER_CALL) -> None:
        self.components = dict(components)
        self.background = np.asarray(background, dtype=float)
        self.rows_per_call = rows_per_call
        self.model_rows = 0
        """Rows passed to the models so far (hybrid and plain): the cost, counted."""
        self._empty_cache: dict[str, float] = {}

    def evaluate(self, coalitions: Coalitions, rows: FloatArray,
                 names: Sequence[str]) -> dict[str, FloatArray]:
        """{name: (n_coalitions, n_rows)} masked values of the named components."""
        coalitions = np.asarray(coalitions, dtype=bool)
        rows = np.asarray(rows, dtype=float)
        raw: dict[str, FloatArray] = {}
        additive = [n for n in names if self.components[n].is_additive]
        others = [n for n in names if n not in additive]
        for name in additive:
            raw[name] = self._additive(name, coalitions, rows)
        if others:
            raw.update(self._brute_force(others, coalitions, rows))
        return {name: self.components[name].finish(raw[name]) for name in names}

    def _predict(self, name: str, rows: FloatArray) -> FloatArray:
        self.model_rows += len(rows)
        return np.asarray(self.components[name].predictor.predict(rows), dtype=float)

    def _additive(self, name: str, coalitions: Coalitions, rows: FloatArray) -> FloatArray:
        predictor = self.components[name].predictor
        intercept, terms = predictor.additive_terms(rows)
        _, background_terms = predictor.additive_terms(self.background)
        mean_terms = exact_mean(background_terms.T)
        offset = intercept + mean_terms.sum()
        return offset + coalitions.astype(float) @ (terms - mean_terms).T

    def _empty_value(self, name: str) -> float:
        if name not in self._empty_cache:
            predictions = self._predict(name, self.background)
            self._empty_cache[name] = float(exact_mean(predictions[None])[0])
        return self._empty_cache[name]

    def _brute_force(self, names: Sequence[str], coalitions: Coalitions,
                     rows: FloatArray) -> dict[str, FloatArray]:
        n_coalitions, n_rows = len(coalitions), len(rows)
        out = {name: np.empty((n_coalitions, n_rows)) for name in names}
        empty = ~coalitions.any(axis=1)
        full = coalitions.all(axis=1)
        for name in names:
            out[name][empty] = self._empty_value(name)
            if full.any() and n_rows:
                # Every hybrid of the full coalition is the row itself: predict it once.
                out[name][full] = self._predict(name, rows)
        todo = np.flatnonzero(~empty & ~full)
        if todo.size == 0 or n_rows == 0:
            return out
        m = len(self.background)
        pairs_per_call = max(1, self.rows_per_call // m)
        pair_coalition = np.repeat(todo, n_rows)
        pair_row = np.tile(np.arange(n_rows), todo.size)
        for start in range(0, pair_coalition.size, pairs_per_call):
            c = pair_coalition[start:start + pairs_per_call]
            r = pair_row[start:start + pairs_per_call]
            keep = coalitions[c][:, None, :]
            hybrids = np.where(keep, rows[r][:, None, :], self.background[None, :, :])
            hybrids = hybrids.reshape(-1, rows.shape[1])
            for name in names:
                values = exact_mean(self._predict(name, hybrids).reshape(len(c), m))
                out[name][c, r] = values
        return out

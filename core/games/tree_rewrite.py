"""Tree splits on a model's input columns rewritten as tests on the raw columns (players).

A user's model reads the raw table, maybe through a Pipeline's preprocessing. Its trees split
on the columns the last step sees; when every such column is a function of one raw column, each
split is a test on that raw column:
* a categorical raw column: the test's answer for each category code (and for missing), found
  by running the preprocessing on one row per category;
* a numeric raw column whose transform is non-decreasing (scalers, imputers): the answer is
  "raw value <= x*", with x* the largest double whose transformed value goes left, found by
  bisection over the ordered doubles with the preprocessing itself (64 rounds), so the test is
  exact in floating point, not only in real arithmetic; a missing value is run through too.
Anything else keeps the model on brute force.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd

from cpdecomp.core.games.tree_records import LEFT, MISSING, N_CODES, RIGHT, Condition, LeafEnsemble
from cpdecomp.core.models.pipeline_columns import ColumnSources, dense
from cpdecomp.core.models.raw_table import TableDecoder

SIGN = np.int64(-0x8000000000000000)
LARGEST = np.finfo(np.float64).max


def answers(condition: Condition, values: np.ndarray) -> np.ndarray:
    """Whether each value goes left at the split: the tree-table kernel's own rule."""
    values = np.asarray(values, dtype=np.float64)
    missing = np.isnan(values)
    if condition.categorical:
        assert condition.codes is not None
        inside = ~missing & (values >= 0) & (values < N_CODES)
        codes = np.full(len(values), MISSING, dtype=np.uint8)
        codes[inside] = condition.codes[values[inside].astype(np.int64)]
        left = np.where(codes == MISSING, condition.missing_left, codes == LEFT)
    elif condition.single_precision:
        with np.errstate(over="ignore"):
            left = values.astype(np.float32).astype(np.float64) <= condition.threshold
    else:
        left = values <= condition.threshold
    return np.where(missing, condition.missing_left, left)


def _key(values: np.ndarray) -> np.ndarray:
    """Doubles as integers in the same order (-0.0 and 0.0 share a key)."""
    bits = values.view(np.int64)
    return np.where(bits >= 0, bits, -(bits & ~SIGN))


def _value(keys: np.ndarray) -> np.ndarray:
    bits = np.where(keys >= 0, keys, (-keys) | SIGN)
    return bits.view(np.float64)


def rewrite(ensemble: LeafEnsemble,
            convert: Callable[[list[Condition]], list[Condition] | None]) -> LeafEnsemble | None:
    """The ensemble with every distinct condition converted (shared objects stay shared)."""
    distinct: dict[int, Condition] = {}
    for path in ensemble.conditions:
        for c in path:
            distinct.setdefault(id(c), c)
    originals = list(distinct.values())
    converted = convert(originals)
    if converted is None:
        return None
    new = {id(old): c for old, c in zip(originals, converted, strict=True)}
    paths = [[new[id(c)] for c in path] for path in ensemble.conditions]
    return LeafEnsemble(ensemble.base, ensemble.values, paths, ensemble.trees)


class PreprocessedInputs:
    """Converts conditions on a preprocessing's output columns into conditions on players."""

    def __init__(self, transform: Callable[[pd.DataFrame], object], sources: ColumnSources,
                 decoder: TableDecoder, categories: str = "object",
                 numeric_as_is: bool = False) -> None:
        self.transform = transform
        self.sources = sources
        self.decoder = decoder
        self.categories = categories
        self.numeric_as_is = numeric_as_is
        self._by_category: dict[int, tuple[np.ndarray, bool]] = {}
        """Numeric players reach the trees unchanged: their conditions stay as they are."""
        self.neutral = np.zeros(len(decoder.kinds))
        """A valid encoded row (code 0 is the first category of a categorical player); the
        other players do not matter, as each output column reads one raw column."""

    def _outputs(self, rows: np.ndarray) -> np.ndarray:
        # Probes reach the largest doubles, where scalers overflow to infinity: still in order.
        with warnings.catch_warnings(), np.errstate(over="ignore", invalid="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            return dense(self.transform(self.decoder.frame(rows, self.categories)))

    def _probe(self, player: int, values: np.ndarray) -> np.ndarray:
        rows = np.tile(self.neutral, (len(values), 1))
        rows[:, player] = values
        return rows

    def __call__(self, conditions: list[Condition]) -> list[Condition] | None:
        out: list[Condition | None] = [None] * len(conditions)
        numeric: list[int] = []
        for i, c in enumerate(conditions):
            player = self.sources.source[c.player]
            if self.decoder.kinds[player].categories is not None:
                out[i] = self._categorical(c, player)
            elif self.numeric_as_is:
                out[i] = c
            elif self.sources.monotone[c.player]:
                numeric.append(i)
            else:
                return None
        if numeric:
            for i, converted in zip(numeric, self._numeric([conditions[i] for i in numeric]),
                                    strict=True):
                out[i] = converted
        return out  # type: ignore[return-value]

    def _category_outputs(self, player: int) -> tuple[np.ndarray, bool]:
        """Output columns at each category code and at missing (one transform per player)."""
        if player not in self._by_category:
            _, codes = self.decoder.column_codes(player)
            try:
                self._by_category[player] = (self._outputs(self._probe(player, codes)), True)
            except Exception:  # the preprocessing refuses missing values: so would the model
                outputs = self._outputs(self._probe(player, codes[:-1]))
                self._by_category[player] = (np.vstack([outputs, outputs[:1]]), False)
        return self._by_category[player]

    def _categorical(self, c: Condition, player: int) -> Condition:
        outputs, missing_ok = self._category_outputs(player)
        left = answers(c, outputs[:, c.player])
        table = np.full(N_CODES, MISSING, dtype=np.uint8)
        table[:len(left) - 1] = np.where(left[:-1], LEFT, RIGHT)
        return Condition(player, True, 0.0, bool(left[-1]) and missing_ok, table, c.go_left)

    def _numeric(self, conditions: list[Condition]) -> list[Condition]:
        """Bisection for every numeric condition at once: one transform call per round."""
        players = np.array([self.sources.source[c.player] for c in conditions])
        columns = np.array([c.player for c in conditions])

        threshold_of = np.array([c.threshold for c in conditions], dtype=np.float64)
        single = np.array([c.single_precision for c in conditions])
        missing_of = np.array([c.missing_left for c in conditions])
        categorical = [k for k, c in enumerate(conditions) if c.categorical]

        def goes_left(values: np.ndarray) -> np.ndarray:
            rows = np.tile(self.neutral, (len(values), 1))
            rows[np.arange(len(values)), players] = values
            z = self._outputs(rows)[np.arange(len(values)), columns]
            with np.errstate(over="ignore"):  # float32 of a huge double is infinite, as in C
                rounded = z.astype(np.float32).astype(np.float64)
            left = np.where(single, rounded <= threshold_of, z <= threshold_of)
            left = np.where(np.isnan(z), missing_of, left)
            for k in categorical:  # a categorical split on a scaled column: rare
                left[k] = answers(conditions[k], z[k:k + 1])[0]
            return left

        n = len(conditions)
        low = np.full(n, _key(np.array([-LARGEST]))[0])
        high = np.full(n, _key(np.array([LARGEST]))[0])
        left_at_low, left_at_high = goes_left(_value(low)), goes_left(_value(high))
        try:
            missing_left = goes_left(np.full(n, np.nan))
        except Exception:  # the preprocessing refuses missing values: so would the model
            missing_left = np.zeros(n, dtype=bool)
        # Invariant: low goes left, high does not; stop when they are neighbours.
        active = left_at_low & ~left_at_high
        while active.any():
            middle = (low >> 1) + (high >> 1) + (low & high & 1)
            middle = np.where(active, middle, low)
            left = goes_left(_value(middle))
            low = np.where(active & left, middle, low)
            high = np.where(active & ~left, middle, high)
            active &= high - 1 > low  # high - low could overflow
        threshold = np.where(left_at_high, np.inf, np.where(left_at_low, _value(low), np.nan))
        # NaN threshold: no finite value goes left ('value <= NaN' is false).
        return [Condition(int(p), False, float(t), bool(m), None, c.go_left)
                for p, t, m, c in zip(players, threshold, missing_left, conditions, strict=True)]

"""The masked pipeline: each component's mean over a background when features are removed.

g_S(x) = mean over b in B of g(x with the features outside S replaced by b's values).
Three exact evaluators, chosen per component:
* a closed form for additive components (linear models);
* tree tables for tree ensembles (every coalition at once, no hybrid rows evaluated);
* batched brute force for everything else, one predict call per batch of at most
  ROWS_PER_CALL hybrid rows and about HYBRID_BYTES_PER_CALL of them (never a Python loop per
  coalition or per background row).
`path="brute"` forces brute force for every component, `path="tables"` requires tables.

A component whose model has a link (Poisson, gamma, Tweedie boosters; the gamma family's
built-in models) is masked on the link scale by default: g⁻¹(mean over B of the raw margin at
the hybrid rows), the inverse link applied after the mean like a floor. The raw margin of a
tree ensemble is a tree sum, so it has exact tree tables, and the instance game of a log family
is then linear in the margin (shap's model_output="raw" convention). `path="response"` masks
such components on the response scale instead, mean over B of g⁻¹(raw margin), which is
method.md's definition for every model: exact too, but by brute force for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from cpdecomp.core.bounded import BoundedCache
from cpdecomp.core.cancel import checkpoint
from cpdecomp.core.coalitions import column_players
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.games.tree_tables import MAX_LATTICE_PLAYERS, TreeTables
from cpdecomp.core.games.trees import leaf_ensemble
from cpdecomp.core.models import Component
from cpdecomp.core.progress import advance, unmetered
from cpdecomp.core.typing import Coalitions, FloatArray

MaskingPath = Literal["auto", "tables", "brute", "response"]
MASKING_PATHS: tuple[MaskingPath, ...] = ("auto", "tables", "brute", "response")
LATTICE_CELLS_PER_CHUNK = 1 << 22
"""Rows × 2^d lattice cells computed at once (32 MiB), to bound memory at large d."""
PLAYER_CACHE_ENTRIES = 16
"""Designs whose coalitions over their players are remembered per evaluator, oldest first."""
GROUPED_TABLES_KEPT = 4
"""Tree tables over column groups kept per component (one per grouping in use), oldest first."""

ROWS_PER_CALL = 250_000
"""Hybrid rows per model call: large enough that per-call overhead vanishes, small in memory."""
HYBRID_BYTES_PER_CALL = 1 << 22
"""Float64 bytes of hybrid rows per model call (4 MiB, at least one row's m hybrids): a tree
ensemble walks the whole batch once per tree, so a batch that stays in cache is read from cache
by every tree (d = 100, m = 1000: 5,000 hybrid rows a call, not 250,000 from memory)."""


def exact_mean(values: FloatArray) -> FloatArray:
    """Mean along the last axis that returns a value bit for bit when all values are equal.

    Shifting by the first value keeps a feature the model ignores an exact null player:
    the masked means with and without it are then identical, not one rounding apart.
    """
    first = values[..., :1]
    return first[..., 0] + (values - first).mean(axis=-1)


def has_fast_path(component: Component, path: MaskingPath = "auto") -> bool:
    """True when masking the component on this path costs no hybrid rows (closed form or tree
    tables)."""
    if path == "brute":
        return False
    if path == "response":
        component = component.on_response_scale()
    return component.is_additive or leaf_ensemble(component.predictor) is not None


class MaskedEvaluator:
    """Evaluates masked components on many (coalition, row) pairs at once."""

    def __init__(self, components: Mapping[str, Component], background: FloatArray,
                 rows_per_call: int = ROWS_PER_CALL, path: MaskingPath = "auto") -> None:
        if path not in MASKING_PATHS:
            raise CpdecompError(f"unknown masking path {path!r}; choose one of {MASKING_PATHS}")
        self.components = {name: component.on_response_scale() if path == "response"
                           else component for name, component in components.items()}
        self.background = np.asarray(background, dtype=float)
        self.rows_per_call = rows_per_call
        self.path = path
        self.model_rows = 0
        """Rows passed to the models so far (hybrid and plain): the cost, counted."""
        self._empty_cache: dict[str, float] = {}
        # Per component: the tables with the columns as players, kept for good, and a few
        # groupings of the columns (feature groups), the oldest dropped first.
        self._tables: dict[str, TreeTables | None] = {}
        self._grouped_tables: dict[str, BoundedCache[bytes, TreeTables | None]] = {}
        # A few designs are in use at once: their players, by the coalitions' identity.
        self._player_cache: BoundedCache[int, tuple[Coalitions, bytes, Coalitions]] = \
            BoundedCache(PLAYER_CACHE_ENTRIES)

    @property
    def n_columns(self) -> int:
        return int(self.background.shape[1])

    def tables(self, name: str, player_of_column: np.ndarray | None = None) -> TreeTables | None:
        """The component's tree tables over this background (built once per grouping of the
        columns into players; by default the columns themselves), or None."""
        if self.path == "brute":
            return None
        if player_of_column is None and name in self._tables:
            return self._tables[name]  # the columns themselves: asked for per patient, kept
        players = (np.arange(self.n_columns, dtype=np.int64) if player_of_column is None
                   else player_of_column)
        key = _grouping_key(players)
        if not key:
            if name not in self._tables:
                self._tables[name] = self._build_tables(name, players)
            return self._tables[name]
        kept = self._grouped_tables.setdefault(name, BoundedCache(GROUPED_TABLES_KEPT))
        return kept.get_or_compute(key, lambda: self._build_tables(name, players))

    def _build_tables(self, name: str, players: np.ndarray) -> TreeTables | None:
        ensemble = leaf_ensemble(self.components[name].predictor)
        try:
            tables = None if ensemble is None else TreeTables(
                ensemble, self.background, int(players.max(initial=-1)) + 1, players)
        except ValueError:
            tables = None  # too deep to tabulate: brute force instead
        if tables is None and self.path == "tables":
            raise CpdecompError(f"component {name!r} is not a tree ensemble tables support")
        return tables

    def path_of(self, name: str) -> str:
        """Which evaluator serves a component: 'additive', 'tables' or 'brute'."""
        if self.path != "brute" and self.components[name].is_additive:
            return "additive"
        return "tables" if self.tables(name) is not None else "brute"

    def evaluate(self, coalitions: Coalitions, rows: FloatArray,
                 names: Sequence[str]) -> dict[str, FloatArray]:
        """{name: (n_coalitions, n_rows)} masked values of the named components."""
        by_row = self.evaluate_by_row(coalitions, rows, names)
        return {name: np.ascontiguousarray(values.T) for name, values in by_row.items()}

    def evaluate_by_row(self, coalitions: Coalitions, rows: FloatArray,
                        names: Sequence[str], finished: bool = True) -> dict[str, FloatArray]:
        """{name: (n_rows, n_coalitions)}: the games' layout, one row per patient; with
        finished=False, the masked means before each component's inverse link and floor.

        Tree tables produce this layout, so the games take it as it comes: no transposed copy
        of a (patients × coalitions) array on the way to the design.
        """
        # A boolean array is kept as it is, not viewed: the players and the tables' reads are
        # remembered by its identity, and np.asarray(a, dtype=bool) makes a new view of an
        # unpickled array (its dtype is an equal copy of numpy's own), which in a worker process
        # worked the design's players out again for every chunk (+40 % CPU per patient).
        if not (isinstance(coalitions, np.ndarray) and coalitions.dtype == np.bool_):
            coalitions = np.asarray(coalitions, dtype=bool)
        rows = np.asarray(rows, dtype=float)
        raw: dict[str, FloatArray] = {}
        paths = {name: self.path_of(name) for name in names}
        ticked = 0
        for name in names:
            if paths[name] == "additive":
                raw[name] = self._additive(name, coalitions, rows).T
            elif paths[name] == "tables":
                values = self._from_tables(name, coalitions, rows)
                if values is None:  # too deep once its columns are grouped
                    paths[name] = "brute"
                else:
                    raw[name] = values
        brute = [name for name in names if paths[name] == "brute"]
        if brute:
            by_coalition, ticked = self._brute_force(brute, coalitions, rows)
            raw.update({name: values.T for name, values in by_coalition.items()})
        advance(len(coalitions) * len(rows) - ticked)  # the cells brute force did not tick
        if not finished:
            return raw
        return {name: self.components[name].finish(raw[name]) for name in names}

    def shapley_by_row(self, rows: FloatArray, names: Sequence[str]
                       ) -> dict[str, tuple[FloatArray, FloatArray, FloatArray]] | None:
        """{name: (φ (n_rows, n_columns), value at all columns, at none)}: exact Shapley values
        of each component's masked prediction over the columns, from its tree tables without
        the 2^d lattice (TreeTables.shapley); None unless every component is served by the
        tables with no link or floor (a link is not linear, so its φ is not the trees')."""
        out = {}
        for name in names:
            component = self.components[name]
            if (self.path_of(name) != "tables" or component.link is not None
                    or component.floor is not None):
                return None
            tables = self.tables(name)
            if tables is None:
                return None
            out[name] = tables.shapley(np.asarray(rows, dtype=float))
        return out

    def plain(self, name: str, rows: FloatArray) -> FloatArray:
        """The component at the rows themselves (no feature removed), by its fastest path."""
        component = self.components[name]
        # The tables walk the same trees without the model's per-call costs (validation, and
        # one OpenMP wake-up per tree in histogram gradient boosting): equal to rounding.
        tables = self.tables(name)
        if tables is not None:
            return component.finish(tables.predict(rows))
        return component.predict(rows)

    def _from_tables(self, name: str, coalitions: Coalitions,
                     rows: FloatArray) -> FloatArray | None:
        """(n_rows, n_coalitions), in row chunks that bound the lattice's memory; None when
        the component cannot be tabulated over the coalitions' players."""
        grouping, over_players = self._players(coalitions)
        tables = self.tables(name, None if not grouping else np.frombuffer(grouping, np.int64))
        if tables is None:
            return None
        n_players = over_players.shape[1]
        chunk = max(1, LATTICE_CELLS_PER_CHUNK >> min(n_players, MAX_LATTICE_PLAYERS))
        if len(rows) <= chunk:
            return tables.values_by_row(rows, over_players)
        out = np.empty((len(rows), len(coalitions)))
        for start in range(0, len(rows), chunk):
            out[start:start + chunk] = tables.values_by_row(rows[start:start + chunk],
                                                            over_players)
        return out

    def _players(self, coalitions: Coalitions) -> tuple[bytes, Coalitions]:
        """(grouping key, coalitions over the players) of a design's coalitions, remembered
        per design (designs are reused, and the tables key their reads by this array).

        The players are the coarsest groups of columns the coalitions move together (see
        core.coalitions.column_players): a design over feature groups is tabulated over its
        groups, whatever the number of columns the groups hold. The key is empty when the
        players are the columns themselves (the default tables).
        """
        key = id(coalitions)
        entry = self._player_cache.get(key)
        if entry is None or entry[0] is not coalitions:
            player_of_column, over_players = column_players(coalitions)
            # holding the array keeps its id unique
            entry = (coalitions, _grouping_key(player_of_column),
                     np.ascontiguousarray(over_players))
            self._player_cache[key] = entry
        return entry[1:]

    def spot_check(self, coalitions: Coalitions, rows: FloatArray, names: Sequence[str],
                   n_coalitions: int = 4, seed: int = 0) -> float:
        """Largest |fast path − brute force| over a few of the coalitions at the rows,
        relative to the values' scale: a run's own check that its fast paths are exact.

        The empty and full coalitions are skipped (brute force does not mask them); with no
        fast path in use the check costs nothing and returns 0.
        """
        coalitions = np.asarray(coalitions, dtype=bool)
        fast = [name for name in names if self.path_of(name) != "brute"]
        inner = np.flatnonzero(coalitions.any(axis=1) & ~coalitions.all(axis=1))
        if not fast or inner.size == 0 or len(rows) == 0:
            return 0.0
        rng = np.random.default_rng(seed)
        chosen = np.sort(rng.choice(inner, size=min(n_coalitions, inner.size), replace=False))
        # Rows of the same design, so the fast path sees the design's own grouping.
        with unmetered():
            fast_values = self.evaluate_by_row(coalitions, rows, fast)
        brute = MaskedEvaluator(self.components, self.background, self.rows_per_call, "brute")
        with unmetered():  # a check, not the run's work
            slow_values = brute.evaluate_by_row(coalitions[chosen], rows, fast)
        self.model_rows += brute.model_rows
        worst = 0.0
        for name in fast:
            got, want = fast_values[name][:, chosen], slow_values[name]
            scale = max(float(np.abs(want).max()), np.finfo(float).tiny)
            worst = max(worst, float(np.abs(got - want).max()) / scale)
        return worst

    def _predict(self, name: str, rows: FloatArray) -> FloatArray:
        self.model_rows += len(rows)
        return np.asarray(self.components[name].predictor.predict(rows), dtype=float)

    def _additive(self, name: str, coalitions: Coalitions, rows: FloatArray) -> FloatArray:
        predictor: Any = self.components[name].predictor  # is_additive: has additive_terms
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
                     rows: FloatArray) -> tuple[dict[str, FloatArray], int]:
        """{name: (n_coalitions, n_rows)} and the cells ticked on the work meter (one per
        (coalition, row) pair, as each model call is done: brute force is the slow path)."""
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
            return out, 0
        m, d = self.background.shape
        pairs_per_call = self.pairs_per_call
        pair_coalition = np.repeat(todo, n_rows)
        pair_row = np.tile(np.arange(n_rows), todo.size)
        # One buffer for every call: no fresh (pairs × m × d) array, and its pages, per call.
        # Each call refills it whole (background, then the rows' values on their coalitions'
        # columns), so a model that writes into its input cannot leak into the next call.
        buffer = np.empty((min(pairs_per_call, pair_coalition.size), m, d))
        for start in range(0, pair_coalition.size, pairs_per_call):
            checkpoint()  # brute force is the slow path: a caller may stop between model calls
            c = pair_coalition[start:start + pairs_per_call]
            r = pair_row[start:start + pairs_per_call]
            block = buffer[:len(c)]
            block[...] = self.background
            np.copyto(block, rows[r][:, None, :], where=coalitions[c][:, None, :])
            hybrids = block.reshape(-1, d)
            for name in names:
                values = exact_mean(self._predict(name, hybrids).reshape(len(c), m))
                out[name][c, r] = values
            advance(len(c))
        return out, pair_coalition.size

    @property
    def pairs_per_call(self) -> int:
        """(coalition, row) pairs per brute-force model call: each is m hybrid rows, and a
        call holds at most rows_per_call rows and about HYBRID_BYTES_PER_CALL bytes of them."""
        m, d = self.background.shape
        rows = min(self.rows_per_call, HYBRID_BYTES_PER_CALL // (8 * max(d, 1)))
        return max(1, rows // max(m, 1))


def _grouping_key(player_of_column: np.ndarray) -> bytes:
    """A hashable key of a grouping of the columns into players; b"" for the columns
    themselves (the default tables)."""
    players = np.asarray(player_of_column, dtype=np.int64)
    if bool((players == np.arange(players.size)).all()):
        return b""
    return players.tobytes()

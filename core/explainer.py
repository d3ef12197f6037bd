"""Explaining patients: the games on one design, the calibration game computed once.

    explainer = Explainer(system, background_size=64, seed=0)
    result = explainer.explain(patient_table, method="exact", alpha=0.1)

Changing alpha re-ranks the cached masked calibration scores; changing the method builds (and
caches) one more design; neither refits or re-evaluates anything already done. Cohorts are
explained in chunks of patients (bounded memory), optionally in worker processes or on a Dask
cluster (core.workers), each worker receiving the games once.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import numba
import numpy as np
import pandas as pd

from cpdecomp.core.attribution import Design, build_design
from cpdecomp.core.attribution.groups import Groups, check_groups
from cpdecomp.core.attribution.interactions import check_index, check_interaction_players
from cpdecomp.core.bounded import BoundedCache
from cpdecomp.core.cancel import checkpoint
from cpdecomp.core.conformal import Family, conformal_rank
from cpdecomp.core.decomposition import (
    Decomposition,
    Units,
    background_interval,
    calibration_attribution,
    calibration_interval,
    check_units,
    concatenate,
    decompose,
)
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.games import (
    CalibrationGame,
    MaskedEvaluator,
    MaskingPath,
    instance_shapley,
    instance_values,
)
from cpdecomp.core.games.cache import GameCache, content_digest, shared_cache
from cpdecomp.core.interactions import Interactions, LatticeGames, lattice_interactions
from cpdecomp.core.progress import unmetered
from cpdecomp.core.system import ConformalSystem
from cpdecomp.core.typing import FloatArray
from cpdecomp.core.workers import explain_in_workers, local_workers

BACKGROUND_STREAM = 1
"""Seed stream for the background sample, apart from the split's and the design's."""
PROBE_STREAM = 5
"""Seed stream of the feature combinations a cost estimate times (core.explainer.estimate)."""
BACKGROUND_BOOTSTRAP_STREAM = 4
"""Seed stream of the background bootstrap's redraws, apart from the split's, the background's,
the design's and the calibration bootstrap's (core.games.calibration.BOOTSTRAP_STREAM)."""
POINT = "prediction"
"""The point model's name among the evaluator's components (shown, not part of any game)."""
CELLS_PER_CHUNK = 1 << 20
"""(patients × coalitions) cells per chunk: a chunk's game arrays are 8 MiB each, and about ten
are alive at once, so memory stays bounded at any d (256 patients at d = 12)."""

MASKING_CHECK_TOLERANCE = 1e-9
"""Largest relative gap allowed between a fast masking path and brute force (they agree to
~1e-13; a larger gap is a wrong answer, refused rather than reported)."""
CHECKED_ROWS = 2
"""Calibration rows the masking spot check evaluates by brute force."""

BACKGROUND_BATCHES = 4
"""Batches the background is split into (interleaved rows) for its Monte Carlo error where a
component is masked by brute force: each part is computed on every batch, and sd / √batches is
its standard error (batch means). Costs one more pass over the background's model rows."""

BOOTSTRAP_LEVEL = 0.9
"""Default level of φ_C's bootstrap interval."""

CHUNKS_PER_TASK = 8
"""Chunks a parallel worker explains per task: each task ships the patient games (~13 MiB at
d = 12) once, so a task must be long enough to be worth it; its results are still small."""

PATIENT_GAMES_KEPT = 32
"""Configurations (method, alpha, units, ...) whose per-patient setup is remembered."""

Progress = Callable[[int, int], None]
"""Called with (patients done, patients in all) after each chunk."""


@dataclass(frozen=True)
class Query:
    """One configuration of per-patient work, by which its PatientGames are remembered."""

    method: str
    alpha: float
    units: Units
    budget: int | None
    groups: Groups | None
    bootstrap: int = 0
    """Replicates of φ_C's calibration bootstrap (0: none)."""
    background_bootstrap: int = 0
    """Redrawn backgrounds behind φ_C's background interval (0: none)."""
    fixed_quantile: bool = False
    """Also the fixed-q̂ comparator (PatientGames.fixed_quantile)."""


@dataclass(frozen=True, eq=False)
class Explanation:
    """Intervals and attributions for a batch of patients under one configuration."""

    decomposition: Decomposition
    prediction: FloatArray
    lower: FloatArray
    upper: FloatArray
    width: FloatArray
    base_width: float
    q_hat: float
    rank: int
    alpha: float
    family: str
    method: str
    budget: int | None
    n_evaluations: int
    """Coalitions each game was evaluated on."""
    n_calibration: int
    background_size: int
    masking_check_error: float = 0.0
    """Largest relative gap between the fast masking paths and brute force on a few of the
    design's coalitions (0 when brute force served every component)."""
    calibration_bootstrap: int = 0
    """Replicates of the calibration set behind φ_C's interval (0: no interval)."""
    background_bootstrap: int = 0
    """Redrawn backgrounds behind φ_C's background interval (0: no interval)."""
    background_batches: int = 0
    """Batches of the background behind the background standard errors (0: none computed;
    Decomposition.calibration_background_se)."""

    @property
    def features(self) -> tuple[str, ...]:
        return self.decomposition.features


@dataclass(frozen=True)
class RunEstimate:
    """What explaining a cohort will cost, measured on a few of its own rows before it starts.

    A cell is one feature combination at one row (calibration or patient; once more per
    redrawn background); `seconds` is the run's expected time: its masking, the calibration
    game's scores and sorts, and the patients' Shapley sums or leaf groups, each at its own
    pace (a few fixed costs, such as the masking check and the fit, are not in it).
    """

    cells: int
    """Cells the work meter counts (the background batches' cells are not among them, but
    their time is in `seconds`)."""
    calibration_cells: int
    """Cells of the calibration game (0 when it is already computed)."""
    seconds: float
    coalitions: int
    players: int
    background: int
    slow: tuple[str, ...]
    """The components masked by brute force (each cell costs a background's model rows)."""
    instance_path: str = "lattice"
    """Where the patients' φ_I comes from: "lattice" (v_I at every combination, then the
    Shapley sum) or "groups" (the trees' leaf groups, core.games.instance.instance_shapley)."""


PROBE_COALITIONS = 16
PROBE_BRUTE_ROWS = 2
"""A brute-force probe: one model call's worth of feature combinations (at least
PROBE_COALITIONS) at these rows."""
PROBE_ROWS = 64
"""Rows a fast-path probe evaluates at every combination: the tables' pace per row is reached
only over many rows at once (a call has a fixed cost of its own)."""


@dataclass(frozen=True, eq=False)
class InstancePart:
    """A chunk of patients' instance game and plain components (PatientGames.instance_part)."""

    rows: FloatArray
    instance_values: FloatArray | None
    """(n_patients, n_coalitions) v_I on the design's coalitions; None when `shapley` holds
    φ_I instead."""
    components: dict[str, FloatArray]
    prediction: FloatArray
    shapley: tuple[FloatArray, FloatArray, FloatArray] | None = None
    """(φ_I, v_I(all), v_I(none)) computed without the coalitions' values
    (core.games.instance.instance_shapley), or None."""


@dataclass(frozen=True, eq=False)
class PatientGames:
    """What explaining a chunk of patients needs once the calibration game is known.

    Kept small, because parallel workers receive it: no calibration tables, just v_C.
    """

    family: Family
    evaluator: MaskedEvaluator
    design: Design
    calibration_values: FloatArray
    system: ConformalSystem
    alpha: float
    q_hat: float
    rank: int
    units: Units
    players: tuple[str, ...]
    """Names of the attributions: features, or groups of them."""
    calibration_attribution: tuple[FloatArray, FloatArray | None]
    """φ_C on the family's scale and its standard errors: the same for every chunk."""
    masking_check_error: float = 0.0
    calibration_interval: tuple[FloatArray, FloatArray, float] | None = None
    """φ_C's bootstrap interval (low, high on the family's scale, level), when asked for."""
    fixed_quantile: bool = False
    """Also compute the fixed-q̂ comparator view (Decomposition.fixed_quantile)."""
    background_interval: tuple[FloatArray, FloatArray, float] | None = None
    """φ_C's interval over redrawn backgrounds (low, high on the family's scale, level)."""
    background_evaluators: tuple[MaskedEvaluator, ...] = ()
    """The redrawn backgrounds' evaluators, for φ_I's background interval per chunk."""
    batch_calibration: FloatArray | None = None
    """(n_batches, n_players) φ_C on each batch of the background (family scale), when the
    background's Monte Carlo error is computed (Explainer.background_error_on)."""
    batch_evaluators: tuple[MaskedEvaluator, ...] = ()
    """The background batches' evaluators, for φ_I's batch values per chunk."""

    def explain_chunks(self, chunks: list[FloatArray], threads: int | None = None
                       ) -> list[tuple[Decomposition, FloatArray, FloatArray, FloatArray]]:
        """explain_chunk over several chunks: a parallel worker's task, with the kernels on
        `threads` threads (its share of the machine: workers times threads ≤ cores)."""
        previous = numba.get_num_threads()
        if threads is not None:
            most = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]  # set at import
            numba.set_num_threads(max(1, min(threads, most)))
        try:
            return [self.explain_chunk(chunk) for chunk in chunks]
        finally:
            numba.set_num_threads(previous)

    def instance_replicates(self, rows: FloatArray) -> FloatArray | None:
        """(n_replicates, n_patients, n_players) φ_I on each redrawn background (family scale;
        NaN for a draw whose masked components the family refuses), or None without them."""
        if not self.background_evaluators:
            return None
        out = np.full((len(self.background_evaluators), len(rows), len(self.players)), np.nan)
        for r, evaluator in enumerate(self.background_evaluators):
            checkpoint()
            try:
                values = instance_values(self.family, evaluator, rows, self.design.coalitions)
            except CpdecompError:
                continue
            out[r] = self.design.apply(values)
        return out

    def batch_instance(self, rows: FloatArray) -> FloatArray | None:
        """(n_batches, n_patients, n_players) φ_I on each batch of the background (family
        scale; NaN for a batch whose masked components the family refuses), or None."""
        if self.batch_calibration is None or not self.batch_evaluators:
            return None
        out = np.full((len(self.batch_evaluators), len(rows), len(self.players)), np.nan)
        for k, evaluator in enumerate(self.batch_evaluators):
            checkpoint()
            try:
                with unmetered():  # reckoned in the estimate's seconds, not in its cells
                    values = instance_values(self.family, evaluator, rows,
                                             self.design.coalitions)
            except CpdecompError:
                continue
            out[k] = self.design.apply(values)
        return out

    def explain_chunk(self, rows: FloatArray) -> tuple[Decomposition, FloatArray, FloatArray,
                                                       FloatArray]:
        """(decomposition, prediction, lower, upper) for encoded patient rows."""
        return self.explain_part(self.instance_part(rows))

    def instance_part(self, rows: FloatArray) -> InstancePart:
        """What a chunk of patients gives whatever the calibration set: the instance game and
        the plain components. Games of the same fitted system and background on other
        calibration sets (Explainer.with_calibration) finish it each without evaluating it
        again (core.recalibration)."""
        shapley = instance_shapley(self.family, self.evaluator, rows, self.design,
                                   self.fixed_quantile)
        v_i = (instance_values(self.family, self.evaluator, rows, self.design.coalitions)
               if shapley is None else None)
        comps = {name: self.evaluator.plain(name, rows) for name in self.family.components}
        self.family.check_components(comps, "patient row")
        prediction = comps["f"] if "f" in comps else self.evaluator.plain(POINT, rows)
        return InstancePart(rows, v_i, comps, prediction, shapley)

    def explain_part(self, part: InstancePart) -> tuple[Decomposition, FloatArray, FloatArray,
                                                         FloatArray]:
        """(decomposition, prediction, lower, upper) of a chunk's instance part under this
        calibration set."""
        decomposition = decompose(self.design, self.calibration_values, part.instance_values,
                                  self.family.scale, self.units, self.players,
                                  self.calibration_attribution, self.calibration_interval,
                                  self.fixed_quantile, self.background_interval,
                                  self.instance_replicates(part.rows), self._batches(part.rows),
                                  instance_shapley=part.shapley)
        lower, upper = self.family.interval(self.q_hat, part.components)
        return decomposition, part.prediction, lower, upper

    def _batches(self, rows: FloatArray) -> tuple[FloatArray, FloatArray] | None:
        instance = self.batch_instance(rows)
        if instance is None or self.batch_calibration is None:
            return None
        return self.batch_calibration, instance


def join_explanations(parts: list[Explanation]) -> Explanation:
    """One explanation from chunks explained under the same configuration, in order."""
    first = parts[0]
    def joined(name: str) -> FloatArray:
        return np.concatenate([getattr(p, name) for p in parts])

    return replace(first, decomposition=concatenate([p.decomposition for p in parts]),
                   prediction=joined("prediction"), lower=joined("lower"),
                   upper=joined("upper"), width=joined("width"))


def draw_background(training_rows: FloatArray, size: int, seed: int) -> FloatArray:
    """A seeded random subsample of training rows (all of them when there are fewer)."""
    if size < 1:
        raise CpdecompError("the background needs at least 1 row")
    rng = np.random.default_rng((seed, BACKGROUND_STREAM))
    if size >= len(training_rows):
        return training_rows.copy()
    return training_rows[np.sort(rng.choice(len(training_rows), size=size, replace=False))]


def redrawn_backgrounds(training_rows: FloatArray, size: int, n_replicates: int, seed: int
                        ) -> Iterator[FloatArray]:
    """Backgrounds drawn afresh the way draw_background drew the run's, on their own stream.

    A background smaller than the training rows is a sample of them without replacement, so
    each replicate is another such sample: its spread is exactly the draw's. A background that
    holds every training row has no other draw; it is then resampled with replacement (the
    bootstrap), whose spread stands for the training sample's.
    """
    if n_replicates < 1:
        raise ValueError("a bootstrap needs at least one replicate")
    rng = np.random.default_rng((seed, BACKGROUND_BOOTSTRAP_STREAM))
    n_rows = len(training_rows)
    for _ in range(n_replicates):
        if size < n_rows:
            chosen = np.sort(rng.choice(n_rows, size=size, replace=False))
        else:
            chosen = np.sort(rng.integers(0, n_rows, size=n_rows))
        yield training_rows[chosen]


class Explainer:
    """Caches designs and calibration games for one conformal system and background."""

    def __init__(self, system: ConformalSystem, background_size: int = 64, seed: int = 0,
                 masking: MaskingPath = "auto", cache: GameCache | None = None,
                 background_error: bool | None = None) -> None:
        """background_error: compute the background's Monte Carlo standard errors (True),
        never (False), or where a family component is masked by brute force (None)."""
        self.system = system
        self.background_error = background_error
        self.seed = seed
        self.background = draw_background(system.fitted.training_rows, background_size, seed)
        # The point model rides along so its plain prediction can use tree tables too.
        components = {**system.fitted.components, POINT: system.fitted.point}
        self.evaluator = MaskedEvaluator(components, self.background, path=masking)
        self.cache = shared_cache() if cache is None else cache
        self._designs: dict[tuple, Design] = {}
        self._games: dict[tuple, CalibrationGame] = {}
        self._patient_games: BoundedCache[Query, PatientGames] = BoundedCache(PATIENT_GAMES_KEPT)
        self._masking_checks: dict[tuple, float] = {}
        self._redrawn: tuple[int, tuple[MaskedEvaluator, ...]] = (0, ())
        self._batch_evaluators: tuple[MaskedEvaluator, ...] | None = None
        self._batch_games: dict[tuple, list[CalibrationGame | None]] = {}

    def with_calibration(self, system: ConformalSystem) -> Explainer:
        """An explainer of the same fitted system on another calibration set.

        It shares this one's background, masking tables (the evaluator), designs, masking
        checks and cache, so another set costs its own calibration game and nothing else; its
        games are cached apart (memory, and on disk under the set's own digest).
        """
        if system.fitted is not self.system.fitted:
            raise ValueError("with_calibration needs a calibration set of the same fitted "
                             "system (fitted.conformalize(...)), not of another fit")
        other = copy.copy(self)
        other.system = system
        other._games = {}
        other._batch_games = {}
        other._patient_games = BoundedCache(PATIENT_GAMES_KEPT)
        return other

    @property
    def n_players(self) -> int:
        return len(self.system.feature_names)

    def link_scale(self) -> dict[str, str]:
        """{component: link} of the components masked on their link scale (models with a log
        link, unless masking is 'response'): exp of the mean raw margin over the background."""
        return {name: component.link for name, component in self.evaluator.components.items()
                if component.link is not None and name in self.system.family.components}

    def player_groups(self, groups: Sequence[Sequence[str]] | None) -> Groups | None:
        """Column indices of each player, from groups of feature names (features in no group
        stay players of their own); None without groups."""
        if not groups:
            return None
        features = list(self.system.feature_names)
        grouped: list[tuple[int, ...]] = []
        for group in groups:
            for name in group:
                if name not in features:
                    raise CpdecompError(f"feature group member {name!r} is not a feature")
            grouped.append(tuple(features.index(name) for name in group))
        taken = {c for group in grouped for c in group}
        singles: list[tuple[int, ...]] = [(c,) for c in range(len(features)) if c not in taken]
        return check_groups(grouped + singles, len(features))

    def player_values(self, table: pd.DataFrame, players: Groups | None) -> pd.DataFrame:
        """The players' values for a table of patients (a group's values joined by ' | ')."""
        values = table[list(self.system.feature_names)].reset_index(drop=True)
        if players is None:
            return values
        columns = {}
        for name, group in zip(self.player_names(players), players, strict=True):
            if len(group) == 1:
                columns[name] = values.iloc[:, group[0]]
            else:
                parts = values.iloc[:, list(group)].astype(str)
                columns[name] = parts.agg(" | ".join, axis=1)
        return pd.DataFrame(columns)

    def design(self, method: str, budget: int | None = None,
               groups: Groups | None = None) -> Design:
        """The method's design over the features, or over groups of them (cached)."""
        key = (method, self.n_players, budget, self.seed, groups)
        if key not in self._designs:
            self._designs[key] = build_design(method, self.n_players, budget, self.seed,
                                              groups=groups)
        return self._designs[key]

    def player_names(self, groups: Groups | None = None) -> tuple[str, ...]:
        """Feature names, or 'a + b' for a group of features."""
        names = self.system.feature_names
        if groups is None:
            return names
        return tuple(" + ".join(names[c] for c in group) for group in groups)

    def calibration_game(self, method: str, budget: int | None = None,
                         groups: Groups | None = None, keep_order: bool = False
                         ) -> CalibrationGame:
        """The calibration game on the method's design: from memory, disk, or computed once.

        keep_order: also keep the calibration row behind each sorted score (what a bootstrap
        needs); a game kept without it is then read or computed once more.
        """
        key = (method, budget, groups)
        game = self._games.get(key)
        if game is None or (keep_order and game.order is None):
            self._games[key] = self._stored_or_computed(self.design(method, budget, groups),
                                                        keep_order)
        return self._games[key]

    def _stored_or_computed(self, design: Design, keep_order: bool) -> CalibrationGame:
        shape = (len(design.coalitions), self.system.n_calibration)
        stored_key = self._stored_key(design)
        order_key = None if stored_key is None else content_digest("row-order", stored_key)
        stored = None if stored_key is None else self.cache.get(stored_key)
        order = None
        if keep_order and order_key is not None:
            order = self.cache.get(order_key)
        if stored is not None and stored.shape == shape and (
                not keep_order or (order is not None and order.shape == shape)):
            return CalibrationGame(self.system.family, design.coalitions, stored, order)
        game = CalibrationGame.compute(
            self.system.family, self.evaluator, self.system.calibration_rows,
            self.system.calibration_targets, design.coalitions, keep_order=keep_order,
        )
        if stored_key is not None and order_key is not None:
            self.cache.put(stored_key, game.sorted_scores)
            if game.order is not None:
                self.cache.put(order_key, game.order)
        return game

    def estimate(self, n_patients: int, method: str = "exact", budget: int | None = None,
                 groups: Groups | None = None, background_bootstrap: int = 0,
                 fixed_quantile: bool = False) -> RunEstimate:
        """The cost of explaining `n_patients`, timed on a few calibration rows.

        Fast paths are timed on PROBE_ROWS rows at every combination (after their tables are
        built, which the run then reuses), masked alone (a patient's cells) and as a
        calibration game (masked, scored and sorted); brute force on one model call's worth of
        combinations at PROBE_BRUTE_ROWS rows, since one row of it can already take seconds.
        Patients whose φ_I comes from the trees' leaf groups (instance_shapley) are timed on
        that path instead of the combinations, and the Shapley sum over the combinations is
        timed too (at d = 16 it is nearly half of a patient's time on the lattice). A
        calibration game already computed (in memory or the disk cache) costs nothing. The
        probe does not move the work meter. Measured against the runs themselves:
        docs/benchmarks/estimate.md.
        """
        design = self.design(method, budget, groups)
        coalitions = design.coalitions
        names = self.system.family.components
        n_calibration = self.system.n_calibration
        stored = self._stored_key(design)
        cached = (method, budget, groups) in self._games or (
            stored is not None and self.cache.holds(stored))
        calibration_cells = 0 if cached else len(coalitions) * n_calibration
        cells = (calibration_cells + len(coalitions) * (n_patients + background_bootstrap * (
            n_calibration + n_patients)))
        slow = tuple(name for name in names if self.evaluator.path_of(name) == "brute")
        rows = self.system.calibration_rows[:PROBE_BRUTE_ROWS if slow else PROBE_ROWS]
        if slow:
            rng = np.random.default_rng((self.seed, PROBE_STREAM))
            inner = np.flatnonzero(coalitions.any(axis=1) & ~coalitions.all(axis=1))
            # one full model call's worth: the pace of brute force includes each call's own cost
            size = min(inner.size, max(PROBE_COALITIONS,
                                       self.evaluator.pairs_per_call // PROBE_BRUTE_ROWS))
            probe = coalitions[np.sort(rng.choice(inner, size, replace=False))] if inner.size \
                else coalitions
        else:
            probe = coalitions
        family = self.system.family
        targets = self.system.calibration_targets[:len(rows)]
        per_patient = 0.0  # on the groups' path: seconds per patient
        with unmetered():
            # The kernels compiled (or read from numba's cache) and the combinations' own
            # tables built first, on one row: once per process and per design, not per cell
            # (timed with the rows, they had the probe read 2-7 times the run's pace). Brute
            # force builds no such tables, and one row of it can take seconds.
            self.evaluator.evaluate_by_row(probe[:2] if slow else probe, rows[:1], names)
            started = time.perf_counter()
            self.evaluator.evaluate_by_row(probe, rows, names)
            masking = (time.perf_counter() - started) / max(len(probe) * len(rows), 1)
            # A calibration cell is also scored and sorted: at d = 16 that is more than its
            # masking. Brute force's model calls dwarf both, so its probe is not run twice.
            calibrating = masking
            if not slow:
                started = time.perf_counter()
                CalibrationGame.compute(family, self.evaluator, rows, targets, probe)
                calibrating = (time.perf_counter() - started) / max(len(probe) * len(rows), 1)
            groups_path = instance_shapley(family, self.evaluator, rows[:1], design,
                                           fixed_quantile) is not None
            if groups_path:
                started = time.perf_counter()
                instance_shapley(family, self.evaluator, rows, design, fixed_quantile)
                per_patient = (time.perf_counter() - started) / len(rows)
            # the Shapley sum over the combinations: its cost is the design's, not the values'
            games = np.zeros((PROBE_ROWS, len(coalitions)))
            design.apply(games[:1])
            started = time.perf_counter()
            design.apply(games)
            per_sum = (time.perf_counter() - started) / PROBE_ROWS
        # Calibration games: this set's (unless computed) and one per redrawn background.
        calibration = calibration_cells + len(coalitions) * background_bootstrap * n_calibration
        # The background's batches (background_error_on) mask every cell once more, over the
        # same model rows in all: their time is counted, their cells move no meter.
        batches = len(self.background_batches()) if self.background_error_on() else 0
        if batches:
            done = (method, budget, groups) in self._batch_games
            calibration += len(coalitions) * (0 if done else n_calibration)
        # Per patient: v_I masked at every combination once per background (the run's own
        # unless on the groups' path, each redrawn one, the batches'), and the Shapley sums
        # the run takes over combinations: φ_I and φ_T (one each on the lattice), the fixed-q̂
        # view, and one per redrawn background and per batch.
        backgrounds = background_bootstrap + (1 if batches else 0)
        sums = background_bootstrap + batches
        if groups_path:
            patients = n_patients * (per_patient + sums * per_sum)
        else:
            backgrounds += 1
            patients = n_patients * (2 + fixed_quantile + sums) * per_sum
        patients += masking * len(coalitions) * n_patients * backgrounds
        seconds = calibrating * calibration + patients
        return RunEstimate(cells, calibration_cells, seconds,
                           len(coalitions), coalitions.shape[1], len(self.background), slow,
                           "groups" if groups_path else "lattice")

    def calibration_bootstrap(self, method: str, alpha: float, n_replicates: int,
                              budget: int | None = None, groups: Groups | None = None,
                              level: float = BOOTSTRAP_LEVEL
                              ) -> tuple[FloatArray, FloatArray, float]:
        """φ_C's percentile interval over `n_replicates` resampled calibration sets.

        The calibration set is one draw: another would move q̂ and so φ_C. Each replicate
        re-weights the kept masked scores (no model call); the background and the fitted
        components stay fixed, so the interval is the calibration sample's share of the
        uncertainty only. Returns (low, high) on the family's scale and the level.
        """
        design = self.design(method, budget, groups)
        game = self.calibration_game(method, budget, groups, keep_order=True)
        values = game.bootstrap_values(alpha, n_replicates, seed=self.seed)
        low, high = calibration_interval(design, values, level)
        return low, high, level

    def background_bootstrap(self, method: str, alpha: float, n_replicates: int,
                             budget: int | None = None, groups: Groups | None = None,
                             level: float = BOOTSTRAP_LEVEL
                             ) -> tuple[FloatArray, FloatArray, float]:
        """φ_C's interval over `n_replicates` backgrounds drawn afresh (redrawn_backgrounds).

        The background is one draw: another would move every masked score and so φ_C. Each
        replicate computes the calibration game once more on its own background (the fitted
        components and the calibration set stay fixed; repeated rows are simply counted twice
        by every masking path), so a replicate costs what one calibration game costs: the
        interval is the background's share of the uncertainty only, beside the calibration
        bootstrap's. Replicates whose masked components or quantiles the family refuses are
        left out. Returns (low, high) on the family's scale and the level.
        """
        design = self.design(method, budget, groups)
        estimate = calibration_attribution(
            design, self.calibration_game(method, budget, groups).values(alpha))[0]
        family = self.system.family
        values = np.full((n_replicates, len(design.coalitions)), np.nan)
        for r, evaluator in enumerate(self.redrawn_evaluators(n_replicates)):
            checkpoint()
            try:
                game = CalibrationGame.compute(family, evaluator, self.system.calibration_rows,
                                               self.system.calibration_targets,
                                               design.coalitions)
                values[r] = game.values(alpha)
            except CpdecompError:
                continue  # this draw's masked pipeline is undefined for the family: left out
        low, high = background_interval(design, values, estimate, level)
        return low, high, level

    def redrawn_evaluators(self, n_replicates: int) -> tuple[MaskedEvaluator, ...]:
        """Evaluators of the family's components on `n_replicates` redrawn backgrounds (the
        last count asked for is kept: φ_C's and φ_I's intervals then share the draws, and each
        draw's tree tables are built once)."""
        if self._redrawn[0] != n_replicates:
            components = {name: self.system.fitted.components[name]
                          for name in self.system.family.components}
            backgrounds = redrawn_backgrounds(self.system.fitted.training_rows,
                                              len(self.background), n_replicates, self.seed)
            self._redrawn = (n_replicates, tuple(
                MaskedEvaluator(components, b, path=self.evaluator.path) for b in backgrounds))
        return self._redrawn[1]

    def background_error_on(self) -> bool:
        """Whether runs report the background's Monte Carlo standard errors: by default where
        some component of the family is masked by brute force (its background is small)."""
        if self.background_error is not None:
            return self.background_error
        return any(self.evaluator.path_of(name) == "brute"
                   for name in self.system.family.components)

    def background_batches(self) -> tuple[MaskedEvaluator, ...]:
        """Evaluators of the family's components on BACKGROUND_BATCHES interleaved batches of
        the run's own background (rows k, k + K, k + 2K, ...; fewer batches when the
        background has fewer than 2K rows, none below 2 rows)."""
        if self._batch_evaluators is None:
            n_batches = min(BACKGROUND_BATCHES, len(self.background) // 2)
            components = {name: self.system.fitted.components[name]
                          for name in self.system.family.components}
            self._batch_evaluators = tuple(
                MaskedEvaluator(components, self.background[k::n_batches],
                                path=self.evaluator.path)
                for k in range(n_batches)) if n_batches >= 2 else ()
        return self._batch_evaluators

    def batch_calibration(self, method: str, alpha: float, budget: int | None = None,
                          groups: Groups | None = None) -> FloatArray:
        """(n_batches, n_players) φ_C on each batch of the background (family scale; NaN
        for a batch the family refuses). Each batch's game is computed once per design."""
        design = self.design(method, budget, groups)
        key = (method, budget, groups)
        if key not in self._batch_games:
            games: list[CalibrationGame | None] = []
            for evaluator in self.background_batches():
                checkpoint()
                try:
                    with unmetered():  # reckoned in the estimate's seconds, not its cells
                        games.append(CalibrationGame.compute(
                            self.system.family, evaluator, self.system.calibration_rows,
                            self.system.calibration_targets, design.coalitions))
                except CpdecompError:
                    games.append(None)  # undefined on this batch for the family: left out
            self._batch_games[key] = games
        out = np.full((len(self._batch_games[key]), len(self.player_names(groups))), np.nan)
        for k, game in enumerate(self._batch_games[key]):
            if game is not None:
                out[k] = design.apply(game.values(alpha))
        return out

    def masking_check(self, method: str, budget: int | None = None,
                      groups: Groups | None = None) -> float:
        """The run's own check of its fast paths, once per design: tree tables and closed
        forms against brute force on a few of the design's coalitions at two calibration rows.

        A gap above MASKING_CHECK_TOLERANCE is refused: the fast paths are exact by
        construction, so a gap means a wrong answer (as past 63 grouped columns once was).
        """
        key = (method, budget, groups)
        if key not in self._masking_checks:
            design = self.design(method, budget, groups)
            error = self.evaluator.spot_check(
                design.coalitions, self.system.calibration_rows[:CHECKED_ROWS],
                list(self.evaluator.components), seed=self.seed,
            )
            if error > MASKING_CHECK_TOLERANCE:
                raise CpdecompError(
                    f"internal check failed: the fast masking path differs from brute force by "
                    f"{error:.2g} of the values' scale; rerun with --masking brute and report "
                    f"this"
                )
            self._masking_checks[key] = error
        return self._masking_checks[key]

    def _stored_key(self, design: Design) -> str | None:
        """Content hash of the game: system, background and the design's coalitions."""
        if self.system.digest is None:
            return None  # injected functions cannot be hashed: keep the game in memory only
        return content_digest("calibration-game", self.system.digest, self.background,
                              design.coalitions, self.evaluator.path)

    def patient_games(self, method: str = "exact", alpha: float = 0.1, units: Units = "width",
                      budget: int | None = None, groups: Groups | None = None,
                      bootstrap: int = 0, background_bootstrap: int = 0) -> PatientGames:
        """Everything per-patient work needs, with the calibration game evaluated at alpha
        (and φ_C's interval over `bootstrap` resampled calibration sets, when > 0, and over
        `background_bootstrap` redrawn backgrounds, when > 0)."""
        family = self.system.family
        check_units(family.scale, units, family.name)
        rank = conformal_rank(self.system.n_calibration, alpha)  # refuse an impossible alpha
        design = self.design(method, budget, groups)
        # With a bootstrap, the game keeps its rows' order from the start: computed once, not
        # once without the order and again with it.
        v_c = self.calibration_game(method, budget, groups, keep_order=bootstrap > 0).values(alpha)
        return PatientGames(family, self.evaluator, design, v_c, self.system, alpha,
                            self.system.quantile(alpha), rank, units, self.player_names(groups),
                            calibration_attribution(design, v_c),
                            self.masking_check(method, budget, groups),
                            self.calibration_bootstrap(method, alpha, bootstrap, budget, groups)
                            if bootstrap > 0 else None,
                            background_interval=self.background_bootstrap(
                                method, alpha, background_bootstrap, budget, groups)
                            if background_bootstrap > 0 else None,
                            background_evaluators=self.redrawn_evaluators(background_bootstrap)
                            if background_bootstrap > 0 else (),
                            **self._batch_fields(method, alpha, budget, groups))

    def _batch_fields(self, method: str, alpha: float, budget: int | None,
                      groups: Groups | None) -> dict:
        """PatientGames' batch fields when the background's Monte Carlo error is computed."""
        if not self.background_error_on() or not self.background_batches():
            return {}
        return {"batch_calibration": self.batch_calibration(method, alpha, budget, groups),
                "batch_evaluators": self.background_batches()}

    def _games_for(self, method: str, alpha: float, units: Units, budget: int | None,
                   groups: Groups | None, bootstrap: int = 0, background_bootstrap: int = 0,
                   fixed_quantile: bool = False) -> PatientGames:
        """patient_games, remembered: a dashboard explains one patient per click, and a
        streamed cohort's input chunks reach the same worker processes (core.workers)."""
        query = Query(method, float(alpha), units, budget, groups, bootstrap,
                      background_bootstrap, fixed_quantile)
        if fixed_quantile:
            return self._patient_games.get_or_compute(query, lambda: replace(self._games_for(
                method, alpha, units, budget, groups, bootstrap, background_bootstrap),
                fixed_quantile=True))
        return self._patient_games.get_or_compute(query, lambda: self.patient_games(
            method, alpha, units, budget, groups, bootstrap, background_bootstrap))

    def iter_explain_rows(self, rows: FloatArray, method: str = "exact", alpha: float = 0.1,
                          units: Units = "width", budget: int | None = None, jobs: int = 1,
                          progress: Progress | None = None, chunk_size: int | None = None,
                          groups: Groups | None = None, calibration_bootstrap: int = 0,
                          fixed_quantile: bool = False, background_bootstrap: int = 0
                          ) -> Iterator[Explanation]:
        """Explain encoded patient rows chunk by chunk, yielding each chunk's explanation in
        order as it is done (in parallel when jobs != 1): a consumer that writes each chunk
        away holds one chunk's results, not the cohort's.

        calibration_bootstrap: replicates of the calibration set behind φ_C's interval (0:
        none); see calibration_bootstrap. fixed_quantile: also the practitioners' comparator,
        the Shapley values of the width at the full model's q̂ (Decomposition.fixed_quantile).
        background_bootstrap: backgrounds drawn afresh behind φ_C's background interval (0:
        none; each costs one calibration game); see background_bootstrap.
        """
        games = self._games_for(method, alpha, units, budget, groups, calibration_bootstrap,
                                background_bootstrap, fixed_quantile)
        if chunk_size is None:
            chunk_size = max(1, CELLS_PER_CHUNK // len(games.design.coalitions))
        starts = range(0, len(rows), chunk_size)
        if not starts:
            raise CpdecompError("there are no patients to explain")
        chunks = (rows[start:start + chunk_size] for start in starts)
        if jobs == 1 or len(starts) == 1:
            results: Iterator[tuple] = (games.explain_chunk(chunk) for chunk in chunks)
        else:
            results = self._in_parallel(games, list(chunks), jobs)
        done = 0
        for decomposition, prediction, lower, upper in results:
            checkpoint()
            done += len(prediction)
            if progress is not None:
                progress(done, len(rows))
            yield replace(self._explanation(games, method, alpha, calibration_bootstrap,
                                            decomposition, prediction, lower, upper),
                          background_bootstrap=background_bootstrap)

    @staticmethod
    def _in_parallel(games: PatientGames, chunks: list[FloatArray], jobs: int) -> Iterator[tuple]:
        """Chunks explained by worker processes, CHUNKS_PER_TASK per task, results in order;
        the games go to each worker once (core.workers)."""
        workers = local_workers(jobs)
        per_task = max(1, min(CHUNKS_PER_TASK, -(-len(chunks) // workers)))  # all get work
        tasks = [chunks[i:i + per_task] for i in range(0, len(chunks), per_task)]
        for parts in explain_in_workers(games, tasks, jobs):
            yield from parts

    def _explanation(self, games: PatientGames, method: str, alpha: float,
                     calibration_bootstrap: int, decomposition: Decomposition,
                     prediction: FloatArray, lower: FloatArray, upper: FloatArray
                     ) -> Explanation:
        family = self.system.family
        base = float(np.exp(decomposition.empty_value) if family.scale == "log"
                     else decomposition.empty_value)
        return Explanation(
            decomposition=decomposition, prediction=prediction, lower=lower, upper=upper,
            width=upper - lower, base_width=base, q_hat=games.q_hat, rank=games.rank,
            alpha=float(alpha),
            family=family.name, method=method, budget=games.design.budget,
            n_evaluations=len(games.design.coalitions),
            n_calibration=self.system.n_calibration, background_size=len(self.background),
            masking_check_error=games.masking_check_error,
            calibration_bootstrap=calibration_bootstrap,
            background_batches=(len(games.batch_evaluators)
                                if games.batch_calibration is not None else 0),
        )

    def explain_rows(self, rows: FloatArray, method: str = "exact", alpha: float = 0.1,
                     units: Units = "width", budget: int | None = None, jobs: int = 1,
                     progress: Progress | None = None, chunk_size: int | None = None,
                     groups: Groups | None = None, calibration_bootstrap: int = 0,
                     fixed_quantile: bool = False, background_bootstrap: int = 0
                     ) -> Explanation:
        """Explain encoded patient rows, chunk by chunk, into one explanation (see
        iter_explain_rows for the arguments)."""
        parts = list(self.iter_explain_rows(rows, method, alpha, units, budget, jobs, progress,
                                            chunk_size, groups, calibration_bootstrap,
                                            fixed_quantile, background_bootstrap))
        return parts[0] if len(parts) == 1 else join_explanations(parts)

    def explain(self, patients: pd.DataFrame, method: str = "exact", alpha: float = 0.1,
                units: Units = "width", budget: int | None = None, jobs: int = 1,
                progress: Progress | None = None, groups: Groups | None = None,
                calibration_bootstrap: int = 0, fixed_quantile: bool = False,
                background_bootstrap: int = 0) -> Explanation:
        """Explain patients given as a table with the feature columns."""
        return self.explain_rows(self.system.fitted.encode(patients), method, alpha, units,
                                 budget, jobs=jobs, progress=progress, groups=groups,
                                 calibration_bootstrap=calibration_bootstrap,
                                 fixed_quantile=fixed_quantile,
                                 background_bootstrap=background_bootstrap)

    def interactions_rows(self, rows: FloatArray, alpha: float = 0.1, index: str = "SII",
                          units: Units = "width", groups: Groups | None = None) -> Interactions:
        """Pairwise interaction values ("SII" or "k-SII") of the calibration, instance and total
        games at encoded patient rows, from the exact method's lattice of all 2^d coalitions
        (so at most 16 features or groups); the calibration game is the exact method's, cached.
        """
        check_index(index)
        check_interaction_players(self.n_players if groups is None else len(groups))
        if len(rows) == 0:
            raise CpdecompError("there are no patients to explain")
        games = self._games_for("exact", alpha, units, None, groups)
        lattice = LatticeGames(games.family, games.evaluator, games.design,
                               games.calibration_values, games.calibration_attribution[0],
                               games.units, games.players, games.alpha)
        return lattice_interactions(lattice, rows, index)

    def interactions(self, patients: pd.DataFrame, alpha: float = 0.1, index: str = "SII",
                     units: Units = "width", groups: Groups | None = None) -> Interactions:
        """interactions_rows for patients given as a table with the feature columns."""
        return self.interactions_rows(self.system.fitted.encode(patients), alpha, index, units,
                                      groups)

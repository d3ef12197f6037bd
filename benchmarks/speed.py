"""Speed of cpdecomp's two games against the performance page's targets, and against brute force.

    python benchmarks/speed.py [--quick] [--out docs/benchmarks/speed.md]

Workload: seeded synthetic data with a heteroscedastic outcome, d features, 3,000 training rows,
gradient boosting (100 trees x 31 leaves) for f and sigma, the normalized family, alpha = 0.1.
Every comparison is made side by side in one process, and every figure is a median over
repeats, because the machine may be shared: read single numbers as +-30 % and ratios as the
result. Prints a markdown report and writes it (with the machine, versions, command and date).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import ctypes
import gc
import hashlib
import io
import os
import platform
import pstats
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before any OpenMP runtime loads

import numba
import numpy as np
import pandas as pd
import shap
import user_models
from threadpoolctl import ThreadpoolController

from core import Explainer, fit_system
from core.conformal import conformal_rank
from core.explainer import CELLS_PER_CHUNK
from core.games import MaskedEvaluator, instance_values
from core.games.cache import GameCache
from core.games.masking import ROWS_PER_CALL
from core.system import ConformalSystem, FittedSystem
from core.versions import REPORTED, library_versions

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "benchmarks" / "speed.md"

SEED = 0
ALPHA = 0.1
METHOD = "exact"
TRAINING_ROWS = 3000
CALIBRATION_POOL = 1000
PATIENT_POOL = 10_000
FAMILY = "normalized"
MODEL = "gbm"
NEW_ALPHAS = (0.05, 0.2, 0.15, 0.25, 0.1)
BRUTE_ROW_BUDGET = 1_000_000
"""Model rows spent per cell on timing brute force (and again on the naive approach)."""
SHAP_FULL_RUN_LIMIT_S = 30.0
"""Run shap's KernelExplainer end to end only where the naive estimate is below this..."""
SHAP_TARGET_RUN_LIMIT_S = 150.0
"""... or, at the issue's target configurations, below this (a busy machine is slower)."""
AGREEMENT = 1e-10
MIB = 2**20


# --- plan ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One workload: d features, n calibration rows, m background rows."""

    d: int
    n: int
    m: int
    cohort_patients: int = PATIENT_POOL
    cold_repeats: int | None = None
    """Overrides the plan's repeats of the cold calibration game (d = 16 takes ~10 s each)."""

    @property
    def label(self) -> str:
        return f"d={self.d}, n={self.n}, m={self.m}"


@dataclass(frozen=True)
class Plan:
    cells: tuple[Cell, ...]
    cold_repeats: int
    latency_calls: int
    diagnostic_calls: int
    """Of the latency calls, how many also time the diagnostic variants (chunk, one thread)."""
    alpha_repeats: int
    tables_repeats: int
    profile_cell: Cell
    quick: bool


NAIVE_TARGETS = {Cell(8, 200, 50): 1e4, Cell(12, 1000, 200): 1e6}
"""The issue's targets for naive-per-patient / ours-per-patient, by configuration."""


def full_plan() -> Plan:
    grid = [Cell(d, n, m) for d in (8, 10, 12) for n in (200, 1000) for m in (200, 1000)]
    # d = 16: 500 patients fill one chunk of 2^16-coalition games (GiBs of buffers already).
    cells = [Cell(8, 200, 50), *grid, Cell(16, 500, 200, cohort_patients=500, cold_repeats=2)]
    return Plan(tuple(cells), cold_repeats=3, latency_calls=200, diagnostic_calls=50,
                alpha_repeats=30,
                tables_repeats=1, profile_cell=Cell(12, 1000, 200), quick=False)


def quick_plan() -> Plan:
    cells = (Cell(8, 200, 50, 2000), Cell(8, 200, 200, 2000), Cell(12, 200, 200, 2000))
    return Plan(cells, cold_repeats=2, latency_calls=200, diagnostic_calls=50, alpha_repeats=10,
                tables_repeats=1, profile_cell=cells[-1], quick=True)


# --- measurements ------------------------------------------------------------------------------


@dataclass
class Machine:
    cores: int
    cpu: str
    ram_gib: float
    python: str
    versions: dict[str, str]
    omp_wait_policy: str
    numba_layer: str
    numba_threads: int
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    commit: str = "?"
    core_changed: str = ""
    """Non-empty when core/ changed while the benchmark ran (it then measured the old code)."""
    warmup_s: float = 0.0


@dataclass
class Memory:
    """Peak resident memory above the baseline while one operation ran."""

    operation: str
    sampled_mib: float
    """VmRSS sampled every 2 ms by a background thread (misses peaks inside GIL-held kernels)."""
    hwm_mib: float | None
    """VmHWM after resetting it through /proc/self/clear_refs (exact); None where refused."""

    @property
    def peak_mib(self) -> float:
        return max(self.sampled_mib, self.hwm_mib or 0.0)


@dataclass
class ColdCalibration:
    seconds: list[float]
    cpu_seconds: list[float]
    """Process CPU time (all threads): with c cores, wall >= cpu / c on an idle machine."""

    @property
    def median(self) -> float:
        return float(np.median(self.seconds))

    @property
    def cpu_median(self) -> float:
        return float(np.median(self.cpu_seconds))


@dataclass
class Latency:
    """Single-patient calls with the calibration game cached (seconds per call)."""

    explain_rows: list[float]
    explain_rows_cpu: list[float]
    explain_chunk: list[float]
    instance_game: list[float]

    @staticmethod
    def ms(samples: Sequence[float], q: float) -> float:
        return float(np.percentile(samples, q)) * 1e3


@dataclass
class AlphaChange:
    values_s: list[float]
    patient_games_s: list[float]
    model_rows: int
    predict_calls: int

    @property
    def no_model_call(self) -> bool:
        return self.model_rows == 0 and self.predict_calls == 0


@dataclass
class Cohort:
    patients: int
    calibration_s: float
    explain_s: float
    explain_cpu_s: float
    chunk_rates: list[float]

    @property
    def per_second(self) -> float:
        return self.patients / self.explain_s

    @property
    def total_10k_s(self) -> float:
        """The cold calibration game plus 10,000 patients (extrapolated when fewer ran)."""
        return self.calibration_s + PATIENT_POOL / self.per_second


@dataclass
class BruteComparison:
    """Tree tables against brute-force masking of the calibration rows."""

    coalitions_timed: int
    brute_s: list[float]
    """Per coalition timed."""
    hybrid_rows: list[int]
    predict_row_s: list[float]
    """The models' own predict time per row on a batch as large as brute force's calls."""
    tables_full_s: list[float]
    n_coalitions: int
    max_abs_diff: float

    @property
    def brute_full_s(self) -> float:
        """Brute force over all 2^d coalitions (the empty and full ones cost about nothing)."""
        return float(np.median(self.brute_s)) * (self.n_coalitions - 2)

    @property
    def ratio(self) -> float:
        return self.brute_full_s / float(np.median(self.tables_full_s))

    @property
    def brute_row_s(self) -> float:
        return float(np.median([t / r for t, r in zip(self.brute_s, self.hybrid_rows,
                                                       strict=True)]))

    @property
    def paired_ratios(self) -> list[float]:
        """Brute force per row / predict per row, for each interleaved pair of timings."""
        return [t / r / p for t, r, p in zip(self.brute_s, self.hybrid_rows, self.predict_row_s,
                                             strict=True)]

    @property
    def efficiency(self) -> float:
        return self.brute_row_s / float(np.median(self.predict_row_s))


@dataclass
class Naive:
    """One width function per patient, recalibrated inside every coalition, handed to shap."""

    coalition_s: list[float]
    n_coalitions: int
    shap_full_s: float | None
    max_rel_diff: float

    @property
    def extrapolated_s(self) -> float:
        return float(np.median(self.coalition_s)) * self.n_coalitions

    @property
    def per_patient_s(self) -> float:
        return self.shap_full_s if self.shap_full_s is not None else self.extrapolated_s


@dataclass
class CellResult:
    cell: Cell
    cold: ColdCalibration
    latency: Latency
    alpha: AlphaChange
    cohort: Cohort
    memory: list[Memory]
    brute: BruteComparison
    naive: Naive

    @property
    def ours_patient_s(self) -> float:
        return Latency.ms(self.latency.explain_rows, 50) / 1e3

    @property
    def largest_memory(self) -> Memory:
        return max(self.memory, key=lambda m: m.peak_mib)


ProfileRow = tuple[str, int, float, float]
"""(function, calls in the profiled run, ms per patient, share of the profiled time)."""


@dataclass
class Profile:
    cell: Cell
    calls: int
    rows: list[ProfileRow]
    chunk_patients: int
    chunk_rows: list[ProfileRow]
    predict_default_ms: float
    predict_one_thread_ms: float
    plain_ms: float | None
    """The evaluator's own plain prediction of one row (tree tables), where core has one."""
    predicts_per_patient: float


@dataclass
class Report:
    machine: Machine
    plan: Plan
    command: str
    started: str
    results: list[CellResult] = field(default_factory=list)
    profile: Profile | None = None
    user_models: list[dict[str, Any]] = field(default_factory=list)
    """Rows of user_models.measure: XGBoost, LightGBM and a Pipeline against shap."""
    elapsed_s: float = 0.0


# --- small tools -------------------------------------------------------------------------------


_START = time.perf_counter()


def publish(text: str, out: Path | None) -> None:
    """Print a benchmark's markdown report and, given a path, write it there too."""
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        log(f"wrote {out}")


def log(message: str) -> None:
    print(f"{time.perf_counter() - _START:7.1f}s {message}", file=sys.stderr, flush=True)


def timed(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = function(*args, **kwargs)
    return time.perf_counter() - start, value


def timed_cpu(function: Callable[..., Any], *args: Any,
              **kwargs: Any) -> tuple[float, float, Any]:
    """(wall seconds, process CPU seconds over all threads, value)."""
    cpu = time.process_time()
    wall, value = timed(function, *args, **kwargs)
    return wall, time.process_time() - cpu, value


def status_kib(key: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def release_free_memory() -> None:
    """Hand freed heap pages back to the OS, so a baseline is not inflated by old garbage."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def reset_high_water_mark() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


class PeakMemory:
    """Context manager: peak extra RSS of the block, sampled every `interval` s and via VmHWM."""

    def __init__(self, operation: str, interval: float = 0.002) -> None:
        self.operation = operation
        self.interval = interval
        self.result: Memory | None = None

    def __enter__(self) -> PeakMemory:
        release_free_memory()
        self._hwm = reset_high_water_mark()
        self._baseline = status_kib("VmRSS")
        self._peak = self._baseline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self._peak = max(self._peak, status_kib("VmRSS"))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._peak = max(self._peak, status_kib("VmRSS"))
        hwm = (status_kib("VmHWM") - self._baseline) * 1024 / MIB if self._hwm else None
        sampled = (self._peak - self._baseline) * 1024 / MIB
        self.result = Memory(self.operation, sampled, hwm)


@contextlib.contextmanager
def counting_predictions(system: ConformalSystem) -> Iterator[list[int]]:
    """Count every predict call on the system's fitted models while the block runs."""
    calls = [0]
    fitted = system.fitted
    predictors = {id(c.predictor): c.predictor
                  for c in (fitted.point, *fitted.components.values())}
    for predictor in predictors.values():
        original = predictor.predict

        def counted(rows: np.ndarray, _original: Callable = original) -> np.ndarray:
            calls[0] += 1
            return _original(rows)

        predictor.predict = counted  # an instance attribute shadows the method
    try:
        yield calls
    finally:
        for predictor in predictors.values():
            del predictor.predict


def random_coalitions(d: int, count: int, seed: int) -> np.ndarray:
    """Distinct coalitions that are neither empty nor full (brute force special-cases those)."""
    rng = np.random.default_rng(seed)
    bits = rng.choice(np.arange(1, 2**d - 1), size=count, replace=False)
    return ((bits[:, None] >> np.arange(d)) & 1).astype(bool)


def coalition_budget(cell: Cell, low: int, high: int) -> int:
    """How many coalitions to time so that about BRUTE_ROW_BUDGET model rows are spent."""
    per_coalition = 2 * cell.n * cell.m
    return int(np.clip(BRUTE_ROW_BUDGET // per_coalition, low, high))


# --- workload ----------------------------------------------------------------------------------


def make_data(d: int, seed: int = SEED) -> tuple[pd.DataFrame, np.ndarray]:
    """Training, calibration-pool and patient rows; noise grows with x0, x5 and x6."""
    rows = TRAINING_ROWS + CALIBRATION_POOL + PATIENT_POOL
    rng = np.random.default_rng((seed, d))
    x = rng.normal(size=(rows, d))
    x[:, 3] = (x[:, 3] > 0.3).astype(float)
    signal = 2 * x[:, 0] + np.sin(2 * x[:, 1]) + x[:, 2] * x[:, 3] + 0.3 * x[:, 4:].sum(axis=1)
    scale = 0.2 + 0.8 * np.abs(x[:, 0]) + 0.6 * (x[:, 5] > 0) + 0.3 * x[:, 6] ** 2
    y = signal + scale * rng.normal(size=rows)
    return pd.DataFrame(x, columns=[f"x{j}" for j in range(d)]), y


@dataclass
class Workload:
    fitted: FittedSystem
    table: pd.DataFrame
    y: np.ndarray
    patients: np.ndarray

    def system(self, n: int) -> ConformalSystem:
        start = TRAINING_ROWS
        return self.fitted.conformalize(self.table.iloc[start:start + n], self.y[start:start + n])


def build_workload(d: int) -> Workload:
    table, y = make_data(d)
    fitted = fit_system(table.iloc[:TRAINING_ROWS], y[:TRAINING_ROWS], family=FAMILY,
                        model=MODEL, seed=SEED)
    patients = fitted.encode(table.iloc[TRAINING_ROWS + CALIBRATION_POOL:])
    return Workload(fitted, table, y, patients)


def fresh_explainer(system: ConformalSystem, m: int) -> Explainer:
    """A cold explainer: memory-only cache, so neither the disk nor an earlier run helps."""
    return Explainer(system, background_size=m, seed=SEED, cache=GameCache(None))


def warm_up() -> float:
    """Compile (or load from numba's disk cache) every kernel once, on a tiny system."""
    table, y = make_data(8)
    small = fit_system(table.iloc[:300], y[:300], family=FAMILY, model=MODEL, seed=SEED)
    system = small.conformalize(table.iloc[300:400], y[300:400])
    start = time.perf_counter()
    explainer = fresh_explainer(system, 20)
    explainer.explain_rows(system.fitted.encode(table.iloc[400:403]), method=METHOD, alpha=ALPHA)
    return time.perf_counter() - start


# --- per-cell measurements ---------------------------------------------------------------------


def measure_cold(system: ConformalSystem, m: int, repeats: int) -> ColdCalibration:
    cold = ColdCalibration([], [])
    for _ in range(repeats):
        explainer = fresh_explainer(system, m)
        release_free_memory()
        wall, cpu, _ = timed_cpu(explainer.calibration_game, METHOD)
        cold.seconds.append(wall)
        cold.cpu_seconds.append(cpu)
    return cold


def measure_cohort(system: ConformalSystem, cell: Cell,
                   patients: np.ndarray) -> tuple[Cohort, list[Memory]]:
    """A cold explainer: the calibration game, then the whole cohort in chunks."""
    explainer = fresh_explainer(system, cell.m)
    with PeakMemory("calibration game (cold)") as calibration_memory:
        calibration_s, _ = timed(explainer.calibration_game, METHOD)
    marks: list[tuple[float, int]] = []

    def progress(done: int, _total: int) -> None:
        marks.append((time.perf_counter(), done))

    rows = patients[:cell.cohort_patients]
    with PeakMemory(f"cohort of {len(rows):,}") as cohort_memory:
        start = time.perf_counter()
        explain_s, explain_cpu_s, _ = timed_cpu(explainer.explain_rows, rows, method=METHOD,
                                                 alpha=ALPHA, progress=progress)
    rates, last_time, last_done = [], start, 0
    for moment, done in marks:
        rates.append((done - last_done) / (moment - last_time))
        last_time, last_done = moment, done
    cohort = Cohort(len(rows), calibration_s, explain_s, explain_cpu_s, rates)
    assert calibration_memory.result and cohort_memory.result
    return cohort, [calibration_memory.result, cohort_memory.result]


def measure_latency(explainer: Explainer, patients: np.ndarray, calls: int,
                    diagnostic_calls: int) -> Latency:
    """Interleaved single-patient calls, so the variants see the same machine load.

    Every call times explain_rows and the instance game; every (calls / diagnostic_calls)-th
    call also times explain_chunk.
    """
    games = explainer.patient_games(METHOD, ALPHA)
    for i in range(5):  # warm caches (q-hat, design, first-call paths)
        explainer.explain_rows(patients[i:i + 1], method=METHOD, alpha=ALPHA)
    latency = Latency([], [], [], [])
    every = max(1, calls // diagnostic_calls)
    for i in range(calls):
        row = patients[i:i + 1]
        wall, cpu, _ = timed_cpu(explainer.explain_rows, row, method=METHOD, alpha=ALPHA)
        latency.explain_rows.append(wall)
        latency.explain_rows_cpu.append(cpu)
        latency.instance_game.append(timed(instance_values, games.family, games.evaluator, row,
                                           games.design.coalitions)[0])
        if i % every == 0:
            latency.explain_chunk.append(timed(games.explain_chunk, row)[0])
    return latency


def measure_alpha_change(explainer: Explainer, system: ConformalSystem,
                         repeats: int) -> AlphaChange:
    game = explainer.calibration_game(METHOD)
    explainer.masking_check(METHOD)  # once per design, before any alpha: not an alpha's cost
    before = explainer.evaluator.model_rows
    values_s, games_s = [], []
    with counting_predictions(system) as calls:
        for i in range(repeats):
            alpha = NEW_ALPHAS[i % len(NEW_ALPHAS)]
            values_s.append(timed(game.values, alpha)[0])
            games_s.append(timed(explainer.patient_games, METHOD, alpha)[0])
    change = AlphaChange(values_s, games_s, explainer.evaluator.model_rows - before, calls[0])
    if not change.no_model_call:
        raise RuntimeError(f"an alpha change called the models: {change}")
    return change


def hybrid_batch(rows: np.ndarray, background: np.ndarray, coalition: np.ndarray,
                 size: int) -> np.ndarray:
    """`size` hybrid rows (rows' values on the coalition, background values elsewhere)."""
    pairs = -(-size // len(background))
    picked = rows[np.arange(pairs) % len(rows)]
    hybrids = np.where(coalition[None, None, :], picked[:, None, :], background[None, :, :])
    return hybrids.reshape(-1, rows.shape[1])[:size]


def predict_seconds_per_row(system: ConformalSystem, batch: np.ndarray) -> float:
    """The components' own predict time per (component, row), on one batch."""
    names = system.family.components
    start = time.perf_counter()
    for name in names:
        system.fitted.components[name].predictor.predict(batch)
    return (time.perf_counter() - start) / (len(batch) * len(names))


def measure_brute(system: ConformalSystem, explainer: Explainer, cell: Cell,
                  repeats: int) -> BruteComparison:
    """Tables vs brute force on the calibration rows; brute force vs the model's own predict."""
    names = system.family.components
    rows = system.calibration_rows
    coalitions = random_coalitions(cell.d, coalition_budget(cell, 2, 8), seed=SEED)
    brute = MaskedEvaluator(system.fitted.components, explainer.background, path="brute")
    batch = hybrid_batch(rows, explainer.background, coalitions[0],
                         min(ROWS_PER_CALL, cell.n * cell.m))
    brute_s, hybrid_rows, predict_row_s, max_diff = [], [], [], 0.0
    for coalition in coalitions:
        before = brute.model_rows
        seconds, got = timed(brute.evaluate, coalition[None], rows, names)
        brute_s.append(seconds)
        hybrid_rows.append(brute.model_rows - before)
        predict_row_s.append(predict_seconds_per_row(system, batch))
        want = explainer.evaluator.evaluate(coalition[None], rows, names)
        max_diff = max(max_diff, *(float(np.abs(got[k] - want[k]).max()) for k in names))
    coalitions_all = explainer.design(METHOD).coalitions
    tables_s = []
    for _ in range(repeats):
        tables = MaskedEvaluator(system.fitted.components, explainer.background, path="tables")
        release_free_memory()
        tables_s.append(timed(tables.evaluate, coalitions_all, rows, names)[0])
    return BruteComparison(len(coalitions), brute_s, hybrid_rows, predict_row_s, tables_s,
                           len(coalitions_all), max_diff)


def naive_width_function(system: ConformalSystem, background: np.ndarray,
                         patient: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """What a user would write: the patient's interval width with only coalition S known.

    For each coalition, mask f and sigma on all n calibration rows and sigma on the patient by
    brute force (one predict call per component, mean over the background, sigma floored after
    the mean), recompute the conformal quantile, and return 2 q_S sigma_S(patient).
    """
    f, sigma = system.fitted.components["f"], system.fitted.components["sigma"]
    rows, targets = system.calibration_rows, system.calibration_targets
    k = conformal_rank(len(rows), ALPHA)
    m, d = background.shape

    def masked(component: Any, x: np.ndarray, keep: np.ndarray) -> np.ndarray:
        hybrids = np.where(keep[None, None, :], x[:, None, :], background[None, :, :])
        raw = np.asarray(component.predictor.predict(hybrids.reshape(-1, d)), dtype=float)
        return component.finish(raw.reshape(len(x), m).mean(axis=1))

    def width(masks: np.ndarray) -> np.ndarray:
        out = np.empty(len(masks))
        for i, mask in enumerate(np.asarray(masks) > 0.5):
            scores = np.abs(targets - masked(f, rows, mask)) / masked(sigma, rows, mask)
            q = np.sort(scores)[k - 1]
            out[i] = 2.0 * q * masked(sigma, patient[None, :], mask)[0]
        return out

    return width


def our_widths(explainer: Explainer, patient: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """exp(v_C(S) + v_I(S)): the same widths from the library's cached games."""
    games = explainer.patient_games(METHOD, ALPHA)
    index = [games.design.index_of(mask) for mask in masks]
    v_i = instance_values(games.family, games.evaluator, patient[None, :], masks)[0]
    return np.exp(games.calibration_values[index] + v_i)


def run_shap(width: Callable[[np.ndarray], np.ndarray], d: int) -> float:
    """shap's KernelExplainer over all 2^d coalitions of one patient, end to end."""
    explainer = shap.KernelExplainer(width, np.zeros((1, d)))
    start = time.perf_counter()
    explainer.shap_values(np.ones((1, d)), nsamples=2**d, l1_reg=False, silent=True)
    return time.perf_counter() - start


def measure_naive(system: ConformalSystem, explainer: Explainer, cell: Cell,
                  patient: np.ndarray) -> Naive:
    width = naive_width_function(system, explainer.background, patient)
    masks = random_coalitions(cell.d, coalition_budget(cell, 1, 4), seed=SEED + 1)
    seconds, widths = [], []
    for mask in masks:
        t, value = timed(width, mask[None].astype(float))
        seconds.append(t)
        widths.append(value[0])
    ours = our_widths(explainer, patient, masks)
    rel = float(np.max(np.abs(np.array(widths) - ours) / np.abs(ours)))
    naive = Naive(seconds, 2**cell.d, None, rel)
    limit = (SHAP_TARGET_RUN_LIMIT_S if (cell.d, cell.n, cell.m) in
             {(c.d, c.n, c.m) for c in NAIVE_TARGETS} else SHAP_FULL_RUN_LIMIT_S)
    if naive.extrapolated_s < limit:
        naive.shap_full_s = run_shap(width, cell.d)
    return naive


def measure_cell(workload: Workload, cell: Cell, plan: Plan) -> CellResult:
    system = workload.system(cell.n)
    patients = workload.patients
    repeats = cell.cold_repeats or plan.cold_repeats
    log(f"[{cell.label}] cold calibration game x{repeats}")
    cold = measure_cold(system, cell.m, repeats)
    log(f"[{cell.label}] cohort of {cell.cohort_patients:,} from cold")
    cohort, memory = measure_cohort(system, cell, patients)
    explainer = fresh_explainer(system, cell.m)
    explainer.calibration_game(METHOD)
    log(f"[{cell.label}] {plan.latency_calls} single-patient calls")
    latency = measure_latency(explainer, patients, plan.latency_calls, plan.diagnostic_calls)
    alpha = measure_alpha_change(explainer, system, plan.alpha_repeats)
    log(f"[{cell.label}] tables vs brute force")
    brute = measure_brute(system, explainer, cell, plan.tables_repeats)
    log(f"[{cell.label}] naive width function + shap")
    naive = measure_naive(system, explainer, cell, patients[0])
    return CellResult(cell, cold, latency, alpha, cohort, memory, brute, naive)


# --- where a single-patient call spends its time -----------------------------------------------


def short_name(key: tuple[str, int, str]) -> str:
    path, line, name = key
    if path == "~":
        return name
    parts = Path(path).parts
    anchor = next((i for i, p in enumerate(parts) if p in {"core", "sklearn", "numpy"}), None)
    where = "/".join(parts[anchor:]) if anchor is not None else Path(path).name
    return f"{where}:{line}({name})"


def top_functions(profiler: cProfile.Profile, patients: int, count: int) -> list[ProfileRow]:
    """The functions with the most own time, per patient."""
    entries = pstats.Stats(profiler, stream=io.StringIO()).stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in entries.values())
    top = sorted(entries.items(), key=lambda kv: kv[1][2], reverse=True)[:count]
    return [(short_name(key), v[1], v[2] / patients * 1e3, v[2] / total)
            for key, v in top]


def profile_patient(workload: Workload, cell: Cell, calls: int) -> Profile:
    system = workload.system(cell.n)
    explainer = fresh_explainer(system, cell.m)
    explainer.calibration_game(METHOD)
    rows = workload.patients
    for i in range(5):
        explainer.explain_rows(rows[i:i + 1], method=METHOD, alpha=ALPHA)
    with counting_predictions(system) as predicts:
        profiler = cProfile.Profile()
        profiler.enable()
        for i in range(calls):
            explainer.explain_rows(rows[i:i + 1], method=METHOD, alpha=ALPHA)
        profiler.disable()
    single = top_functions(profiler, calls, 8)
    games = explainer.patient_games(METHOD, ALPHA)
    chunk = rows[:max(1, CELLS_PER_CHUNK // len(games.design.coalitions))]  # as explain_rows
    profiler = cProfile.Profile()
    profiler.enable()
    games.explain_chunk(chunk)
    profiler.disable()
    chunk_table = top_functions(profiler, len(chunk), 6)
    predictor = system.fitted.components["f"].predictor
    plain = getattr(explainer.evaluator, "plain", None)
    default, one, by_tables = [], [], []
    controller = ThreadpoolController()
    for i in range(100):
        row = rows[i:i + 1]
        default.append(timed(predictor.predict, row)[0])
        with controller.limit(limits=1, user_api="openmp"):
            one.append(timed(predictor.predict, row)[0])
        if plain is not None:
            by_tables.append(timed(plain, "f", row)[0])
    return Profile(cell, calls, single, len(chunk), chunk_table,
                   float(np.median(default)) * 1e3, float(np.median(one)) * 1e3,
                   float(np.median(by_tables)) * 1e3 if by_tables else None,
                   predicts[0] / calls)


# --- machine and report ------------------------------------------------------------------------


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def ram_gib() -> float:
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    return float("nan")


def versions() -> dict[str, str]:
    return library_versions((*REPORTED, "numba", "shap", "threadpoolctl"))


def git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "core"], cwd=ROOT, check=True,
                               capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + (" (core/ has uncommitted changes)" if dirty else "")


def core_fingerprint() -> dict[str, bytes]:
    """A digest of every core source file this process imported."""
    found = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and Path(path).resolve().is_relative_to(ROOT / "core"):
            with contextlib.suppress(OSError):
                found[str(Path(path).resolve().relative_to(ROOT))] = hashlib.blake2b(
                    Path(path).read_bytes(), digest_size=16).digest()
    return found


def core_change(before: dict[str, bytes]) -> str:
    """Which imported core files were edited while the benchmark ran (empty when none)."""
    after = core_fingerprint()
    changed = sorted(name for name in before if after.get(name) != before[name])
    if not changed:
        return ""
    return (f"{', '.join(changed)} changed on disk while this ran; the figures are those of "
            "the code imported at the start")


def describe_machine() -> Machine:
    return Machine(
        cores=len(os.sched_getaffinity(0)), cpu=cpu_model(), ram_gib=ram_gib(),
        python=platform.python_version(), versions=versions(),
        omp_wait_policy=os.environ.get("OMP_WAIT_POLICY", "unset"),
        numba_layer="?", numba_threads=numba.get_num_threads(), load_before=os.getloadavg(),
        commit=git_commit(),
    )


def sec(seconds: float) -> str:
    return f"{seconds:.2f}" if seconds < 100 else f"{seconds:,.0f}"


def times(ratio: float) -> str:
    if ratio >= 1e4:
        mantissa, exponent = f"{ratio:.1e}".split("e")
        return f"{mantissa}×10^{int(exponent)}"
    return f"{ratio:,.1f}×" if ratio < 100 else f"{ratio:,.0f}×"


def row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def header(*names: str) -> list[str]:
    return [row(*names), row(*("---" for _ in names))]


def render_machine(report: Report) -> list[str]:
    m = report.machine
    lines = [
        "# cpdecomp speed benchmark", "",
        f"Generated by `{report.command}` on {report.started} "
        f"({report.elapsed_s / 60:.1f} min). Commit {m.commit}.", "",
        *([f"**Warning:** {m.core_changed}.", ""] if m.core_changed else []),
        "## Machine and settings", "",
        f"* {m.cores} cores ({m.cpu}), {m.ram_gib:.1f} GiB RAM, Python {m.python}.",
        "* " + ", ".join(f"{k} {v}" for k, v in m.versions.items()) + ".",
        f"* OMP_WAIT_POLICY={m.omp_wait_policy}; numba threading layer {m.numba_layer}, "
        f"{m.numba_threads} threads.",
        f"* Load average (1/5/15 min) {'/'.join(f'{x:.1f}' for x in m.load_before)} at the "
        f"start, {'/'.join(f'{x:.1f}' for x in m.load_after)} at the end: the machine is "
        "shared, so compare within a row and read ratios, not single numbers (±30 %).",
        f"* numba kernels compile (or load from numba's disk cache) on first call: a warm-up on "
        f"a tiny system took {m.warmup_s:.1f} s and is excluded from every figure.",
        "",
        "## Workload", "",
        f"Seeded synthetic data: x ~ N(0, 1) in d columns (x3 binary), y = 2 x0 + sin 2x1 + "
        f"x2 x3 + 0.3 Σ x4.. + (0.2 + 0.8|x0| + 0.6·1[x5 > 0] + 0.3 x6²)·ε. "
        f"{TRAINING_ROWS:,} training rows; model `{MODEL}` (100 trees × 31 leaves) for f and "
        f"sigma; family `{FAMILY}`; alpha {ALPHA}; method `{METHOD}` (all 2^d coalitions). "
        f"n calibration rows, m background rows (a seeded subsample of the training rows), "
        f"patients from a separate pool of {PATIENT_POOL:,}. Cold = a fresh `Explainer` with "
        "`GameCache(None)` (no disk, no earlier game); tree tables are built inside the timing.",
        "",
    ]
    return lines


def render_games(report: Report) -> list[str]:
    plan = report.plan
    lines = [
        "## Calibration game, cohort and memory", "",
        f"Calibration cold: median of {plan.cold_repeats} fresh explainers. Cohort: one cold "
        "explainer computes the calibration game, then `explain_rows` runs every patient in "
        "chunks of 2^20 cells (256 patients at d = 12); patients/s is over the whole run "
        "(median chunk rate in brackets); "
        "the 10k total is the cold game plus 10,000 patients (~ marks an extrapolation from "
        "fewer patients). CPU = process CPU time over all threads: on an idle machine with "
        f"{report.machine.cores} cores the wall time cannot drop much below CPU / "
        f"{report.machine.cores}: where even that misses a target, the machine's load is not "
        "the reason. Peak memory: RSS above the operation's baseline, the larger of a "
        "2 ms sampler and the kernel's high-water mark.", "",
        *header("d", "n", "m", "calibration cold (s)", "its CPU (s)", "cohort patients",
                "cohort wall / CPU (s)", "patients/s", "10k incl. calibration (s)",
                "peak MiB: calibration", "peak MiB: cohort"),
    ]
    for r in report.results:
        c = r.cohort
        exact = c.patients >= PATIENT_POOL
        cal_mem, cohort_mem = r.memory
        lines.append(row(
            r.cell.d, r.cell.n, r.cell.m, sec(r.cold.median), sec(r.cold.cpu_median),
            f"{c.patients:,}", f"{sec(c.explain_s)} / {sec(c.explain_cpu_s)}",
            f"{c.per_second:,.0f} ({np.median(c.chunk_rates):,.0f})",
            ("" if exact else "~") + sec(c.total_10k_s),
            f"{cal_mem.peak_mib:,.0f}", f"{cohort_mem.peak_mib:,.0f}",
        ))
    return [*lines, ""]


def render_latency(report: Report) -> list[str]:
    lines = [
        "## One patient, calibration game cached; alpha change", "",
        f"{report.plan.latency_calls} single-patient calls per cell of "
        "`explain_rows(one_row)` (the user's call: games, Shapley, interval, prediction), each "
        "followed by the instance game alone (`core.games.instance_values`); on "
        f"{report.plan.diagnostic_calls} of them, interleaved, also "
        "`patient_games(...).explain_chunk` (the same without the per-call setup). CPU = "
        "process CPU time of the call over all threads. Alpha change: "
        "`game.values(new_alpha)` and a full `patient_games(alpha=new)` on the cached game, with "
        "`evaluator.model_rows` and a counter on every model's predict checked to stay at 0.", "",
        *header("d", "n", "m", "explain_rows p50 (ms)", "p99 (ms)", "its CPU p50 (ms)",
                "explain_chunk p50",
                "instance game p50", "α: values (ms)",
                "α: patient_games (ms)", "α: model calls"),
    ]
    for r in report.results:
        lat, a = r.latency, r.alpha
        lines.append(row(
            r.cell.d, r.cell.n, r.cell.m, f"{Latency.ms(lat.explain_rows, 50):.2f}",
            f"{Latency.ms(lat.explain_rows, 99):.2f}",
            f"{Latency.ms(lat.explain_rows_cpu, 50):.2f}",
            f"{Latency.ms(lat.explain_chunk, 50):.2f}",
            f"{Latency.ms(lat.instance_game, 50):.2f}",
            f"{np.median(a.values_s) * 1e3:.3f}", f"{np.median(a.patient_games_s) * 1e3:.3f}",
            "0 ✓" if a.no_model_call else f"{a.predict_calls} ✗",
        ))
    return [*lines, ""]


def render_brute(report: Report) -> list[str]:
    lines = [
        "## Tree tables vs brute force (calibration rows, all components)", "",
        "Brute force = `MaskedEvaluator(..., path=\"brute\").evaluate` on a few random "
        "coalitions × the n calibration rows (one call per coalition; the median per coalition "
        "× (2^d − 2) extrapolates to the lattice, whose empty and full coalitions cost nothing). "
        "Tables = a fresh `MaskedEvaluator(..., path=\"tables\")` over all 2^d coalitions, "
        "table build included (median of repeats). Agreement: max |brute − tables| on the timed "
        "coalitions. Fallback efficiency: brute force's time per hybrid row against the models' "
        "own `predict` per row on a batch as large as brute force's calls, interleaved.", "",
        *header("d", "n", "m", "coalitions timed", "brute s/coalition", "brute 2^d (s, extrap.)",
                "tables 2^d (s)", "tables speed-up", "max abs diff", "brute µs/row",
                "predict µs/row", "brute / predict"),
    ]
    for r in report.results:
        b = r.brute
        lines.append(row(
            r.cell.d, r.cell.n, r.cell.m, b.coalitions_timed, sec(float(np.median(b.brute_s))),
            sec(b.brute_full_s), sec(float(np.median(b.tables_full_s))), times(b.ratio),
            f"{b.max_abs_diff:.1e}", f"{b.brute_row_s * 1e6:.2f}",
            f"{np.median(b.predict_row_s) * 1e6:.2f}", f"{b.efficiency:.2f}×",
        ))
    return [*lines, ""]


def render_naive(report: Report) -> list[str]:
    lines = [
        "## Ours vs the naive approach", "",
        "Naive = what a user would write: a width function for ONE patient that, for each "
        "coalition S, masks f and sigma on all n calibration rows and sigma on the patient by "
        "brute force (mean over the background), recomputes the conformal quantile and returns "
        "2 q_S σ_S(x), handed to `shap.KernelExplainer(f_of_mask, np.zeros((1, d)))` with "
        "`l1_reg=False, nsamples=2^d` (2^d width evaluations per patient). Timed on a few "
        "coalitions, extrapolated × 2^d; where that is under "
        f"{SHAP_FULL_RUN_LIMIT_S:.0f} s ({SHAP_TARGET_RUN_LIMIT_S:.0f} s at the issue's two target "
        "configurations), shap also ran end to end and its time is used. "
        "Ours = `explain_rows(one_row)` p50 with the calibration game cached. "
        "Agreement: max relative difference between the naive widths and exp(v_C + v_I) from "
        "the library on the timed coalitions.", "",
        *header("d", "n", "m", "coalitions timed", "naive s/coalition", "naive per patient (s)",
                "shap end to end (s)",
                "ours per patient (ms)", "naive / ours", "target", "width rel. diff"),
    ]
    for r in report.results:
        nv = r.naive
        ratio = nv.per_patient_s / r.ours_patient_s
        target = NAIVE_TARGETS.get(Cell(r.cell.d, r.cell.n, r.cell.m))
        lines.append(row(
            r.cell.d, r.cell.n, r.cell.m, len(nv.coalition_s),
            sec(float(np.median(nv.coalition_s))),
            sec(nv.extrapolated_s), "—" if nv.shap_full_s is None else sec(nv.shap_full_s),
            f"{r.ours_patient_s * 1e3:.2f}", times(ratio),
            "—" if target is None else f"≥ {times(target)} {'✓' if ratio >= target else '✗'}",
            f"{nv.max_rel_diff:.1e}",
        ))
    return [*lines, ""]


def render_profile(report: Report) -> list[str]:
    p = report.profile
    if p is None:
        return []
    lines = [
        f"## Where a single-patient call spends its time ({p.cell.label})", "",
        f"cProfile over {p.calls} `explain_rows(one_row)` calls, top functions by own time "
        f"(per patient). The fitted models' own predict ran {p.predicts_per_patient:.1f} times "
        "per patient. For scale, one row of f: scikit-learn's predict takes "
        f"{p.predict_default_ms:.2f} ms with the default OpenMP threads and "
        f"{p.predict_one_thread_ms:.2f} ms with OpenMP limited to one thread (histogram "
        "gradient boosting opens one OpenMP parallel region per tree, and with passive waiting "
        "each one wakes the sleeping workers)"
        + ("." if p.plain_ms is None else
           f"; the evaluator's plain prediction from the tree tables takes {p.plain_ms:.3f} ms."),
        "",
        *header("function", "calls/patient", "ms/patient", "share"),
    ]
    for name, calls, per_patient, share in p.rows:
        lines.append(row(f"`{name}`", f"{calls / p.calls:g}", f"{per_patient:.3f}",
                         f"{share:.0%}"))
    lines += [
        "", f"The same for one cohort chunk (`explain_chunk` of {p.chunk_patients:,} patients, "
        "time per patient):", "",
        *header("function", "calls/chunk", "ms/patient", "share"),
    ]
    for name, calls, per_patient, share in p.chunk_rows:
        lines.append(row(f"`{name}`", calls, f"{per_patient:.3f}", f"{share:.0%}"))
    return [*lines, ""]


@dataclass
class Target:
    what: str
    target: str
    measured: str
    met: bool | None


def worst(results: list[CellResult], keep: Callable[[Cell], bool],
          value: Callable[[CellResult], float], highest: bool = True) -> tuple[float, Cell] | None:
    chosen = [(value(r), r.cell) for r in results if keep(r.cell)]
    if not chosen:
        return None
    return (max if highest else min)(chosen, key=lambda vc: vc[0])


def targets(report: Report) -> list[Target]:
    results = report.results
    found: list[Target] = []

    def add(what: str, target: str, limit: float, keep: Callable[[Cell], bool],
            value: Callable[[CellResult], float], unit: Callable[[float], str],
            highest: bool = True) -> None:
        hit = worst(results, keep, value, highest)
        if hit is None:
            found.append(Target(what, target, "not in this grid", None))
            return
        measured, cell = hit
        met = measured <= limit if highest else measured >= limit
        found.append(Target(what, target, f"{unit(measured)} (worst: {cell.label})", met))

    p50 = lambda r: Latency.ms(r.latency.explain_rows, 50)  # noqa: E731
    p99 = lambda r: Latency.ms(r.latency.explain_rows, 99)  # noqa: E731
    in_ms = lambda v: f"{v:.2f} ms"  # noqa: E731
    add("per patient p50, d ≤ 12", "≤ 1 ms", 1.0, lambda c: c.d <= 12, p50, in_ms)
    add("per patient p99, d ≤ 12", "≤ 10 ms", 10.0, lambda c: c.d <= 12, p99, in_ms)
    add("per patient p50, d = 16", "≤ 5 ms", 5.0, lambda c: c.d == 16, p50, in_ms)
    add("calibration game cold, d = 12, n = 1000, m ≤ 2000", "≤ 1 s", 1.0,
        lambda c: c.d == 12 and c.n == 1000 and c.m <= 2000, lambda r: r.cold.median,
        lambda v: f"{v:.2f} s")
    cores = report.machine.cores
    add(f"calibration game cold, same cells, CPU time / {cores} cores (≈ the best an idle "
        "machine could do)", "≤ 1 s", 1.0,
        lambda c: c.d == 12 and c.n == 1000 and c.m <= 2000,
        lambda r: r.cold.cpu_median / cores, lambda v: f"{v:.2f} s")
    add("α change (full patient_games at a new α)", "≤ 0.2 s", 0.2, lambda c: True,
        lambda r: float(np.median(r.alpha.patient_games_s)), lambda v: f"{v * 1e3:.2f} ms")
    found.append(Target("α change calls no model", "0 model rows, 0 predict calls",
                        "0 in every cell" if all(r.alpha.no_model_call for r in results)
                        else "model called", all(r.alpha.no_model_call for r in results)))
    add("cohort throughput, d = 12", "≥ 5,000 patients/s", 5000.0, lambda c: c.d == 12,
        lambda r: r.cohort.per_second, lambda v: f"{v:,.0f} patients/s", highest=False)
    add("10,000 patients incl. the cold calibration game, d = 12, n = 1000", "≤ 3 s", 3.0,
        lambda c: c.d == 12 and c.n == 1000, lambda r: r.cohort.total_10k_s,
        lambda v: f"{v:.1f} s")
    add("extra memory, d = 12, n = 1000 (largest operation)", "≤ +150 MiB", 150.0,
        lambda c: c.d == 12 and c.n == 1000, lambda r: r.largest_memory.peak_mib,
        lambda v: f"+{v:,.0f} MiB")
    pooled = float(np.median([x for r in results for x in r.brute.paired_ratios]))
    spread = worst(results, lambda c: True, lambda r: r.brute.efficiency)
    found.append(Target(
        "brute-force fallback per hybrid row vs the model's predict", "≤ 1.1×",
        f"{pooled:.2f}× (median of all interleaved pairs; cells "
        f"{min(r.brute.efficiency for r in results):.2f}–{spread[0]:.2f}×)" if spread else "—",
        pooled <= 1.1))
    add("tables = brute force on the timed coalitions", f"≤ {AGREEMENT:g}", AGREEMENT,
        lambda c: True, lambda r: r.brute.max_abs_diff, lambda v: f"{v:.1e}")
    if report.user_models:
        slowest = max(report.user_models, key=lambda r: r["patient"])
        found.append(Target("models you bring: per patient, d ≤ 12", "≤ 1 ms",
                            f"{1e3 * slowest['patient']:.2f} ms (worst: {slowest['model']}, "
                            f"d = {slowest['d']})", user_models.fast_enough(report.user_models)))
        closest = min(report.user_models, key=lambda r: r["shap_patient"] / r["patient"])
        found.append(Target("models you bring: ahead of shap's TreeExplainer at every d",
                            "shap / cpdecomp > 1×",
                            f"{closest['shap_patient'] / closest['patient']:.1f}× (closest: "
                            f"{closest['model']}, d = {closest['d']})",
                            user_models.ahead_of_shap(report.user_models)))
    for cell, goal in NAIVE_TARGETS.items():
        add(f"naive / ours per patient, {cell.label}", f"≥ {times(goal)}", goal,
            lambda c, cell=cell: (c.d, c.n, c.m) == (cell.d, cell.n, cell.m),
            lambda r: r.naive.per_patient_s / r.ours_patient_s, times, highest=False)
    return found


def render_user_models(report: Report) -> list[str]:
    if not report.user_models:
        return []
    return ["## Models you bring: XGBoost, LightGBM, a scikit-learn Pipeline", "",
            "The same run, after the grid above (benchmarks/user_models.py measures it on its "
            "own too). " + user_models.WORKLOAD, "", *user_models.table(report.user_models), ""]


def render_targets(report: Report) -> list[str]:
    lines = ["## Targets", "", *header("target", "goal", "measured", "met?")]
    for t in targets(report):
        mark = "—" if t.met is None else ("yes" if t.met else "**no**")
        lines.append(row(t.what, t.target, t.measured, mark))
    return [*lines, ""]


def render(report: Report) -> str:
    parts = [render_machine(report), render_games(report), render_latency(report),
             render_brute(report), render_naive(report), render_profile(report),
             render_user_models(report), render_targets(report)]
    return "\n".join(line for part in parts for line in part)


# --- main --------------------------------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small grid (about 1-2 min)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="markdown file to write")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    plan = quick_plan() if args.quick else full_plan()
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join(["python", *(sys.argv if argv is None else ["benchmarks/speed.py",
                                                                    *argv])])
    clock = time.perf_counter()
    machine = describe_machine()
    fingerprint = core_fingerprint()
    log("warming up numba kernels")
    machine.warmup_s = warm_up()
    machine.numba_layer = numba.threading_layer()
    report = Report(machine, plan, command, started)
    workloads: dict[int, Workload] = {}
    for cell in plan.cells:
        if cell.d not in workloads:
            log(f"fitting f and sigma at d={cell.d}")
            workloads[cell.d] = build_workload(cell.d)
        report.results.append(measure_cell(workloads[cell.d], cell, plan))
    log("profiling single-patient calls")
    report.profile = profile_patient(workloads[plan.profile_cell.d], plan.profile_cell, 100)
    log("models you bring: XGBoost, LightGBM, a Pipeline, against shap's TreeExplainer")
    report.user_models = user_models.measure_all(plan.quick)
    machine.load_after = os.getloadavg()
    machine.core_changed = core_change(fingerprint)
    report.elapsed_s = time.perf_counter() - clock
    publish(render(report), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

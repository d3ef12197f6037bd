"""The speed benchmark's measurements of one cell: the cold calibration game, a cohort, single
patients, an alpha change, tree tables against brute force, and the naive approach with shap.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import shap

from cpdecomp import Explainer
from cpdecomp.core.conformal import conformal_rank
from cpdecomp.core.games import MaskedEvaluator, instance_values
from cpdecomp.core.games.masking import ROWS_PER_CALL
from cpdecomp.core.system import ConformalSystem

from .harness import Memory, PeakMemory, log, percentile, release_free_memory, timed, timed_cpu
from .plan import NAIVE_TARGETS, Cell, Plan
from .workload import ALPHA, METHOD, PATIENT_POOL, SEED, Workload, fresh_explainer

NEW_ALPHAS = (0.05, 0.2, 0.15, 0.25, 0.1)
BRUTE_ROW_BUDGET = 1_000_000
"""Model rows spent per cell on timing brute force (and again on the naive approach)."""
SHAP_FULL_RUN_LIMIT_S = 30.0
"""Run shap's KernelExplainer end to end only where the naive estimate is below this..."""
SHAP_TARGET_RUN_LIMIT_S = 150.0
"""... or, at the issue's target configurations, below this (a busy machine is slower)."""
AGREEMENT = 1e-10


# --- what a cell's measurements hold -----------------------------------------------------------


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
        return percentile(samples, q) * 1e3


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
    """The models' own predict time per row on the same hybrid rows, in calls as large as brute
    force's."""
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


# --- measuring tools ---------------------------------------------------------------------------


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


def predict_seconds_per_row(system: ConformalSystem, batch: np.ndarray,
                            rows_per_call: int | None = None,
                            clock: Callable[[], float] = time.perf_counter) -> float:
    """The components' own predict time per (component, row), on one batch, in calls of
    `rows_per_call` rows (brute force's own call size, so both see the same calls), or in one;
    wall time, or the given clock (e.g. time.process_time)."""
    names = system.family.components
    step = len(batch) if rows_per_call is None else max(1, rows_per_call)
    start = clock()
    for begin in range(0, len(batch), step):
        part = batch[begin:begin + step]
        for name in names:
            system.fitted.components[name].predictor.predict(part)
    return (clock() - start) / (len(batch) * len(names))


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
        predict_row_s.append(predict_seconds_per_row(system, batch,
                                                     brute.pairs_per_call * cell.m))
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

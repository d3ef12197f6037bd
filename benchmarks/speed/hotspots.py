"""Where a single-patient call (and a cohort chunk) spends its time: cProfile's top functions."""

from __future__ import annotations

import cProfile
import io
import pstats
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from threadpoolctl import ThreadpoolController

from cpdecomp.core.explainer import CELLS_PER_CHUNK

from .harness import timed
from .measures import counting_predictions
from .plan import Cell
from .workload import ALPHA, METHOD, Workload, fresh_explainer

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

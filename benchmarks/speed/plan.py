"""The grids the speed benchmark measures: which cells, how many repeats, and the targets."""

from __future__ import annotations

from dataclasses import dataclass

from .workload import PATIENT_POOL


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

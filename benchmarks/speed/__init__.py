"""Speed of cpdecomp's two games against the performance page's targets, and against brute force.

    python benchmarks/speed [--quick] [--out docs/benchmarks/speed.md]

Workload: seeded synthetic data with a heteroscedastic outcome, d features, 3,000 training rows,
gradient boosting (100 trees x 31 leaves) for f and sigma, the normalized family, alpha = 0.1.
Every comparison is made side by side in one process, and every figure is a median over
repeats, because the machine may be shared: read single numbers as +-30 % and ratios as the
result. Prints a markdown report and writes it (with the machine, versions, command and date).

The package, by seam: `harness` (what any benchmark needs: publishing, timing, peak memory,
the machine, percentiles, markdown), `workload` (the data, models and cold explainers), `plan`
(the grids), `measures` (one cell's measurements), `hotspots` (where a call spends its time),
`render` (the report and its targets) and `__main__` (the command line). The names below are
those the other benchmarks import (`from speed import ...`, with benchmarks/ on sys.path).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Imported on first use (PEP 562): `from speed.harness import ...` runs this file first, and the
# browser benchmarks that do so (load.py, dashboard.py) must not pay for the workload's
# scikit-learn, numba and core (about 3 s cold) that they never use.
_PUBLIC = {
    "CALIBRATION_POOL": "workload",
    "SEED": "workload",
    "TRAINING_ROWS": "workload",
    "build_workload": "workload",
    "fresh_explainer": "workload",
    "make_data": "workload",
    "publish": "harness",
}

__all__ = ["CALIBRATION_POOL", "SEED", "TRAINING_ROWS", "build_workload", "fresh_explainer",
           "make_data", "publish"]

if TYPE_CHECKING:
    from .harness import publish
    from .workload import (
        CALIBRATION_POOL,
        SEED,
        TRAINING_ROWS,
        build_workload,
        fresh_explainer,
        make_data,
    )


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
    globals()[name] = value  # once found, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})

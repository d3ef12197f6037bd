"""cpdecomp: why is this conformal interval wide? Calibration-driven and instance-driven parts.

The library's front door: `from cpdecomp import fit_system, Explainer`. Everything importable
lives under this one package: the library in `cpdecomp.core`, the dashboard in `cpdecomp.app`
(`cpdecomp dashboard`), the bundled tables in `cpdecomp.sample_data`.
"""

import importlib
from typing import TYPE_CHECKING

import cpdecomp.core  # noqa: F401  (its process-wide switches come before any library loads)

# The public names are imported on first use (PEP 562): `import cpdecomp`, `cpdecomp --version` and
# the dashboard's first paint do not pay for scikit-learn, numba and SciPy (about 2 s cold)
# until something is computed.
_PUBLIC = {
    "METHODS": "cpdecomp.core.attribution",
    "build_design": "cpdecomp.core.attribution",
    "FAMILIES": "cpdecomp.core.conformal",
    "conformal_rank": "cpdecomp.core.conformal",
    "get_family": "cpdecomp.core.conformal",
    "minimum_calibration_size": "cpdecomp.core.conformal",
    "choose_columns": "cpdecomp.core.data",
    "split_rows": "cpdecomp.core.data",
    "target_values": "cpdecomp.core.data",
    "Decomposition": "cpdecomp.core.decomposition",
    "CpdecompError": "cpdecomp.core.errors",
    "Explainer": "cpdecomp.core.explainer",
    "Explanation": "cpdecomp.core.explainer",
    "Interactions": "cpdecomp.core.interactions",
    "MODELS": "cpdecomp.core.models",
    "MODEL_KINDS": "cpdecomp.core.models",
    "load_model_file": "cpdecomp.core.model_files",
    "system_from_mapie": "cpdecomp.core.mapie",
    "ConformalSystem": "cpdecomp.core.system",
    "FittedSystem": "cpdecomp.core.system",
    "fit_system": "cpdecomp.core.system",
    "system_from_functions": "cpdecomp.core.system",
    "system_from_models": "cpdecomp.core.system",
    "load_table": "cpdecomp.core.tables",
    "Comparison": "cpdecomp.core.recalibration",
    "compare_calibrations": "cpdecomp.core.recalibration",
    "split_calibration": "cpdecomp.core.recalibration",
    "Report": "cpdecomp.core.workflow",
    "Study": "cpdecomp.core.workflow",
    "StudyOptions": "cpdecomp.core.workflow",
    "prepare_study": "cpdecomp.core.workflow",
}

if TYPE_CHECKING:
    from cpdecomp.core.attribution import METHODS, build_design
    from cpdecomp.core.conformal import (
        FAMILIES,
        conformal_rank,
        get_family,
        minimum_calibration_size,
    )
    from cpdecomp.core.data import choose_columns, split_rows, target_values
    from cpdecomp.core.decomposition import Decomposition
    from cpdecomp.core.errors import CpdecompError
    from cpdecomp.core.explainer import Explainer, Explanation
    from cpdecomp.core.interactions import Interactions
    from cpdecomp.core.mapie import system_from_mapie
    from cpdecomp.core.model_files import load_model_file
    from cpdecomp.core.models import MODEL_KINDS, MODELS
    from cpdecomp.core.recalibration import Comparison, compare_calibrations, split_calibration
    from cpdecomp.core.system import (
        ConformalSystem,
        FittedSystem,
        fit_system,
        system_from_functions,
        system_from_models,
    )
    from cpdecomp.core.tables import load_table
    from cpdecomp.core.workflow import Report, Study, StudyOptions, prepare_study


def __getattr__(name: str) -> object:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'cpdecomp' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


__all__ = [
    "FAMILIES",
    "METHODS",
    "MODELS",
    "MODEL_KINDS",
    "Comparison",
    "ConformalSystem",
    "CpdecompError",
    "Decomposition",
    "Explainer",
    "Explanation",
    "FittedSystem",
    "Interactions",
    "Report",
    "Study",
    "StudyOptions",
    "build_design",
    "choose_columns",
    "compare_calibrations",
    "conformal_rank",
    "fit_system",
    "get_family",
    "load_model_file",
    "load_table",
    "minimum_calibration_size",
    "prepare_study",
    "split_calibration",
    "split_rows",
    "system_from_functions",
    "system_from_mapie",
    "system_from_models",
    "target_values",
]

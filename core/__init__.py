"""cpdecomp core: split-conformal families, the two games, and their attributions."""

import importlib
import os
from typing import TYPE_CHECKING

# Gradient boosting's OpenMP threads spin while they wait for work. When other processes share
# the cores (dashboard sessions, a test runner, a nightly batch) the spinning makes a fit 5-20x
# slower; passive waiting costs nothing measurable when the cores are free. Set before
# scikit-learn loads its OpenMP runtime; an explicit setting by the user wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The tree-table kernels are compiled once and cached beside their source; an installed package
# on a read-only filesystem (a hospital container) cannot write there, and numba then refuses to
# compile at all. Point its cache at the temporary directory in that case.
if "NUMBA_CACHE_DIR" not in os.environ and not os.access(
    os.path.join(os.path.dirname(__file__), "games"), os.W_OK
):
    import tempfile

    os.environ["NUMBA_CACHE_DIR"] = os.path.join(tempfile.gettempdir(),
                                                 f"cpdecomp-numba-{os.getuid()}")


# The public names are imported on first use (PEP 562): `import core`, `cpdecomp --version` and
# the dashboard's first paint do not pay for scikit-learn, numba and SciPy (about 2 s cold)
# until something is computed.
_PUBLIC = {
    "METHODS": "core.attribution",
    "build_design": "core.attribution",
    "FAMILIES": "core.conformal",
    "conformal_rank": "core.conformal",
    "get_family": "core.conformal",
    "minimum_calibration_size": "core.conformal",
    "choose_columns": "core.data",
    "split_rows": "core.data",
    "target_values": "core.data",
    "Decomposition": "core.decomposition",
    "CpdecompError": "core.errors",
    "Explainer": "core.explainer",
    "Explanation": "core.explainer",
    "Interactions": "core.interactions",
    "MODELS": "core.models",
    "MODEL_KINDS": "core.models",
    "load_model_file": "core.model_files",
    "system_from_mapie": "core.mapie",
    "ConformalSystem": "core.system",
    "FittedSystem": "core.system",
    "fit_system": "core.system",
    "system_from_functions": "core.system",
    "system_from_models": "core.system",
    "load_table": "core.tables",
    "Report": "core.workflow",
    "Study": "core.workflow",
    "StudyOptions": "core.workflow",
    "prepare_study": "core.workflow",
}

if TYPE_CHECKING:
    from core.attribution import METHODS, build_design
    from core.conformal import FAMILIES, conformal_rank, get_family, minimum_calibration_size
    from core.data import choose_columns, split_rows, target_values
    from core.decomposition import Decomposition
    from core.errors import CpdecompError
    from core.explainer import Explainer, Explanation
    from core.interactions import Interactions
    from core.mapie import system_from_mapie
    from core.model_files import load_model_file
    from core.models import MODEL_KINDS, MODELS
    from core.system import (
        ConformalSystem,
        FittedSystem,
        fit_system,
        system_from_functions,
        system_from_models,
    )
    from core.tables import load_table
    from core.workflow import Report, Study, StudyOptions, prepare_study


def __getattr__(name: str) -> object:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'core' has no attribute {name!r}")
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
    "conformal_rank",
    "fit_system",
    "get_family",
    "load_model_file",
    "load_table",
    "minimum_calibration_size",
    "prepare_study",
    "split_rows",
    "system_from_functions",
    "system_from_mapie",
    "system_from_models",
    "target_values",
]

"""Optional dependencies, imported on first use, and the one message when one is missing.

The base install (`pip install cpdecomp`) runs the batch engine; shap, Dask, the dashboard and
the PostgreSQL store come with extras (pyproject.toml). Every lazy import of an extra goes
through `require`, so a missing one is a bad-input error (exit 2 on the command line, an error
box in the dashboard) in one line that names the extra to install, instead of an internal
ModuleNotFoundError.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from cpdecomp.core.errors import CpdecompError

EXTRAS = {
    "shap": ("shap", "shap"),
    "dask.distributed": ("dask[distributed]", "cluster"),
    "psycopg": ("psycopg", "postgres"),
    "streamlit": ("streamlit", "app"),
    "plotly": ("plotly", "app"),
    "xgboost": ("xgboost-cpu", "models"),
    "lightgbm": ("lightgbm", "models"),
    "skops.io": ("skops", "models"),
}
"""Module -> (the distribution that provides it, the cpdecomp extra that installs it)."""


class MissingExtra(CpdecompError):
    """An optional dependency is not installed; the message names the extra."""

    reason = "missing_extra"


def install_hint(module: str) -> str:
    """`pip install 'cpdecomp[extra]'` for a module of an extra."""
    return f"pip install 'cpdecomp[{EXTRAS[module][1]}]'"


def require(module: str, purpose: str) -> ModuleType:
    """Import `module` (a key of EXTRAS) for `purpose`, or say which extra installs it.

    `purpose` names what needs it, as the user asked for it: "--method shap-kernel".
    """
    distribution, _ = EXTRAS[module]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module == missing or module.startswith(f"{missing}."):
            raise MissingExtra(
                f"{purpose} needs {distribution}: {install_hint(module)}") from None
        # The package is there but something it imports is not: a broken install.
        raise MissingExtra(
            f"{purpose} needs {distribution}, which is installed but cannot be imported "
            f"(it needs the module {missing!r}); reinstall it: {install_hint(module)}"
        ) from None

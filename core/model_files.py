"""Reading a user's fitted model from a file, never by unpickling it.

Accepted: skops (`.skops`: scikit-learn estimators and Pipelines, and boosters' scikit-learn
wrappers), XGBoost's own model files (`.json`, `.ubj`) and LightGBM's text model (`.txt`).
A skops file is loaded with an explicit allow-list: skops' own default trust (scikit-learn,
numpy, scipy) plus the few types below; any other type in the file is refused by name, and
nothing is loaded with `trusted=True`. Pickle files (`.pkl`, `.pickle`, `.joblib`) are refused:
unpickling runs code from the file. Files are capped in size like tables, checked before they
are read. The boosters' and skops' libraries are imported only when such a file is read.

    model = load_model_file("hospital_model.skops")
    fitted = system_from_models("normalized", {"f": model}, train, target="y")
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.optional import require
from cpdecomp.core.tables import MAX_FILE_BYTES

MAX_MODEL_BYTES = MAX_FILE_BYTES
"""A model file larger than this is refused before it is read (the table files' cap)."""

TRUSTED_SKOPS_TYPES = frozenset({
    # plain data: a dtype record and an ordered dict
    "numpy.dtype",
    "collections.OrderedDict",
    # scikit-learn's fitted trees, stored as arrays
    "sklearn.tree._tree.Tree",
    "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
    # boosters' scikit-learn wrappers: their state is the booster's own model format
    "xgboost.core.Booster",
    "xgboost.sklearn.XGBRegressor",
    "lightgbm.basic.Booster",
    "lightgbm.sklearn.LGBMRegressor",
})
"""Types trusted beyond skops' defaults: data records, fitted tree arrays, and boosters whose
state is their own model file format, not code."""

PICKLE_SUFFIXES = {".pkl", ".pickle", ".joblib"}


def _skops(data: bytes, name: str) -> Any:
    skops_io = require("skops.io", "a .skops model file")
    try:
        untrusted = skops_io.get_untrusted_types(data=data)
    except Exception as exc:
        raise CpdecompError(f"{name} is not a skops file ({type(exc).__name__})") from None
    refused = sorted(set(untrusted) - TRUSTED_SKOPS_TYPES)
    if refused:
        raise CpdecompError(
            f"{name} holds types that are not on the trusted list: {', '.join(refused)}; "
            "cpdecomp loads scikit-learn, numpy, XGBoost and LightGBM types only"
        )
    try:
        return skops_io.loads(data, trusted=sorted(untrusted))
    except Exception as exc:
        raise CpdecompError(f"{name} could not be loaded ({type(exc).__name__})") from None


def _xgboost(data: bytes, name: str) -> Any:
    xgboost = require("xgboost", "an XGBoost model file")
    booster = xgboost.Booster()
    try:
        booster.load_model(bytearray(data))
    except Exception as exc:
        raise CpdecompError(f"{name} is not an XGBoost model file ({type(exc).__name__})"
                            ) from None
    return booster


def _lightgbm(data: bytes, name: str) -> Any:
    lightgbm = require("lightgbm", "a LightGBM model file")
    try:
        return lightgbm.Booster(model_str=data.decode("utf-8"))
    except Exception as exc:
        raise CpdecompError(f"{name} is not a LightGBM text model ({type(exc).__name__})"
                            ) from None


READERS: dict[str, Callable[[bytes, str], Any]] = {
    ".skops": _skops,
    ".json": _xgboost,
    ".ubj": _xgboost,
    ".txt": _lightgbm,
}


def load_model_file(path: str | Path, max_bytes: int = MAX_MODEL_BYTES) -> Any:
    """The fitted model in a skops, XGBoost (.json/.ubj) or LightGBM (.txt) file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in PICKLE_SUFFIXES:
        raise CpdecompError(
            f"{path.name}: pickle files are refused, because loading one runs code from it; "
            "save the model with skops (skops.io.dump(model, 'model.skops')), or as XGBoost "
            "JSON (save_model('model.json')) or LightGBM text (save_model('model.txt'))"
        )
    reader = READERS.get(suffix)
    if reader is None:
        raise CpdecompError(f"{path.name}: model files must end in "
                            f"{', '.join(READERS)}; got {suffix or 'no extension'}")
    if not path.is_file():
        raise CpdecompError(f"model file not found: {path.name}")
    size = path.stat().st_size
    if size > max_bytes:
        raise CpdecompError(f"{path.name} is {size / 2**20:.1f} MiB; model files are capped at "
                            f"{max_bytes / 2**20:.0f} MiB")
    with path.open("rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew after the check
        raise CpdecompError(f"{path.name} is larger than the {max_bytes / 2**20:.0f} MiB cap")
    return reader(data, path.name)

"""The models axis: built-in models (fitted here, seeded) and adapters for a user's fitted model.

`MODELS` holds the built-in models, keyed by the UI label's key in menu order; each says which
exact masking path it has. `MODEL_KINDS` (in `core.models.adapters`) does the same for the kinds
of fitted model a user can bring.
"""

from core.errors import CpdecompError
from core.models.base import (
    MAX_LEAVES,
    N_TREES,
    BaseModel,
    Component,
    FunctionPredictor,
    ModelKind,
    Predictor,
)
from core.models.components import (
    COMPONENT_BUILDERS,
    SIGMA_FLOOR,
    TrainingData,
    fit_components,
    out_of_fold_residuals,
)
from core.models.design import (
    DesignMatrix,
    DesignPredictor,
    EncodedPredictor,
    LinearDesignPredictor,
)
from core.models.gradient_boosting import GradientBoosting
from core.models.linear import Linear
from core.models.random_forest import LeafQuantileForest, RandomForest

MODELS: dict[str, BaseModel] = {m.name: m for m in (GradientBoosting(), RandomForest(), Linear())}


def get_model(name: str) -> BaseModel:
    try:
        return MODELS[name]
    except KeyError:
        raise CpdecompError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}") from None


__all__ = [
    "COMPONENT_BUILDERS",
    "MAX_LEAVES",
    "MODELS",
    "N_TREES",
    "SIGMA_FLOOR",
    "BaseModel",
    "Component",
    "DesignMatrix",
    "DesignPredictor",
    "EncodedPredictor",
    "FunctionPredictor",
    "GradientBoosting",
    "LeafQuantileForest",
    "Linear",
    "LinearDesignPredictor",
    "ModelKind",
    "Predictor",
    "RandomForest",
    "TrainingData",
    "fit_components",
    "get_model",
    "out_of_fold_residuals",
]

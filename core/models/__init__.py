"""The models axis: built-in models (fitted here, seeded) and adapters for a user's fitted model.

`MODELS` holds the built-in models, keyed by name in menu order; each says which exact masking
path it has. `MODEL_KINDS` does the same for the kinds of fitted model a user can bring; the
boosters' own libraries are imported only when a model of theirs is used.
"""

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.models.base import (
    INVERSE_LINKS,
    MAX_LEAVES,
    N_TREES,
    BaseModel,
    Component,
    FunctionPredictor,
    MeanPredictor,
    ModelKind,
    Predictor,
    ResponsePredictor,
    link_of,
)
from cpdecomp.core.models.callable_model import CALLABLE
from cpdecomp.core.models.components import (
    COMPONENT_BUILDERS,
    SIGMA_FLOOR,
    TrainingData,
    difficulty_component,
    fit_components,
    out_of_fold_residuals,
    sigma_lower_bound,
)
from cpdecomp.core.models.design import (
    DesignMatrix,
    DesignPredictor,
    EncodedPredictor,
    LinearDesignPredictor,
    LogDifficultyPredictor,
    LogLinearDesignPredictor,
    MarginPredictor,
)
from cpdecomp.core.models.gradient_boosting import GradientBoosting
from cpdecomp.core.models.lightgbm_model import LIGHTGBM
from cpdecomp.core.models.linear import Linear
from cpdecomp.core.models.random_forest import LeafQuantileForest, RandomForest
from cpdecomp.core.models.sklearn_model import ESTIMATOR, LINEAR, PIPELINE, TREES
from cpdecomp.core.models.user_model import UserModelPredictor
from cpdecomp.core.models.xgboost_model import XGBOOST

MODELS: dict[str, BaseModel] = {m.name: m for m in (GradientBoosting(), RandomForest(), Linear())}
"""The models cpdecomp fits itself (`--model`, Setup's Model): `gbm` (histogram gradient
boosting), `rf` (random forest) and `linear` (least squares), all seeded."""


MODEL_KINDS: dict[str, ModelKind] = {
    kind.name: kind for kind in (PIPELINE, TREES, LINEAR, XGBOOST, LIGHTGBM, ESTIMATOR, CALLABLE)
}
"""The kinds of fitted model a user can bring, each with its masking path; the first kind that
recognises a model is its kind (XGBoost and LightGBM regressors are scikit-learn estimators too,
so the generic estimator comes after them)."""


def model_kind(model: object) -> ModelKind:
    """The registry entry for a user's fitted model."""
    for kind in MODEL_KINDS.values():
        if kind.recognises(model):
            return kind
    raise CpdecompError(
        f"a {type(model).__name__} is not a model: give a fitted estimator, Pipeline, XGBoost "
        "or LightGBM model, or a function of the raw table"
    )


def get_model(name: str) -> BaseModel:
    try:
        return MODELS[name]
    except KeyError:
        raise CpdecompError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}") from None


__all__ = [
    "COMPONENT_BUILDERS",
    "INVERSE_LINKS",
    "MAX_LEAVES",
    "MODELS",
    "MODEL_KINDS",
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
    "LogDifficultyPredictor",
    "LogLinearDesignPredictor",
    "MarginPredictor",
    "MeanPredictor",
    "ModelKind",
    "Predictor",
    "RandomForest",
    "ResponsePredictor",
    "TrainingData",
    "UserModelPredictor",
    "difficulty_component",
    "fit_components",
    "get_model",
    "link_of",
    "model_kind",
    "out_of_fold_residuals",
    "sigma_lower_bound",
]

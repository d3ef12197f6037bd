"""A fitted conformal system: encoder, components, then a calibration set.

    system = fit_system(train_table, y_train, family="normalized", model="gbm", seed=0)
    system = system.conformalize(calibration_table, y_calibration)
"""

from __future__ import annotations

import warnings as python_warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from cpdecomp.core.conformal import Family, conformal_rank, get_family
from cpdecomp.core.data import FeatureEncoder
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.games.cache import content_digest, versions_digest
from cpdecomp.core.models import (
    Component,
    FunctionPredictor,
    MeanPredictor,
    ModelKind,
    UserModelPredictor,
    difficulty_component,
    fit_components,
    get_model,
    model_kind,
    sigma_lower_bound,
)
from cpdecomp.core.models.design import UNSEEN_CATEGORY_HINT, DesignMatrix
from cpdecomp.core.models.raw_table import TableDecoder, check_model_columns
from cpdecomp.core.models.user_model import wrap_user_model
from cpdecomp.core.typing import FloatArray

MIN_TRAINING_ROWS = 10
LINEAR_CQR_R_NOTE = (
    "two linear quantile models are straight lines that cross somewhere, so CQR-r with the "
    "linear model is refused on most splits of several data sets"
)


def sigma_floor_warnings(fitted: FittedSystem) -> list[str]:
    """A warning when sigma can sit at its floor: those patients get intervals far narrower than
    the rest, and are rarely covered. Nothing when the built-in sigma cannot go that low."""
    sigma = fitted.components.get("sigma")
    if sigma is None or sigma.floor is None:
        return []
    lowest = sigma_lower_bound(sigma.predictor)
    if lowest is not None and lowest > sigma.floor:
        return []  # no row, patient or masked row, can reach the floor
    count = fitted.rows_at_sigma_floor(fitted.training_rows)
    if count == 0 and lowest is None:
        return []
    return [f"the difficulty model sigma is at its floor for {count} of "
            f"{len(fitted.training_rows)} training rows and can be for patients: their intervals "
            "are far narrower than the rest and rarely cover the outcome"]


def quantile_crossing_warnings(fitted: FittedSystem) -> list[str]:
    """CQR-r needs f_hi > f_lo at every row and masked row; warn when the training rows show
    that it will be refused. Linear quantile models are checked at their worst masked version
    too: with additive terms d_j = hi_j - lo_j, the smallest range over coalitions of a row is
    c + sum_j min(d_j(x), mean d_j), taking the training mean as the background's."""
    if not fitted.family.refuses_crossing:
        return []
    rows = fitted.training_rows
    lo, hi = fitted.components["lo"], fitted.components["hi"]
    width = hi.predict(rows) - lo.predict(rows)
    if lo.is_additive and hi.is_additive:
        lo_base, lo_terms = lo.predictor.additive_terms(rows)  # type: ignore[attr-defined]
        hi_base, hi_terms = hi.predictor.additive_terms(rows)  # type: ignore[attr-defined]
        terms = hi_terms - lo_terms
        width = np.minimum(width, hi_base - lo_base
                           + np.minimum(terms, terms.mean(axis=0)).sum(axis=1))
    crossed = int(np.sum(width <= 0))
    if crossed == 0:
        return []
    note = f"{LINEAR_CQR_R_NOTE}; " if fitted.model == "linear" else ""
    return [f"the quantile models cross on {crossed} of {len(rows)} training rows or their "
            f"masked versions, where CQR-r is undefined, so explaining will likely be refused; "
            f"{note}the cqr family allows crossing"]


def check_feature_columns(columns: Sequence, features: Sequence, where: str) -> None:
    """Refuse a table whose columns are not the features (order aside), naming the difference."""
    present = list(columns)
    missing = [name for name in features if name not in present]
    extra = [name for name in present if name not in set(features)]
    if missing or extra:
        parts = []
        if missing:
            parts.append("lacks " + ", ".join(map(repr, missing)))
        if extra:
            parts.append("has columns the model was not fitted on: " + ", ".join(map(repr, extra)))
        raise CpdecompError(f"{where} {' and '.join(parts)}; the features are "
                            + ", ".join(map(repr, features)))
    if len(set(present)) != len(present):
        raise CpdecompError(f"{where} has a column name twice")


@dataclass(frozen=True, eq=False)
class FittedSystem:
    """Components fitted on training rows; not yet calibrated."""

    family: Family
    model: str
    encoder: FeatureEncoder
    point: Component
    components: Mapping[str, Component]
    training_rows: FloatArray
    """Encoded training features: the pool the background is drawn from."""
    seed: int
    quantile_alpha: float | None = None
    digest: str | None = None
    """Content hash of everything the fit depends on; None for injected functions."""
    warnings: tuple[str, ...] = ()
    """What the user should know about how the system was put together."""

    @property
    def feature_names(self) -> tuple[str, ...]:
        return self.encoder.features

    def encode(self, table: pd.DataFrame) -> FloatArray:
        """The feature columns of a table (others, such as a target or an id, are ignored).

        A missing or unseen category is refused by column name where a design-matrix model (the
        linear model, the forest) saw no gap in training: it would read it as the first category.
        """
        rows = self.encoder.transform(table)
        for component in (self.point, *self.components.values()):
            design = getattr(component.predictor, "design", None)
            if not isinstance(design, DesignMatrix):
                continue
            for j in design.unlearned_gaps(rows):
                count = int(np.isnan(rows[:, j]).sum())
                raise CpdecompError(
                    f"the column {self.feature_names[j]!r} has a missing or unseen category in "
                    f"{count} row{'s' if count != 1 else ''}, but {UNSEEN_CATEGORY_HINT}")
        return rows

    def rows_at_sigma_floor(self, rows: FloatArray) -> int:
        """How many encoded rows have sigma at (or below) its floor, so the floor sets their
        width; 0 for a family without sigma."""
        sigma = self.components.get("sigma")
        if sigma is None or sigma.floor is None:
            return 0
        # sigma.predict is floored: max(value, floor) <= floor exactly where value <= floor
        return int(np.sum(sigma.predict(rows) <= sigma.floor))

    def encode_patients(self, table: pd.DataFrame) -> FloatArray:
        """A table of exactly the training's feature columns, in any order, encoded.

        A missing or an extra column is refused by name: a patient table that does not hold
        the training's features would give intervals for other inputs.
        """
        if not isinstance(table, pd.DataFrame):
            raise CpdecompError(
                "patients must be a table (pandas DataFrame) with the training's feature "
                f"columns: {', '.join(map(repr, self.feature_names))}"
            )
        check_feature_columns(table.columns, self.feature_names, "the patients table")
        return self.encode(table)

    def conformalize(self, table: pd.DataFrame, targets: ArrayLike) -> ConformalSystem:
        """Score the calibration rows with the unmasked components."""
        y = np.asarray(targets, dtype=float)
        if np.isnan(y).any():
            raise CpdecompError("the calibration rows need a target value on every row")
        self.family.check_targets(y, "calibration")
        rows = self.encode(table)
        return ConformalSystem(fitted=self, calibration_rows=rows, calibration_targets=y)


@dataclass(frozen=True, eq=False)
class ConformalSystem:
    """A fitted system with its calibration set: it gives intervals for any alpha."""

    fitted: FittedSystem
    calibration_rows: FloatArray
    calibration_targets: FloatArray
    _scores: dict = field(default_factory=dict, repr=False)

    @property
    def family(self) -> Family:
        return self.fitted.family

    @property
    def n_calibration(self) -> int:
        return len(self.calibration_targets)

    @property
    def feature_names(self) -> tuple[str, ...]:
        return self.fitted.feature_names

    @property
    def digest(self) -> str | None:
        """Content hash of the fitted system and the calibration set (the cache key's base)."""
        if self.fitted.digest is None:
            return None
        return content_digest(self.fitted.digest, self.calibration_rows,
                              self.calibration_targets)

    def calibration_scores(self) -> FloatArray:
        """Sorted unmasked conformity scores (computed once)."""
        if "sorted" not in self._scores:
            comps = {n: c.predict(self.calibration_rows) for n, c in self.fitted.components.items()}
            self._check_components(comps, "calibration row")
            scores = self.family.scores(self.calibration_targets, comps)
            self._scores["sorted"] = np.sort(scores)
        return self._scores["sorted"]

    def quantile(self, alpha: float) -> float:
        """q-hat: the k-th smallest calibration score, k = ceil((n + 1)(1 - alpha))."""
        k = conformal_rank(self.n_calibration, alpha)
        q = float(self.calibration_scores()[k - 1])
        self.family.check_quantile(np.array([q]), "calibration quantile")
        return q

    def predict_interval(self, patients: pd.DataFrame,
                         alpha: float) -> tuple[FloatArray, FloatArray]:
        """Lower and upper bounds for patients given as a table of the training's features."""
        return self.interval_at_rows(self.fitted.encode_patients(patients), alpha)

    def predict(self, patients: pd.DataFrame) -> FloatArray:
        """The point model's prediction for patients given as a table of the features."""
        return self.fitted.point.predict(self.fitted.encode_patients(patients))

    def interval_at_rows(self, rows: FloatArray, alpha: float) -> tuple[FloatArray, FloatArray]:
        """Lower and upper bounds at encoded rows (the games' own representation): also this
        set's intervals on another calibration set's rows (core.recalibration's coverage)."""
        comps = {n: c.predict(rows) for n, c in self.fitted.components.items()}
        self._check_components(comps, "patient row")
        return self.family.interval(self.quantile(alpha), comps)

    def _check_components(self, comps: dict[str, FloatArray], where: str) -> None:
        try:
            self.family.check_components(comps, where)
        except CpdecompError as error:
            if self.family.refuses_crossing and self.fitted.model == "linear":
                raise CpdecompError(f"{error} ({LINEAR_CQR_R_NOTE})", reason=error.reason
                                    ) from None
            raise


def fit_system(table: pd.DataFrame, targets: ArrayLike, features: Sequence[str] | None = None,
               family: str = "normalized", model: str = "gbm", seed: int = 0,
               quantile_alpha: float = 0.1) -> FittedSystem:
    """Fit the components a family needs on training rows (seeded).

    `quantile_alpha` sets the CQR quantile levels (alpha/2, 1 - alpha/2); conformalizing at
    another alpha later only changes q-hat.
    """
    chosen_family = get_family(family)
    chosen_model = get_model(model)
    y = np.asarray(targets, dtype=float)
    if np.isnan(y).any():
        raise CpdecompError("the training rows need a target value on every row")
    if len(y) < MIN_TRAINING_ROWS:
        raise CpdecompError(
            f"training set has {len(y)} rows; at least {MIN_TRAINING_ROWS} are needed"
        )
    if np.ptp(y) == 0:
        raise CpdecompError("the target has one value in all training rows; nothing to predict")
    chosen_family.check_targets(y, "training")
    encoder = FeatureEncoder(features if features is not None else list(table.columns)).fit(table)
    rows = encoder.transform(table)
    point, components = fit_components(
        chosen_family.components, chosen_model, rows, y, encoder.categorical_mask, seed,
        quantile_alpha, positive_point=chosen_family.positive_point,
    )
    # The level is part of the fit only where quantile models use it: elsewhere the same
    # components, and so the same cached games, serve every alpha.
    level = quantile_alpha if chosen_family.uses_quantile_level else None
    digest = content_digest(
        versions_digest(), rows, y, tuple(map(repr, encoder.kinds_)), chosen_family.name,
        chosen_model.name, seed, level,
    )
    fitted = FittedSystem(chosen_family, chosen_model.name, encoder, point, components, rows,
                          seed, quantile_alpha, digest)
    return replace(fitted, warnings=(*sigma_floor_warnings(fitted),
                                     *quantile_crossing_warnings(fitted)))


def system_from_functions(family: str, functions: Mapping[str, Callable[[FloatArray], FloatArray]],
                          training_table: pd.DataFrame, point: str = "f",
                          floors: Mapping[str, float] | None = None) -> FittedSystem:
    """A system whose components are given functions (oracles in tests, models fitted elsewhere).

    The functions read the encoded feature matrix, one column per column of `training_table`.
    """
    chosen = get_family(family)
    missing = [n for n in chosen.components if n not in functions]
    if missing:
        raise CpdecompError(f"the {family} family needs components {missing}")
    floors = floors or {}
    components = {
        name: Component(name, FunctionPredictor(functions[name]), floor=floors.get(name))
        for name in chosen.components
    }
    encoder = FeatureEncoder(list(training_table.columns)).fit(training_table)
    point_function = functions.get(point) or functions[chosen.components[0]]
    return FittedSystem(
        chosen, "custom", encoder, Component("f", FunctionPredictor(point_function)), components,
        encoder.transform(training_table), seed=0,
    )


COMPONENT_ALIASES = {"f_lo": "lo", "f_hi": "hi"}
SIGMA_WARNING = (
    "no sigma model was given: sigma is a gradient-boosting model (log link) of |y - f(x)| on the "
    "training rows; if f was fitted on those rows its residuals there are optimistic, so give "
    "rows f did not see, or your own sigma model"
)


def model_encoder(names: Sequence[str], training_table: pd.DataFrame,
                  models: Mapping[str, tuple[object, ModelKind]]) -> FeatureEncoder:
    """The encoder for users' models: the training rows' categories and the models' own.

    A model knows the categories it was fitted with, and the rows given as the pool may lack a
    rare one; without a code it would reach the model as missing, and the prediction, q-hat and
    the parts would move with no warning. A category neither knows is refused when encoding.
    """
    levels: dict[str, set[str]] = {}
    for component, (model, kind) in models.items():
        for j, known in (kind.categories(model) or {}).items():
            name = names[j]
            if not known and _is_text(training_table[name]):
                raise CpdecompError(
                    f"the {component} model ({kind.label}) reads the column {name!r} as "
                    "categories by their codes, without their names (an XGBoost model saved "
                    "before 3.1, say), so which code is which category cannot be told; refit "
                    "it on the text column as pandas categories with a current version")
            levels.setdefault(name, set()).update(known)
    numbers: dict[str, set[float]] = {}
    for model, kind in models.values():
        for j, known_numbers in kind.number_categories(model).items():
            if not _is_text(training_table[names[j]]):
                numbers.setdefault(names[j], set()).update(known_numbers)
    return FeatureEncoder(names, unseen="refuse").fit(
        training_table, {name: sorted(known) for name, known in levels.items()},
        {name: sorted(known) for name, known in numbers.items()})


def _is_text(column: pd.Series) -> bool:
    return not (pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column))


def brought_features(models: Mapping[str, object],
                     columns: Sequence[object]) -> tuple[str, ...] | None:
    """The feature columns the brought models read, in their order and spelled as the table
    spells them (LightGBM stores 'a b' as 'a_b'); None when no model names its columns. Models
    that read different columns are refused, naming both lists."""
    found: list[str] | None = None
    first = ""
    for name, model in models.items():
        kind = model_kind(model)
        names = kind.feature_names(model)
        if names is None:
            continue
        spelled = {kind.spelled(str(c)): str(c) for c in columns}
        mapped = [spelled.get(str(n), str(n)) for n in names]
        if found is None:
            found, first = mapped, name
        elif mapped != found:
            raise CpdecompError(f"the {first} and {name} models read different columns: "
                                f"{', '.join(map(repr, found))} and "
                                f"{', '.join(map(repr, mapped))}")
    return None if found is None else tuple(found)


def system_from_models(family: str, models: Mapping[str, object], training_table: pd.DataFrame,
                       target: str | None = None, features: Sequence[str] | None = None,
                       floors: Mapping[str, float] | None = None, seed: int = 0) -> FittedSystem:
    """A system whose components are models you fitted, each reading the raw table.

    `models` maps component names (f, sigma, lo / f_lo, hi / f_hi: what the family needs) to
    fitted scikit-learn estimators or Pipelines, XGBoost or LightGBM models, or functions of a
    DataFrame of the raw feature columns. The players are the raw columns (`features`, or every
    column of `training_table` but `target`); each model's own column names must be exactly
    these, in this order. The training rows are the background pool; the normalized family
    given no sigma model fits one on them (with a warning saying so), which needs `target`.
    `core.models.MODEL_KINDS` says which exact masking path each kind of model gets.

        fitted = system_from_models("normalized", {"f": pipeline}, train, target="y")
        system = fitted.conformalize(calibration, calibration["y"])
    """
    chosen = get_family(family)
    given = {COMPONENT_ALIASES.get(name, name): model for name, model in models.items()}
    unknown = sorted(set(given) - {*chosen.components, "f"})
    if unknown:
        raise CpdecompError(f"the {family} family has no component {unknown[0]!r}; it needs "
                            + ", ".join(chosen.components))
    notes: list[str] = []
    needs_sigma = "sigma" in chosen.components and "sigma" not in given
    missing = [n for n in chosen.components if n not in given and n != "sigma"]
    if missing:
        raise CpdecompError(f"the {family} family needs a model for {', '.join(missing)}")
    if target is not None and target not in training_table.columns:
        raise CpdecompError(f"the training table has no target column {target!r}")
    names = list(features) if features is not None else [
        c for c in training_table.columns if c != target]
    if target is not None and target in names:
        raise CpdecompError(f"the target {target!r} cannot also be a feature")
    kinds = {name: model_kind(model) for name, model in given.items()}
    for name, model in given.items():
        kind = kinds[name]
        check_model_columns(kind.feature_names(model), [kind.spelled(n) for n in names], name)
        n_columns = kind.n_features(model)
        if n_columns is not None and n_columns != len(names):
            raise CpdecompError(f"the {name} model reads {n_columns} columns; the training table "
                                f"has {len(names)} feature columns: {', '.join(map(repr, names))}")
    for name, model in given.items():
        if kinds[name].name != "callable" and kinds[name].feature_names(model) is None:
            # Nothing can check the order: say which columns it gets, where they go.
            notes.append(f"the {name} model ({kinds[name].label}) carries no column names, so "
                         "it is given the feature columns by their position: "
                         f"{', '.join(map(repr, names))}; if it was fitted on another order, "
                         "its predictions are wrong with no error (save it fitted on a "
                         "DataFrame, or give the features in its order)")
    encoder = model_encoder(names, training_table, {n: (given[n], kinds[n]) for n in given})
    rows = encoder.transform(training_table)
    decoder = TableDecoder(encoder.kinds_)
    floors = floors or {}
    components: dict[str, Component] = {}
    for name, model in given.items():
        kind = kinds[name]
        component = Component(name, wrap_user_model(model, kind, decoder),
                              floor=floors.get(name))
        try:
            component.predict(rows[:2])
        except CpdecompError:
            raise
        except Exception as exc:  # the model's own message may quote cells: name its type only
            raise CpdecompError(f"the {name} model ({kind.label}) failed on the training rows "
                                f"({type(exc).__name__}); was it fitted on these columns?"
                                ) from None
        components[name] = component
    if needs_sigma:
        if target is None:
            raise CpdecompError("the normalized family needs a sigma model, or the training "
                                "target (target=...) to fit one")
        targets = np.asarray(training_table[target], dtype=float)
        if np.isnan(targets).any():
            raise CpdecompError("fitting sigma needs a target value on every training row")
        spread = np.abs(targets - components["f"].predict(rows))
        sigma = difficulty_component(rows, spread, encoder.categorical_mask, seed)
        components["sigma"] = replace(sigma, floor=floors.get("sigma", sigma.floor))
        notes.append(SIGMA_WARNING)
        python_warnings.warn(SIGMA_WARNING, UserWarning, stacklevel=2)
    # CQR given no point model shows the midpoint of its quantiles
    # (a quantile model with a link is averaged on its response scale, not its margin)
    point = components.get("f") or Component("f", MeanPredictor(tuple(
        components[name].on_response_scale().predictor for name in ("lo", "hi"))))
    label = "+".join(sorted({c.predictor.kind.name for c in components.values()
                             if isinstance(c.predictor, UserModelPredictor)}))
    fitted = FittedSystem(chosen, label, encoder, point,
                          {name: components[name] for name in chosen.components}, rows, seed)
    return replace(fitted, warnings=(*notes, *sigma_floor_warnings(fitted),
                                     *quantile_crossing_warnings(fitted)))

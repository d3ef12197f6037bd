"""An already conformalized MAPIE 1.6 regressor, taken in as a cpdecomp system.

    mapie = SplitConformalRegressor(model, confidence_level=0.9, prefit=True)
    mapie.conformalize(calibration[features], calibration["y"])
    system = system_from_mapie(mapie, calibration[features], calibration["y"],
                               training_table=train[features])
    Explainer(system).explain(patients, alpha=0.1)

What is taken from MAPIE: the fitted estimator(s), the conformity score (hence the family) and
the confidence level(s). What is not: the calibration set. MAPIE 1.6 keeps only the scores of
its conformalization rows, not the rows, and the calibration game needs the rows (it rescores
them under every coalition), so the same rows are passed again; their recomputed scores are
checked against MAPIE's own `conformity_scores`, so a different calibration set, or an
estimator other than the one MAPIE scored with, is refused rather than explained.

* `SplitConformalRegressor`, `AbsoluteConformityScore()` (symmetric): absolute, f ± q;
* `SplitConformalRegressor`, `GammaConformityScore(sym=True)`: gamma, f (1 ± q);
* `ConformalizedQuantileRegressor`, as `predict_interval(symmetric_correction=True)`: cqr,
  [lo − q, hi + q], with its median model as the point prediction.

MAPIE's asymmetric scores (the "gamma" string gives `sym=False`) and CQR's default asymmetric
correction (one quantile per side at alpha / 2) are not these families and are refused or
stated: the widths below equal `predict_interval` with `symmetric_correction=True`.

The rank rule is cpdecomp's (method page §2): q-hat is the k-th smallest calibration score,
k = ceil((n + 1)(1 - alpha)) computed exactly. MAPIE 1.6 computes the same k in floating
point and refuses n < 1/alpha. The widths equal MAPIE's wherever the two agree (to 1e-12 for
scikit-learn and LightGBM estimators; to about 1e-7 for XGBoost, whose float32 leaf sums
cpdecomp adds in float64). They differ (i) where (n + 1)(1 - alpha) rounds up in floating
point, e.g. n = 99 and alpha = 0.45, where MAPIE's q-hat is one order statistic higher, and
(ii) for 1/alpha - 1 <= n < 1/alpha, where MAPIE refuses and cpdecomp's k = n is valid. At
MAPIE's own confidence levels such a difference is reported in the system's warnings.

MAPIE's internals are not a public API: the estimators are read from the attributes MAPIE 1.6
documents on its private conformalizers (`estimator_.single_estimator_`, `estimators_`), and
the check against the public `conformity_scores` is what keeps that honest.
"""

from __future__ import annotations

import dataclasses
import math
import warnings as python_warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from cpdecomp.core.conformal import conformal_rank
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.system import ConformalSystem, system_from_models

SCORE_AGREEMENT = 1e-6
"""Relative tolerance of the check that our scores are MAPIE's: XGBoost adds its leaves in
float32 and cpdecomp in float64 (docs/analyst/own-model.md), about 1e-7 relative; a different
calibration set or estimator differs by far more."""


def mapie_rank(n: int, alpha: float) -> int | None:
    """MAPIE 1.6's rank for n scores at miscoverage alpha, or None where it refuses.

    Its `_compute_regression_quantile` takes numpy's "lower" quantile at level
    ceil((1 - alpha)(n + 1)) / n, in floating point, i.e. that order statistic; its
    `_check_alpha_and_n_samples` refuses n < max(1/alpha, 1/(1 - alpha)). Written out here only
    to say where cpdecomp's exact rank differs (the tests check it against MAPIE itself).
    """
    if n < max(1 / alpha, 1 / (1 - alpha)):
        return None
    k = math.ceil((1 - alpha) * (n + 1))
    return k if k <= n else None


def _rank_notes(n: int, alphas: Sequence[float]) -> list[str]:
    notes = []
    for alpha in alphas:
        theirs = mapie_rank(n, alpha)
        try:
            ours: int | None = conformal_rank(n, alpha)
        except CpdecompError:
            ours = None
        if theirs == ours:
            continue
        if theirs is None:
            notes.append(f"at alpha = {alpha:g} MAPIE refuses {n} calibration rows (it needs "
                         f"n >= 1/alpha); cpdecomp uses the exact rank k = {ours} of {n}")
        else:
            notes.append(f"at alpha = {alpha:g} with {n} calibration rows MAPIE takes the "
                         f"{theirs}-th smallest score (floating point rounds (n + 1)(1 - alpha) "
                         f"up) and cpdecomp the {ours}-th, the exact rank: the widths differ")
    return notes


def _family_and_models(regressor: Any) -> tuple[str, dict[str, object], list[float]]:
    """The family, the fitted estimators by component, and MAPIE's alphas."""
    try:  # whoever holds a MAPIE regressor has mapie; it is no dependency of cpdecomp's
        from mapie.conformity_scores import AbsoluteConformityScore, GammaConformityScore
        from mapie.regression import ConformalizedQuantileRegressor, SplitConformalRegressor
    except ModuleNotFoundError:
        raise CpdecompError(f"a {type(regressor).__name__} is not a MAPIE regressor (mapie "
                            "is not installed here)") from None

    if isinstance(regressor, SplitConformalRegressor):
        if not regressor._is_conformalized:
            raise CpdecompError("the MAPIE regressor is not conformalized yet: call "
                                "conformalize(X, y) on the calibration rows first")
        score = regressor._conformity_score
        if type(score) is AbsoluteConformityScore and score.sym:
            family = "absolute"
        elif type(score) is GammaConformityScore and score.sym:
            family = "gamma"
        elif type(score) is GammaConformityScore:
            raise CpdecompError(
                "MAPIE's gamma score here is asymmetric (sym=False, what conformity_score="
                "'gamma' gives), one quantile per side; cpdecomp's gamma family is the "
                "symmetric |y - f| / f: conformalize with GammaConformityScore(sym=True)")
        else:
            raise CpdecompError(
                f"MAPIE's {type(score).__name__} is not taken in; cpdecomp takes the absolute "
                "score and GammaConformityScore(sym=True), or a ConformalizedQuantileRegressor")
        conformalizer = regressor._mapie_regressor
        if conformalizer._predict_params:
            raise CpdecompError("the MAPIE regressor was conformalized with predict_params; "
                                "cpdecomp calls the estimator without them")
        models: dict[str, object] = {"f": conformalizer.estimator_.single_estimator_}
        return family, models, [float(a) for a in regressor._alphas]
    if isinstance(regressor, ConformalizedQuantileRegressor):
        if not regressor._is_conformalized:
            raise CpdecompError("the MAPIE regressor is not conformalized yet: call "
                                "conformalize(X, y) on the calibration rows first")
        if regressor._predict_params:
            raise CpdecompError("the MAPIE regressor was conformalized with predict_params; "
                                "cpdecomp calls the estimators without them")
        lo, hi, median = regressor._mapie_quantile_regressor.estimators_
        return "cqr", {"lo": lo, "hi": hi, "f": median}, [float(regressor._alpha)]
    raise CpdecompError(
        f"a {type(regressor).__name__} is not taken in: pass a conformalized MAPIE "
        "SplitConformalRegressor or ConformalizedQuantileRegressor")


def _check_scores(system: ConformalSystem, regressor: Any) -> None:
    """Our unmasked calibration scores are MAPIE's, as multisets (MAPIE keeps them in row order
    but the rows may come back re-ordered)."""
    theirs = np.asarray(regressor.conformity_scores, dtype=float)
    if theirs.ndim == 2:  # CQR: (lower, upper, max) per row; the symmetric score is the max
        theirs = theirs[2]
    if len(theirs) != system.n_calibration:
        raise CpdecompError(
            f"MAPIE was conformalized on {len(theirs)} rows but {system.n_calibration} "
            "calibration rows were given: pass the rows given to conformalize")
    ours = system.calibration_scores()
    theirs = np.sort(theirs)
    scale = max(float(np.max(np.abs(theirs))), np.finfo(float).tiny)
    if not np.allclose(ours, theirs, rtol=SCORE_AGREEMENT, atol=SCORE_AGREEMENT * scale):
        raise CpdecompError(
            "the calibration rows given do not give MAPIE's conformity scores: pass the rows "
            "and targets given to conformalize, with the same columns")


def system_from_mapie(regressor: Any, calibration_table: pd.DataFrame,
                      calibration_targets: ArrayLike, training_table: pd.DataFrame,
                      features: Sequence[str] | None = None,
                      floors: Mapping[str, float] | None = None,
                      seed: int = 0) -> ConformalSystem:
    """A calibrated system from a conformalized MAPIE 1.6 regressor (see the module docstring).

    `calibration_table` and `calibration_targets` are the rows given to MAPIE's
    `conformalize` (any row order). `training_table` holds feature rows the estimators may read
    (training rows, not calibration rows): it is the background pool the masked games draw
    from, so it is required. The players are `features`, or every column of `training_table`;
    each estimator's own column names must be these, in this order.

    The rank rule is cpdecomp's exact one; where MAPIE's floating-point rule gives another
    order statistic at its own confidence level(s), or refuses the calibration size, the
    system's `fitted.warnings` say so (and a UserWarning is raised).
    """
    family, models, alphas = _family_and_models(regressor)
    if training_table is None or not isinstance(training_table, pd.DataFrame):
        raise CpdecompError("training_table (a DataFrame of training rows) is required: the "
                            "background the features are masked with is drawn from it")
    fitted = system_from_models(family, models, training_table, features=features,
                                floors=floors, seed=seed)
    y = np.asarray(calibration_targets, dtype=float)
    notes = _rank_notes(len(y), alphas)
    for note in notes:
        python_warnings.warn(note, UserWarning, stacklevel=2)
    fitted = dataclasses.replace(fitted, model=f"mapie:{fitted.model}",
                                 warnings=(*fitted.warnings, *notes))
    system = fitted.conformalize(calibration_table, y)
    _check_scores(system, regressor)
    return system

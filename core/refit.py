"""φ_C's refitting bootstrap: an interval that covers the fit of the models, not only the
calibration sample.

    low, high, level = refit_bootstrap(system, training_targets, n_replicates=50)

`Explainer.calibration_bootstrap` resamples the calibration rows with the fitted components
and the background fixed, so its interval is the calibration sample's share of φ_C's
uncertainty only. A feature the σ model picked up by chance (a pure-noise column) then keeps a
settled sign in run after run, though another training sample would fit another σ. Here every
replicate resamples the training rows (with replacement), refits every component on them with
the run's own model and seed stream, draws its background from them as the run did, resamples
the calibration rows, and computes φ_C once more: the interval covers the training fit, the
background draw and the calibration sample together.

The interval is the basic (pivot) bootstrap, [φ̂ − (q_hi − φ̂), φ̂ − (q_lo − φ̂)]: a model
refitted on a resample of its training rows repeats the way the run's fit strays from the
population's (a pure-noise column's φ_C keeps its sign), and the pivot subtracts that stray
instead of adding it twice, as the percentile interval does.
Each replicate costs a fit and a calibration game.

Neither interval is centred on the population pipeline's φ_C, though: every refit picks a
noise column up by chance again (docs/results/refit_bootstrap.md). `cross_fit_interval`
(below) removes what a fit picks up by chance, and is the one to ask whether a column's
calibration-driven effect is real.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike

from cpdecomp.core.attribution.groups import Groups
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.explainer import BOOTSTRAP_LEVEL, Explainer
from cpdecomp.core.games.calibration import CELLS_PER_CHUNK, CalibrationGame
from cpdecomp.core.games.masking import MaskedEvaluator
from cpdecomp.core.models import get_model
from cpdecomp.core.models.base import BaseModel, Component
from cpdecomp.core.models.components import fit_components
from cpdecomp.core.system import MIN_TRAINING_ROWS, ConformalSystem
from cpdecomp.core.typing import FloatArray

REFIT_STREAM = 6
"""Seed stream of the refitting bootstrap's resamples, apart from every other stream."""


@dataclass(frozen=True, eq=False)
class RefitInterval:
    """φ_C's interval over refitted replicates, on the family's scale."""

    low: FloatArray
    high: FloatArray
    level: float
    estimate: FloatArray
    """The run's own φ_C (family scale)."""
    replicates: FloatArray
    """(n_kept, n_players) φ_C of each replicate the family accepted."""
    refused: int
    """Replicates left out: the refitted masked pipeline was undefined for the family."""

    @property
    def sign_uncertain(self) -> np.ndarray:
        """True where the interval holds 0."""
        return (self.low <= 0) & (self.high >= 0)


def refit_bootstrap(system: ConformalSystem, training_targets: ArrayLike,
                    method: str = "exact", alpha: float = 0.1, n_replicates: int = 50,
                    background_size: int = 64, seed: int = 0, level: float = BOOTSTRAP_LEVEL,
                    budget: int | None = None, groups: Groups | None = None,
                    percentile: bool = False) -> RefitInterval:
    """φ_C's interval over `n_replicates` refits on resampled training rows (see the module).

    training_targets: the targets of the system's training rows (the fit does not keep them).
    percentile: the plain percentile interval instead of the pivot (for comparison).
    """
    fitted = system.fitted
    rows, y = _refit_inputs(system, training_targets, level, "the refitting bootstrap")
    if n_replicates < 2:
        raise CpdecompError("a bootstrap needs at least 2 replicates")
    model = get_model(fitted.model)
    own = Explainer(system, background_size=background_size, seed=seed, background_error=False)
    design = own.design(method, budget, groups)
    estimate = design.apply(own.calibration_game(method, budget, groups).values(alpha))
    rng = np.random.default_rng((seed, REFIT_STREAM))
    n_train, n_cal = len(rows), system.n_calibration
    kept: list[FloatArray] = []
    refused = 0
    for _ in range(n_replicates):
        train = rng.integers(0, n_train, n_train)
        cal = rng.integers(0, n_cal, n_cal)
        fit_seed = int(rng.integers(0, 2**31 - 1))
        try:
            point, components = fit_components(
                fitted.family.components, model, rows[train], y[train],
                fitted.encoder.categorical_mask, fit_seed, fitted.quantile_alpha or alpha,
                positive_point=fitted.family.positive_point)
            refitted = replace(fitted, point=point, components=components,
                               training_rows=rows[train], digest=None, warnings=())
            replicate = ConformalSystem(refitted, system.calibration_rows[cal],
                                        system.calibration_targets[cal])
            explainer = Explainer(replicate, background_size=background_size, seed=seed,
                                  background_error=False)
            values = explainer.calibration_game(method, budget, groups).values(alpha)
        except CpdecompError:
            refused += 1
            continue
        kept.append(design.apply(values))
    if len(kept) < 2:
        raise CpdecompError("too few refitted replicates gave a usable masked pipeline")
    replicates = np.array(kept)
    tail = (1 - level) / 2
    q_lo, q_hi = np.quantile(replicates, [tail, 1 - tail], axis=0)
    if percentile:
        low, high = q_lo, q_hi
    else:
        low, high = 2 * estimate - q_hi, 2 * estimate - q_lo
    return RefitInterval(low, high, level, estimate, replicates, refused)


def _refit_inputs(system: ConformalSystem, training_targets: ArrayLike, level: float,
                  what: str) -> tuple[FloatArray, FloatArray]:
    """The training rows and their targets, checked, for an interval that refits the models."""
    fitted = system.fitted
    if fitted.digest is None:
        raise CpdecompError(f"{what} refits the system's models: it needs a system fitted "
                            "here (fit_system), not given functions or models")
    if not 0 < level < 1:
        raise CpdecompError(f"the interval level must lie strictly between 0 and 1, not {level}")
    y = np.asarray(training_targets, dtype=float)
    rows = fitted.training_rows
    if y.shape != (len(rows),):
        raise CpdecompError(f"training_targets has {y.size} values for {len(rows)} training rows")
    return rows, y


CROSS_FIT_STREAM = 7
"""Seed stream of the cross-fitted interval's half splits, apart from every other stream."""


@dataclass(frozen=True, eq=False)
class CrossFitInterval:
    """φ_C's cross-fitted interval for the population pipeline, on the family's scale."""

    low: FloatArray
    high: FloatArray
    level: float
    estimate: FloatArray
    """The debiased φ_C: the mean over splits of 2·φ_C(mix) − (φ_C(A) + φ_C(B))/2."""
    plug_in: FloatArray
    """The run's own φ_C (its fitted models, background and calibration rows)."""
    fit_se: FloatArray
    """Standard error from the training fit: √mean((φ_C(A) − φ_C(B))² / 4) over splits."""
    calibration_se: FloatArray
    """Standard error from the calibration sample: the spread of the run's calibration
    bootstrap (models fixed)."""
    splits: FloatArray
    """(n_kept, n_players) debiased φ_C of each split the family accepted."""
    refused: int
    """Splits left out: a half's masked pipeline was undefined for the family."""

    @property
    def sign_uncertain(self) -> np.ndarray:
        """True where the interval holds 0."""
        return (self.low <= 0) & (self.high >= 0)


def cross_fit_interval(system: ConformalSystem, training_targets: ArrayLike,
                       method: str = "exact", alpha: float = 0.1, n_splits: int = 4,
                       background_size: int = 64, seed: int = 0,
                       level: float = BOOTSTRAP_LEVEL, budget: int | None = None,
                       groups: Groups | None = None,
                       calibration_replicates: int = 200) -> CrossFitInterval:
    """φ_C's interval for the pipeline the population would give, covering the training fit,
    the background draw and the calibration sample.

    Why not the fitted pipeline's φ_C: a column that a fitted f or σ uses by chance adds noise
    to the calibration scores, and noise in the scores raises their upper quantile, so such a
    column gets φ_C > 0 on every training sample (a pure-noise column at 300 rows: 12 of 12,
    docs/results/refit_bootstrap.md). That bias is second order in the fit's chance part, and
    a refit on resampled rows repeats it instead of measuring it. Two fits on disjoint halves
    A and B have independent chance parts, so in 2·φ_C(mix) − (φ_C(A) + φ_C(B))/2, with mix
    the pipeline whose components are the halves' average, the chance parts' squares cancel
    and their product has mean 0, while a first-order (real) effect is kept whole.

    Each of `n_splits` splits halves the training rows at random, refits every component on
    each half with the run's model, draws a background from the training rows, and computes
    the three calibration games on the run's calibration rows. The interval is the estimate
    ± z·√(fit_se² + calibration_se² + var(splits)/n_kept): (φ_C(A) − φ_C(B))/2 has the
    variance of a full-size fit's φ_C (half-sampling), and the run's calibration bootstrap
    gives the calibration sample's. A normal interval: its level is approximate.
    Each split costs two half-size fits and three calibration games.
    """
    fitted = system.fitted
    rows, y = _refit_inputs(system, training_targets, level, "the cross-fitted interval")
    if n_splits < 2:
        raise CpdecompError("the cross-fitted interval needs at least 2 splits")
    half = len(rows) // 2
    if half < MIN_TRAINING_ROWS:
        raise CpdecompError(f"the cross-fitted interval fits on halves of the training rows: "
                            f"it needs at least {2 * MIN_TRAINING_ROWS}, not {len(rows)}")
    model = get_model(fitted.model)
    own = Explainer(system, background_size=background_size, seed=seed, background_error=False)
    design = own.design(method, budget, groups)
    game = own.calibration_game(method, budget, groups, keep_order=True)
    plug_in = design.apply(game.values(alpha))
    replicates = game.bootstrap_values(alpha, calibration_replicates, seed=seed)
    replicates = replicates[np.isfinite(replicates).all(axis=1)]
    if len(replicates) < 2:
        raise CpdecompError("too few calibration replicates gave a usable quantile")
    calibration_se = design.apply(replicates).std(axis=0, ddof=1)
    rng = np.random.default_rng((seed, CROSS_FIT_STREAM))
    debiased: list[FloatArray] = []
    halves_apart: list[FloatArray] = []
    refused = 0
    for _ in range(n_splits):
        order = rng.permutation(len(rows))
        chosen = np.sort(rng.choice(len(rows), size=min(background_size, len(rows)),
                                    replace=False))
        fit_seeds = rng.integers(0, 2**31 - 1, size=2)
        try:
            evaluators = [MaskedEvaluator(_refitted(system, model, rows[part], y[part],
                                                    int(fit_seed), alpha), rows[chosen])
                          for part, fit_seed in zip((order[:half], order[half:]), fit_seeds,
                                                    strict=True)]
            a, b, mix = (design.apply(values) for values in
                         _half_games(system, evaluators, design.coalitions, alpha))
        except CpdecompError:
            refused += 1
            continue
        debiased.append(2 * mix - (a + b) / 2)
        halves_apart.append((a - b) / 2)
    if len(debiased) < 2:
        raise CpdecompError("too few splits gave a usable masked pipeline")
    splits = np.array(debiased)
    fit_se = np.sqrt(np.mean(np.square(halves_apart), axis=0))
    spread = splits.var(axis=0, ddof=1) / len(splits)
    half_width = NormalDist().inv_cdf((1 + level) / 2) * np.sqrt(
        fit_se ** 2 + calibration_se ** 2 + spread)
    estimate = splits.mean(axis=0)
    return CrossFitInterval(estimate - half_width, estimate + half_width, level, estimate,
                            plug_in, fit_se, calibration_se, splits, refused)


def _refitted(system: ConformalSystem, model: BaseModel, x: FloatArray, y: FloatArray,
              fit_seed: int, alpha: float) -> dict[str, Component]:
    """The family's components refitted on (x, y) with the run's model and settings."""
    fitted = system.fitted
    _, components = fit_components(
        fitted.family.components, model, x, y, fitted.encoder.categorical_mask, fit_seed,
        fitted.quantile_alpha or alpha, positive_point=fitted.family.positive_point)
    return components


def _half_games(system: ConformalSystem, evaluators: list[MaskedEvaluator],
                coalitions: np.ndarray, alpha: float) -> tuple[FloatArray, ...]:
    """v_C of half A, half B and their averaged pipeline on the system's calibration rows.

    Masking is a mean over the background (of a component's margin where its link is part of
    it, as sigma's log scale is), and both halves are masked on the same one, so the average
    of their masked means is the averaged pipeline's masked mean: the mix averages each
    component on the scale masking averages it on, then takes the inverse link and a floor
    (the halves' mean floor). Rows go in chunks, as in CalibrationGame.compute.
    """
    family = system.family
    names = family.components
    rows, targets = system.calibration_rows, system.calibration_targets
    scores = np.empty((3, len(coalitions), len(rows)))
    step = max(1, CELLS_PER_CHUNK // max(len(coalitions), 1))
    halves = [e.components for e in evaluators]
    mixed = {name: _mixed(halves[0][name], halves[1][name]) for name in names}
    for start in range(0, len(rows), step):
        stop = start + step
        raw = [e.evaluate_by_row(coalitions, rows[start:stop], names, finished=False)
               for e in evaluators]
        tables = [{name: half[name].finish(values[name]) for name in names}
                  for half, values in zip(halves, raw, strict=True)]
        tables.append({name: mixed[name].finish((raw[0][name] + raw[1][name]) / 2)
                       for name in names})
        for k, table in enumerate(tables):
            family.check_components(table, "masked calibration row")
            scores[k, :, start:stop] = family.scores(targets[start:stop, None], table).T
    scores.sort(axis=2)
    return tuple(CalibrationGame(family, coalitions, s).values(alpha) for s in scores)


def _mixed(a: Component, b: Component) -> Component:
    """What the averaged pipeline's component does after masking: the halves' inverse link
    (the same model, so the same link) and their mean floor."""
    if a.link != b.link:
        raise CpdecompError(f"the halves' {a.name} models have different links")
    floor = None if a.floor is None or b.floor is None else (a.floor + b.floor) / 2
    return replace(a, floor=floor)


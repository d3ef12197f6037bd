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
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

from cpdecomp.core.attribution.groups import Groups
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.explainer import BOOTSTRAP_LEVEL, Explainer
from cpdecomp.core.models import get_model
from cpdecomp.core.models.components import fit_components
from cpdecomp.core.system import ConformalSystem
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
    if fitted.digest is None:
        raise CpdecompError("the refitting bootstrap refits the system's models: it needs a "
                            "system fitted here (fit_system), not given functions or models")
    if n_replicates < 2:
        raise CpdecompError("a bootstrap needs at least 2 replicates")
    if not 0 < level < 1:
        raise CpdecompError(f"the interval level must lie strictly between 0 and 1, not {level}")
    y = np.asarray(training_targets, dtype=float)
    rows = fitted.training_rows
    if y.shape != (len(rows),):
        raise CpdecompError(f"training_targets has {y.size} values for {len(rows)} training rows")
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

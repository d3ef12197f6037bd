"""From game values to the three attribution vectors, in width or log units, with checks."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from cpdecomp.core.attribution import Design
from cpdecomp.core.conformal import FAMILIES, Scale
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.typing import FloatArray

Units = Literal["width", "log"]

ADDITIVITY_TOLERANCE = 1e-8
"""The engine refuses a result whose |φ_T - φ_C - φ_I| exceeds this fraction of the width."""


def check_units(scale: Scale, units: str, family: str = "this family") -> None:
    """Log units exist on the log scale only: an identity family's attributions are width
    units already (the one home of this rule; the CLI, the explainer and reports ask it)."""
    if units == "log" and scale != "log":
        log_families = ", ".join(name for name, f in FAMILIES.items() if f.scale == "log")
        raise CpdecompError(f"log units apply to the log-scale families ({log_families}); "
                            f"{family} attributions are in width units already")


class AdditivityError(RuntimeError):
    """φ_T ≠ φ_C + φ_I: a bug or a non-linear method; never returned to the user as a result."""


@dataclass(frozen=True, eq=False)
class Decomposition:
    """Per patient and feature: calibration-driven, instance-driven and total attributions."""

    features: tuple[str, ...]
    calibration: FloatArray
    """(n_patients, n_features); the same row for every patient on the additive scale."""
    instance: FloatArray
    total: FloatArray
    units: Units
    full_value: FloatArray
    """(n_patients,) v_T(all features) on the family's scale: T(width)."""
    empty_value: float
    """v_T(no feature) = T(base width), the same for every patient."""
    additivity_error: float
    """max |φ_T - φ_C - φ_I| over patients and features, in `units`."""
    efficiency_error: float
    """max over patients of |Σφ_T - (width - base width)| (or of log widths), in `units`."""
    efficient: bool
    calibration_se: FloatArray | None = None
    """Monte Carlo standard errors of a sampled method (same shape and units); else None."""
    instance_se: FloatArray | None = None
    total_se: FloatArray | None = None
    """From the total game's own samples: the three games share coalitions, so their errors are
    correlated and total_se is not a sum of the other two."""
    calibration_low: FloatArray | None = None
    """Lower end of φ_C's bootstrap interval over resampled calibration sets (same shape and
    units as `calibration`); None unless a bootstrap was asked for."""
    calibration_high: FloatArray | None = None
    calibration_level: float | None = None
    """Nominal level of the calibration interval (e.g. 0.9)."""
    background_low: FloatArray | None = None
    """Lower end of φ_C's interval over redrawn backgrounds (same shape and units as
    `calibration`): the background's share of φ_C's uncertainty, apart from the calibration
    set's; None unless a background bootstrap was asked for."""
    background_high: FloatArray | None = None
    background_level: float | None = None
    """Nominal level of both background intervals (φ_C's and φ_I's)."""
    instance_background_low: FloatArray | None = None
    """Lower end of φ_I's interval over the same redrawn backgrounds (same shape and units as
    `instance`): the background's Monte Carlo error of each patient's instance-driven part.
    In width units both ends are scaled by the run's own factor L of the patient."""
    instance_background_high: FloatArray | None = None
    calibration_background_se: FloatArray | None = None
    """Monte Carlo standard error of φ_C from the background draw (same shape and units as
    `calibration`): the run's background split into batches, each part computed on each batch,
    sd over batches / √batches (batch means). On by default where a component is masked by
    brute force (a small background there); None otherwise."""
    instance_background_se: FloatArray | None = None
    """The same for φ_I, per patient (in width units scaled by the patient's factor L)."""
    total_background_se: FloatArray | None = None
    """The same for φ_T, from each batch's φ_C + φ_I (not a sum of the other two errors)."""
    scale: Scale = "identity"
    """The family's scale: log units exist only where it is "log"."""
    fixed_quantile: FloatArray | None = None
    """(n_patients, n_features) Shapley values of the width with q̂ held at the full model's
    value, in width units whatever `units` says: what shap on a fitted conformal regressor's
    interval width gives (the practitioners' comparator). It never recalibrates, so it holds
    no calibration-driven part: it equals φ_I on the identity families and is 0 for the
    absolute family; it sums to width − (width with every feature masked at the same q̂).
    None unless asked for."""

    @property
    def calibration_sign_uncertain(self) -> np.ndarray | None:
        """True where φ_C's interval holds 0: its sign is not settled by this calibration set."""
        if self.calibration_low is None or self.calibration_high is None:
            return None
        return (self.calibration_low <= 0) & (self.calibration_high >= 0)

    @property
    def background_sign_uncertain(self) -> np.ndarray | None:
        """True where φ_C's background interval holds 0: another background draw could turn
        its sign."""
        if self.background_low is None or self.background_high is None:
            return None
        return (self.background_low <= 0) & (self.background_high >= 0)


def _stack(parts: list[FloatArray | None]) -> FloatArray | None:
    present = [p for p in parts if p is not None]
    return None if len(present) < len(parts) else np.concatenate(present)


def concatenate(parts: list[Decomposition]) -> Decomposition:
    """One decomposition from patient chunks explained under the same configuration."""
    first = parts[0]
    return Decomposition(
        features=first.features,
        calibration=np.concatenate([p.calibration for p in parts]),
        instance=np.concatenate([p.instance for p in parts]),
        total=np.concatenate([p.total for p in parts]),
        units=first.units,
        full_value=np.concatenate([p.full_value for p in parts]),
        empty_value=first.empty_value,
        additivity_error=max(p.additivity_error for p in parts),
        efficiency_error=max(p.efficiency_error for p in parts),
        efficient=first.efficient,
        calibration_se=_stack([p.calibration_se for p in parts]),
        instance_se=_stack([p.instance_se for p in parts]),
        total_se=_stack([p.total_se for p in parts]),
        calibration_low=_stack([p.calibration_low for p in parts]),
        calibration_high=_stack([p.calibration_high for p in parts]),
        calibration_level=first.calibration_level,
        background_low=_stack([p.background_low for p in parts]),
        background_high=_stack([p.background_high for p in parts]),
        background_level=first.background_level,
        instance_background_low=_stack([p.instance_background_low for p in parts]),
        instance_background_high=_stack([p.instance_background_high for p in parts]),
        calibration_background_se=_stack([p.calibration_background_se for p in parts]),
        instance_background_se=_stack([p.instance_background_se for p in parts]),
        total_background_se=_stack([p.total_background_se for p in parts]),
        scale=first.scale,
        fixed_quantile=_stack([p.fixed_quantile for p in parts]),
    )


def in_units(decomposition: Decomposition, units: Units) -> Decomposition:
    """The same decomposition in other units, without evaluating any game again.

    Width units are log units times the logarithmic-mean factor L of each patient, so the
    conversion is one multiplication or division per patient (identity families have width
    units only).
    """
    if units == decomposition.units:
        return decomposition
    check_units(decomposition.scale, units)
    width = np.exp(decomposition.full_value)
    factor = logarithmic_mean_factor(width, float(np.exp(decomposition.empty_value)))[:, None]
    scale = factor if units == "width" else 1.0 / factor

    def rescale(values: FloatArray | None) -> FloatArray | None:
        return None if values is None else values * scale

    calibration, instance, total = (getattr(decomposition, part) * scale
                                    for part in ("calibration", "instance", "total"))
    if units == "width":
        target = width - float(np.exp(decomposition.empty_value))
    else:
        target = decomposition.full_value - decomposition.empty_value
    additivity = np.abs(total - calibration - instance)
    efficiency = np.abs(total.sum(axis=1) - target)
    return replace(
        decomposition, units=units, calibration=calibration, instance=instance, total=total,
        calibration_se=rescale(decomposition.calibration_se),
        instance_se=rescale(decomposition.instance_se), total_se=rescale(decomposition.total_se),
        calibration_low=rescale(decomposition.calibration_low),
        calibration_high=rescale(decomposition.calibration_high),
        background_low=rescale(decomposition.background_low),
        background_high=rescale(decomposition.background_high),
        instance_background_low=rescale(decomposition.instance_background_low),
        instance_background_high=rescale(decomposition.instance_background_high),
        calibration_background_se=rescale(decomposition.calibration_background_se),
        instance_background_se=rescale(decomposition.instance_background_se),
        total_background_se=rescale(decomposition.total_background_se),
        additivity_error=float(additivity.max()) if additivity.size else 0.0,
        efficiency_error=float(efficiency.max()) if efficiency.size else 0.0,
    )


def logarithmic_mean_factor(width: FloatArray, base_width: float) -> FloatArray:
    """L = (U - U0)/(ln U - ln U0), and L = U where U = U0 (method page §6)."""
    log_gap = np.log(width) - np.log(base_width)
    tiny = np.abs(log_gap) < 1e-12
    safe_gap = np.where(tiny, 1.0, log_gap)
    return np.where(tiny, width, (width - base_width) / safe_gap)


def calibration_attribution(design: Design, calibration_values: FloatArray
                            ) -> tuple[FloatArray, FloatArray | None]:
    """φ_C on the family's scale and its standard errors (None unless sampled).

    One vector for every patient: compute it once per configuration, not once per chunk.
    """
    return design.apply(calibration_values), design.standard_errors(calibration_values)


def calibration_interval(design: Design, replicate_values: FloatArray, level: float = 0.9
                         ) -> tuple[FloatArray, FloatArray]:
    """Percentile interval of φ_C over bootstrap replicates of v_C, on the family's scale.

    replicate_values: (n_replicates, n_coalitions); replicates the family refused (NaN rows)
    are left out. The design is linear, so each replicate's φ_C is one more application.
    """
    replicates = _replicate_attributions(design, replicate_values, level)
    tail = (1 - level) / 2
    low, high = np.quantile(replicates, [tail, 1 - tail], axis=0)
    return low, high


def background_interval(design: Design, replicate_values: FloatArray, estimate: FloatArray,
                        level: float = 0.9) -> tuple[FloatArray, FloatArray]:
    """φ_C's interval over redrawn backgrounds, on the family's scale.

    replicate_values: (n_replicates, n_coalitions) v_C, each on a background drawn afresh the
    way the run's own was; estimate: the run's φ_C. Redrawn backgrounds scatter about the
    value the background stands for, not about this run's draw, so their percentiles are not
    an interval around `estimate`: the interval is the estimate minus the replicates' spread
    about their mean, [φ̂ − (q_hi − mean), φ̂ − (q_lo − mean)] (a pivot on the draw's error).
    """
    return pivot_interval(estimate, _replicate_attributions(design, replicate_values, level),
                          level)


def pivot_interval(estimate: FloatArray, replicates: FloatArray, level: float
                   ) -> tuple[FloatArray, FloatArray]:
    """[φ̂ − (q_hi − mean), φ̂ − (q_lo − mean)] over the replicates' first axis (NaN replicates
    of an entry are left out of it)."""
    tail = (1 - level) / 2
    low_q, high_q = np.nanquantile(replicates, [tail, 1 - tail], axis=0)
    centre = np.nanmean(replicates, axis=0)
    return estimate - (high_q - centre), estimate - (low_q - centre)


def batch_standard_error(replicates: FloatArray) -> FloatArray:
    """sd / √k over the first axis: the standard error of an average of k batches' estimates
    (batch means), each entry over its finite batches (NaN where fewer than 2 are)."""
    finite = np.isfinite(replicates)
    k = finite.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(finite, replicates, 0.0).sum(axis=0) / k
        spread = np.where(finite, replicates - mean, 0.0)
        variance = (spread ** 2).sum(axis=0) / (k - 1)
        return np.where(k >= 2, np.sqrt(variance / k), np.nan)


def _replicate_attributions(design: Design, replicate_values: FloatArray, level: float
                            ) -> FloatArray:
    """φ_C of each usable replicate: replicates the family refused (NaN rows) are left out."""
    if not 0 < level < 1:
        raise ValueError(f"the interval level must lie strictly between 0 and 1, not {level}")
    kept = replicate_values[np.isfinite(replicate_values).all(axis=1)]
    if len(kept) < 2:
        raise ValueError("too few bootstrap replicates gave a usable calibration quantile")
    return design.apply(kept)


def decompose(design: Design, calibration_values: FloatArray, instance_values: FloatArray | None,
              scale: Scale, units: Units, features: tuple[str, ...],
              calibration: tuple[FloatArray, FloatArray | None] | None = None,
              interval: tuple[FloatArray, FloatArray, float] | None = None,
              fixed_quantile: bool = False,
              background: tuple[FloatArray, FloatArray, float] | None = None,
              instance_replicates: FloatArray | None = None,
              batches: tuple[FloatArray, FloatArray] | None = None,
              instance_shapley: tuple[FloatArray, FloatArray, FloatArray] | None = None
              ) -> Decomposition:
    """Apply one design to the three games and express the result in `units`.

    calibration_values: (n_coalitions,); instance_values: (n_patients, n_coalitions);
    calibration: `calibration_attribution(design, calibration_values)` when already known;
    interval: φ_C's bootstrap interval (low, high on the family's scale, level), if any;
    fixed_quantile: also the Shapley values of the width at a fixed q̂ (see Decomposition);
    background: φ_C's interval over redrawn backgrounds (low, high, level), if any;
    instance_replicates: (n_replicates, n_patients, n_players) φ_I on those backgrounds, on the
    family's scale (NaN where a draw was refused), for φ_I's background interval;
    batches: φ_C (n_batches, n_players) and φ_I (n_batches, n_patients, n_players) on the
    family's scale, each computed on one batch of the background (NaN where the family refused
    a batch), for the background's Monte Carlo standard errors;
    instance_shapley: (φ_I, v_I(all players), v_I(no player)) when φ_I was computed without
    v_I on the coalitions (core.games.instance.instance_shapley; exact Shapley only), with
    instance_values None.
    """
    if calibration is None:
        calibration = calibration_attribution(design, calibration_values)
    if instance_shapley is not None:
        if design.sampled or (fixed_quantile and scale != "identity"):
            raise ValueError("φ_I without v_I needs an exact design, and the identity scale "
                             "for the fixed-q̂ view")
        phi_i, instance_full, instance_empty = instance_shapley
        # The design is linear: φ of v_C + v_I is φ_C + φ_I.
        phi_t = calibration[0][None, :] + phi_i
    else:
        if instance_values is None:
            raise ValueError("decompose needs v_I on the coalitions or φ_I")
        # φ_I and φ_T in one pass over the games; v_T = v_C + v_I is formed inside, elementwise.
        phi_i, phi_t = design.apply_offset(calibration_values, instance_values)
        instance_full = instance_values[:, design.full_index]
        instance_empty = instance_values[:, design.empty_index]
    n_patients = len(phi_i)
    phi_c = np.tile(calibration[0], (n_patients, 1))
    bounds = (None if interval is None
              else [np.tile(interval[0], (n_patients, 1)), np.tile(interval[1], (n_patients, 1))])
    redrawn = (None if background is None else
               [np.tile(background[0], (n_patients, 1)), np.tile(background[1], (n_patients, 1))])
    instance_bounds = None
    if instance_replicates is not None and background is not None:
        instance_bounds = list(pivot_interval(phi_i, instance_replicates, background[2]))
    batch_errors: list[FloatArray | None] = [None, None, None]
    if batches is not None:
        batch_c, batch_i = batches
        batch_errors = [np.tile(batch_standard_error(batch_c), (n_patients, 1)),
                        batch_standard_error(batch_i),
                        batch_standard_error(batch_c[:, None, :] + batch_i)]
    errors: list[FloatArray | None] = [None, None, None]
    if design.sampled and instance_values is not None:
        total_values = calibration_values[None, :] + instance_values
        errors = [None if calibration[1] is None else np.tile(calibration[1], (n_patients, 1)),
                  design.standard_errors(instance_values), design.standard_errors(total_values)]
    fixed = None
    if fixed_quantile and instance_values is None:
        # identity scale (checked above): v_F = A(q̂) + v_I, and a constant has no Shapley share
        fixed = phi_i.copy()
    elif fixed_quantile and instance_values is not None:
        # v_F(S) = T⁻¹(A(q̂) + B(h_S)): the instance game at the full model's q̂
        at_full_quantile = calibration_values[design.full_index] + instance_values
        fixed = design.apply(np.exp(at_full_quantile) if scale == "log" else at_full_quantile)
    full = calibration_values[design.full_index] + instance_full
    empty = float(calibration_values[design.empty_index]
                  + (instance_empty[0] if n_patients else 0.0))
    if scale == "log" and units == "width":
        width, base_width = np.exp(full), float(np.exp(empty))
        factor = logarithmic_mean_factor(width, base_width)[:, None]
        phi_c, phi_i, phi_t = phi_c * factor, phi_i * factor, phi_t * factor
        errors = [None if e is None else e * factor for e in errors]
        batch_errors = [None if e is None else e * factor for e in batch_errors]
        bounds = None if bounds is None else [b * factor for b in bounds]  # factor > 0
        redrawn = None if redrawn is None else [b * factor for b in redrawn]
        instance_bounds = None if instance_bounds is None else [b * factor
                                                                for b in instance_bounds]
        target = width - base_width
    else:
        width = np.exp(full) if scale == "log" else full
        target = full - empty
    additivity = np.abs(phi_t - phi_c - phi_i)
    relative = additivity / np.maximum(np.abs(width), np.finfo(float).tiny)[:, None]
    if relative.size and relative.max() > ADDITIVITY_TOLERANCE:
        raise AdditivityError(
            f"additivity error {additivity.max():.3g} exceeds {ADDITIVITY_TOLERANCE:g} of the width"
        )
    efficiency = np.abs(phi_t.sum(axis=1) - target)
    return Decomposition(
        features=features, calibration=phi_c, instance=phi_i, total=phi_t, units=units,
        full_value=full, empty_value=empty,
        additivity_error=float(additivity.max()) if additivity.size else 0.0,
        efficiency_error=float(efficiency.max()) if efficiency.size else 0.0,
        efficient=design.efficient,
        calibration_se=errors[0], instance_se=errors[1], total_se=errors[2],
        calibration_low=None if bounds is None else bounds[0],
        calibration_high=None if bounds is None else bounds[1],
        calibration_level=None if interval is None else interval[2],
        background_low=None if redrawn is None else redrawn[0],
        background_high=None if redrawn is None else redrawn[1],
        background_level=None if background is None else background[2],
        instance_background_low=None if instance_bounds is None else instance_bounds[0],
        instance_background_high=None if instance_bounds is None else instance_bounds[1],
        calibration_background_se=batch_errors[0], instance_background_se=batch_errors[1],
        total_background_se=batch_errors[2],
        scale=scale,
        fixed_quantile=fixed,
    )

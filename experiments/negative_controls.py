"""Negative controls for the identity: cases where φ_T = φ_C + φ_I must visibly fail.

The identity rests on two things: an attribution operator linear in the game, and a separable
family (a calibration-only term plus an instance-only term on the family's scale). Break
either and the split stops adding up; these controls show by how much, on the same data and
the same fitted components as the identity grid.

* proportional — a non-linear operator: φ_j = w_j / Σ_k w_k · (v(N) − v(∅)) with the
  stand-alone gains w_j = v({j}) − v(∅), applied to each game separately. It is efficient
  game by game, yet the ratio makes φ(v_C + v_I) ≠ φ(v_C) + φ(v_I).
* mondrian — group-conditional (Mondrian) normalized CP: the quantile is taken within the
  patient's group, so the width's calibration term depends on the patient. The closest
  two-game split (the pooled calibration game and the instance game) no longer adds up to the
  total game, whatever linear operator is used (exact Shapley here).
* clipped — normalized intervals clipped at a maximum width (the median patient width):
  T(U) = min(ln 2q̂σ, ln cap) is not a sum of a calibration and an instance term.

Errors are in log-width units for the log-scale constructions (≈ relative width error) and
divided by the patient's width for the identity-scale one, like the grid's relative errors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cpdecomp.core.attribution import build_design
from cpdecomp.core.conformal import conformal_rank
from cpdecomp.core.games import instance_values
from cpdecomp.core.typing import Coalitions, FloatArray
from cpdecomp.core.workflow import Study

GROUP_FEATURES = {"diabetes": "sex", "actg175": "symptomatic", "rand_hie": "female"}
"""The Mondrian control's grouping feature per data set (a binary column)."""


@dataclass(frozen=True)
class ControlResult:
    """How far one negative control is from the identity."""

    control: str
    family: str
    description: str
    max_error: float
    """max over patients and features of |φ_T − φ_C − φ_I| (relative, see module doc)."""
    median_error: float
    share_failing: float
    """Share of patients whose largest error exceeds 1e-8 (the engine's refusal threshold)."""


def proportional(values: FloatArray, coalitions: Coalitions) -> FloatArray:
    """φ_j = w_j/Σw · (v(N) − v(∅)), w_j = v({j}) − v(∅); values (..., n_coalitions)."""
    values = np.asarray(values, dtype=float)
    sizes = coalitions.sum(axis=1)
    empty = int(np.flatnonzero(sizes == 0)[0])
    full = int(np.flatnonzero(sizes == coalitions.shape[1])[0])
    singles = [int(np.flatnonzero((sizes == 1) & coalitions[:, j])[0])
               for j in range(coalitions.shape[1])]
    gains = values[..., singles] - values[..., [empty]]
    total = gains.sum(axis=-1, keepdims=True)
    # An all-zero game (the absolute family's instance game) has nothing to share.
    safe = np.where(np.abs(total) > 1e-300, total, 1.0)
    shares = np.where(np.abs(total) > 1e-300, gains / safe, 0.0)
    return shares * (values[..., [full]] - values[..., [empty]])


def minimal_coalitions(n_players: int) -> Coalitions:
    """The empty coalition, every singleton and the full coalition."""
    return np.vstack([np.zeros(n_players, dtype=bool), np.eye(n_players, dtype=bool),
                      np.ones(n_players, dtype=bool)])


def _masked_scores(study: Study, coalitions: Coalitions) -> FloatArray:
    """(n_coalitions, n_calibration) conformity scores with masked components."""
    system = study.system
    tables = study.explainer.evaluator.evaluate(coalitions, system.calibration_rows,
                                                system.family.components)
    return system.family.scores(system.calibration_targets[None, :], tables)


def _kth(scores: FloatArray, alpha: float) -> FloatArray:
    k = conformal_rank(scores.shape[-1], alpha)
    return np.sort(scores, axis=-1)[..., k - 1]


def _summary(name: str, family: str, description: str, errors: FloatArray) -> ControlResult:
    per_patient = errors.max(axis=1)
    return ControlResult(name, family, description, float(per_patient.max()),
                         float(np.median(per_patient)), float(np.mean(per_patient > 1e-8)))


def proportional_control(study: Study, rows: FloatArray, alpha: float) -> ControlResult:
    """The non-linear operator on the separable family the study was fitted with."""
    family = study.system.family
    coalitions = minimal_coalitions(rows.shape[1])
    v_c = family.calibration_value(_kth(_masked_scores(study, coalitions), alpha))
    v_i = instance_values(family, study.explainer.evaluator, rows, coalitions)
    v_t = v_c[None, :] + v_i
    phi_c = proportional(np.broadcast_to(v_c, v_i.shape), coalitions)
    errors = np.abs(proportional(v_t, coalitions) - phi_c - proportional(v_i, coalitions))
    if family.scale != "log":
        width = v_t[:, -1]
        errors = errors / np.abs(width)[:, None]
    return _summary("proportional (non-linear operator)", family.name,
                    "stand-alone-share attribution applied to each game", errors)


def mondrian_control(study: Study, rows: FloatArray, alpha: float, group: str) -> ControlResult:
    """Group-conditional quantiles on a normalized study (exact Shapley on all three games)."""
    system = study.system
    family = system.family
    column = list(system.feature_names).index(group)
    design = build_design("exact", rows.shape[1])
    coalitions = design.coalitions
    scores = _masked_scores(study, coalitions)
    calibration_groups = system.calibration_rows[:, column]
    v_pooled = family.calibration_value(_kth(scores, alpha))
    v_group = {g: family.calibration_value(_kth(scores[:, calibration_groups == g], alpha))
               for g in np.unique(calibration_groups)}
    v_i = instance_values(family, study.explainer.evaluator, rows, coalitions)
    # The patient's group is a property of the patient, not a masked feature value.
    v_t = np.stack([v_group[g] for g in rows[:, column]]) + v_i
    phi_t, phi_c, phi_i = design.apply(v_t), design.apply(v_pooled), design.apply(v_i)
    errors = np.abs(phi_t - phi_c[None, :] - phi_i)
    return _summary("mondrian (non-separable family)", family.name,
                    f"quantile within groups of {group!r}", errors)


def clipped_control(study: Study, rows: FloatArray, alpha: float) -> ControlResult:
    """Normalized intervals clipped at the median patient width (exact Shapley)."""
    family = study.system.family
    design = build_design("exact", rows.shape[1])
    coalitions = design.coalitions
    v_c = family.calibration_value(_kth(_masked_scores(study, coalitions), alpha))
    v_i = instance_values(family, study.explainer.evaluator, rows, coalitions)
    separable = v_c[None, :] + v_i
    cap = float(np.median(separable[:, design.full_index]))
    v_t = np.minimum(separable, cap)
    errors = np.abs(design.apply(v_t) - design.apply(v_c)[None, :] - design.apply(v_i))
    return _summary("clipped (non-separable family)", family.name,
                    "width capped at the median patient width", errors)

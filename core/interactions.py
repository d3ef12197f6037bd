"""Pairwise interaction values of the calibration, instance and total games, per patient.

    interactions = study.interactions(alpha=0.1, index="SII")
    interactions.total            # (patients, d, d), symmetric, φ (or main effects) on the diagonal
    interactions.to_frame()       # one row per patient and pair
    interactions.strongest()      # pairs by mean |interaction| over the patients

The games are those the exact method evaluates: the calibration game comes from the
explainer's cache (computed once for the cohort), the instance game is evaluated on all 2^d
coalitions per patient, chunk by chunk. The indices are linear in the game, so I_T = I_C + I_I
pair by pair, checked on every result like φ_T = φ_C + φ_I (the maths and the matrix
convention: core/attribution/interactions.py). Values are on the family's scale; in width
units a log family's three views are multiplied by the patient's logarithmic-mean factor, as
its Shapley values are (method page §6): the split stays exact and k-SII adds up to
width − base width.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from cpdecomp.core.attribution.base import Design
from cpdecomp.core.attribution.interactions import (
    InteractionIndex,
    check_index,
    interaction_matrices,
    lattice_order,
    pairs,
    pairwise_sii,
)
from cpdecomp.core.conformal import Family
from cpdecomp.core.decomposition import (
    ADDITIVITY_TOLERANCE,
    AdditivityError,
    Units,
    logarithmic_mean_factor,
)
from cpdecomp.core.games import MaskedEvaluator, instance_values
from cpdecomp.core.typing import FloatArray

CELLS_PER_CHUNK = 1 << 20
"""(patients × coalitions) instance values evaluated at once, as the explainer's chunks."""
VIEWS = ("calibration", "instance", "total")


@dataclass(frozen=True, eq=False)
class Interactions:
    """Interaction matrices (patients, d, d) of the three games under one configuration."""

    players: tuple[str, ...]
    """Features, or 'a + b' for a feature group."""
    index: InteractionIndex
    calibration: FloatArray
    instance: FloatArray
    total: FloatArray
    units: Units
    alpha: float
    family: str
    additivity_error: float
    """max |I_T − I_C − I_I| over patients and matrix cells, in `units`."""
    efficiency_error: float | None
    """k-SII only: max over patients of |Σ main effects + Σ pairs − (v_T(N) − v_T(∅))|, the
    gap in `units` (width − base width in width units); None for SII, which is not efficient."""
    patient_ids: list | None = None

    def pair_values(self, view: str) -> FloatArray:
        """(patients, n_pairs) values of the pairs i < j of one view, in `pair_names` order."""
        first, second = pairs(len(self.players))
        return getattr(self, _view(view))[:, first, second]

    @property
    def pair_names(self) -> list[tuple[str, str]]:
        first, second = pairs(len(self.players))
        return [(self.players[i], self.players[j]) for i, j in zip(first, second, strict=True)]

    def to_frame(self) -> pd.DataFrame:
        """One row per patient and pair (feature_a before feature_b in the features' order),
        with the three views as columns, like Report.to_frame's long layout."""
        n_patients = len(self.total)
        names = self.pair_names
        ids = self.patient_ids if self.patient_ids is not None else list(range(n_patients))
        return pd.DataFrame({
            "patient_id": np.repeat(np.array(ids, dtype=object), len(names)),
            "feature_a": np.tile(np.array([a for a, _ in names], dtype=object), n_patients),
            "feature_b": np.tile(np.array([b for _, b in names], dtype=object), n_patients),
            **{view: self.pair_values(view).ravel() for view in VIEWS},
        })

    def strongest(self, top: int | None = None) -> pd.DataFrame:
        """Pairs by mean |interaction| over the patients, per view, strongest total first."""
        names = self.pair_names
        table = pd.DataFrame({
            "feature_a": [a for a, _ in names], "feature_b": [b for _, b in names],
            **{view: np.abs(self.pair_values(view)).mean(axis=0) for view in VIEWS},
        })
        table = table.sort_values("total", ascending=False, kind="stable").reset_index(drop=True)
        return table if top is None else table.head(top)


def _view(view: str) -> str:
    if view not in VIEWS:
        raise ValueError(f"view must be one of {', '.join(VIEWS)}, not {view!r}")
    return view


@dataclass(frozen=True)
class LatticeGames:
    """What the interactions need of an explainer's configuration (its PatientGames)."""

    family: Family
    evaluator: MaskedEvaluator
    design: Design
    """The exact design: every coalition of the players."""
    calibration_values: FloatArray
    calibration_shapley: FloatArray
    """φ_C on the family's scale: the calibration view's diagonal."""
    units: Units
    players: tuple[str, ...]
    alpha: float


def lattice_interactions(games: LatticeGames, rows: FloatArray, index: str,
                         chunk_size: int | None = None) -> Interactions:
    """Interactions of encoded patient rows on `games`."""
    chosen = check_index(index)
    design = games.design
    d = design.n_players
    # The players' own coalitions: one column per player (a group's columns move together).
    player_coalitions = (design.coalitions if design.groups is None
                         else design.coalitions[:, [group[0] for group in design.groups]])
    order = lattice_order(player_coalitions)
    v_c = games.calibration_values
    calibration = interaction_matrices(pairwise_sii(v_c[order]), games.calibration_shapley, chosen)
    width_units = games.family.scale == "log" and games.units == "width"
    if chunk_size is None:
        chunk_size = max(1, CELLS_PER_CHUNK // len(design.coalitions))
    parts: list[tuple[FloatArray, ...]] = []
    for start in range(0, len(rows), chunk_size):
        chunk = rows[start:start + chunk_size]
        v_i = instance_values(games.family, games.evaluator, chunk, design.coalitions)
        v_t = v_c[None, :] + v_i
        phi_i, phi_t = design.apply_offset(v_c, v_i)  # the diagonals: the exact Shapley values
        views = [np.broadcast_to(calibration, (len(chunk), d, d)),
                 interaction_matrices(pairwise_sii(v_i[:, order]), phi_i, chosen),
                 interaction_matrices(pairwise_sii(v_t[:, order]), phi_t, chosen)]
        full, empty = v_t[:, design.full_index], v_t[:, design.empty_index]
        gap = full - empty
        width = np.exp(full) if games.family.scale == "log" else full
        if width_units:
            # As for the Shapley values (method page §6): one positive factor per patient on
            # all three views, so the split stays exact and k-SII sums to the width gap.
            factor = logarithmic_mean_factor(width, float(np.exp(empty[0])))
            views = [view * factor[:, None, None] for view in views]
            gap = width - np.exp(empty)
        parts.append((np.array(views[0]), views[1], views[2], gap, width))
    calibration_all, instance, total, gap, width = (np.concatenate([p[k] for p in parts])
                                                    for k in range(5))
    # The engine's rule for φ (core/decomposition.py): a split off by more than a tiny share
    # of the patient's width is a bug, never a result.
    additivity = np.abs(total - calibration_all - instance).max(axis=(1, 2))
    relative = additivity / np.maximum(np.abs(width), np.finfo(float).tiny)
    if relative.size and relative.max() > ADDITIVITY_TOLERANCE:
        raise AdditivityError(f"interaction additivity error {additivity.max():.3g} exceeds "
                              f"{ADDITIVITY_TOLERANCE:g} of the width")
    efficiency = None
    if chosen == "k-SII":
        first, second = pairs(d)
        sums = np.trace(total, axis1=1, axis2=2) + total[:, first, second].sum(axis=1)
        efficiency = float(np.abs(sums - gap).max(initial=0.0))
    return Interactions(games.players, chosen, calibration_all, instance, total, games.units,
                        games.alpha, games.family.name, float(additivity.max(initial=0.0)),
                        efficiency)

"""The instance game v_I(S; x) = B(h_S(x)) at each patient."""

from __future__ import annotations

import numpy as np

from cpdecomp.core.attribution.base import Design
from cpdecomp.core.conformal import Family
from cpdecomp.core.games.base import Game, GameKind
from cpdecomp.core.games.masking import MaskedEvaluator
from cpdecomp.core.progress import advance
from cpdecomp.core.typing import Coalitions, FloatArray

INSTANCE_GAME = GameKind("instance", "Instance game", "v_I", per_patient=True, uses_alpha=False)


def instance_values(family: Family, evaluator: MaskedEvaluator, patients: FloatArray,
                    coalitions: Coalitions) -> FloatArray:
    """(n_patients, n_coalitions) values of the instance game."""
    if not family.instance_components:
        return np.zeros((len(patients), len(coalitions)))
    # Patients × coalitions throughout: the families answer elementwise, whatever the layout.
    tables = evaluator.evaluate_by_row(coalitions, patients, family.instance_components)
    family.check_components(tables, "masked patient row")
    return np.asarray(family.instance_value(tables), dtype=float)


GROUP_SHAPLEY_PLAYERS = 10
"""From this many features on, exact Shapley values of a linear instance game come from the
tree tables' groups (TreeTables.shapley), not from the 2^d lattice and the Shapley sum over it.
The lattice path costs ~d 2^d per patient, the groups' path does not grow with d. Measured per
patient (CQR on two XGBoost models of 100 trees of depth 4, B = 100, CPU time, both paths in
one process): level at d = 6 and 8 (0.27–0.31 ms), the groups' path 1.5–2 times faster at
d = 10–12 and ~8 times at d = 16 (benchmarks/user_models.py)."""


def instance_shapley(family: Family, evaluator: MaskedEvaluator, patients: FloatArray,
                     design: Design, fixed_quantile: bool = False
                     ) -> tuple[FloatArray, FloatArray, FloatArray] | None:
    """(φ_I (n_patients, n_players), v_I(all players), v_I(no player)) without evaluating v_I
    on the design's coalitions, or None where that does not apply.

    It applies to the exact Shapley design over the columns themselves (no groups) from
    GROUP_SHAPLEY_PLAYERS features on, for a family whose B(h) is a linear combination of its
    components (`instance_coefficients`, CQR's hi − lo) when each component is a tree
    ensemble with no link: the Shapley value is linear in the game, so φ_I is the same
    combination of the components' exact Shapley values. With `fixed_quantile` (the
    comparator view, Decomposition.fixed_quantile) it applies on the identity scale only,
    where that view's game is v_I plus a constant and so has φ_I's Shapley values.
    """
    coefficients: dict[str, float] | None = getattr(family, "instance_coefficients", None)
    if (coefficients is None or design.method != "exact" or design.groups is not None
            or design.sampled or design.n_players < GROUP_SHAPLEY_PLAYERS
            or design.coalitions.shape[1] != evaluator.n_columns
            or (fixed_quantile and family.scale != "identity")):
        return None
    parts = evaluator.shapley_by_row(patients, tuple(coefficients))
    if parts is None:
        return None
    family.check_components({name: parts[name][1] for name in coefficients}, "patient row")
    family.check_components({name: parts[name][2] for name in coefficients},
                            "masked patient row")
    phi = sum(c * parts[name][0] for name, c in coefficients.items())
    at_all = sum(c * parts[name][1] for name, c in coefficients.items())
    at_none = sum(c * parts[name][2] for name, c in coefficients.items())
    advance(len(design.coalitions) * len(patients))  # the cells the lattice would have ticked
    return (np.asarray(phi, dtype=float), np.asarray(at_all, dtype=float),
            np.asarray(at_none, dtype=float))


class InstanceGame(Game):
    """v_I for a batch of patients on every coalition of a design.

    A `Game` (core.games.base) like the calibration game; explaining calls instance_values
    directly per chunk, which is what `compute` keeps.
    """

    kind = INSTANCE_GAME

    def __init__(self, family: Family, coalitions: Coalitions, patient_values: FloatArray
                 ) -> None:
        self.family = family
        self.coalitions = np.asarray(coalitions, dtype=bool)
        self.patient_values = patient_values
        """(n_patients, n_coalitions) v_I on the family's scale."""

    @classmethod
    def compute(cls, family: Family, evaluator: MaskedEvaluator, patients: FloatArray,
                coalitions: Coalitions) -> InstanceGame:
        """Mask the family's instance components at every patient and coalition."""
        return cls(family, coalitions, instance_values(family, evaluator, patients, coalitions))

    def values(self, alpha: float | None = None) -> FloatArray:
        """v_I(S; x) for every patient and coalition; alpha does not enter it."""
        return self.patient_values

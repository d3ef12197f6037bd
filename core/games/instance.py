"""The instance game v_I(S; x) = B(h_S(x)) at each patient."""

from __future__ import annotations

import numpy as np

from cpdecomp.core.conformal import Family
from cpdecomp.core.games.base import Game, GameKind
from cpdecomp.core.games.masking import MaskedEvaluator
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

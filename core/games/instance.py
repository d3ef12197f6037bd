"""The instance game v_I(S; x) = B(h_S(x)) at each patient."""

from __future__ import annotations

import numpy as np

from core.conformal import Family
from core.games.masking import MaskedEvaluator
from core.typing import Coalitions, FloatArray


def instance_values(family: Family, evaluator: MaskedEvaluator, patients: FloatArray,
                    coalitions: Coalitions) -> FloatArray:
    """(n_patients, n_coalitions) values of the instance game."""
    if not family.instance_components:
        return np.zeros((len(patients), len(coalitions)))
    # Patients × coalitions throughout: the families answer elementwise, whatever the layout.
    tables = evaluator.evaluate_by_row(coalitions, patients, family.instance_components)
    family.check_components(tables, "masked patient row")
    return np.asarray(family.instance_value(tables), dtype=float)

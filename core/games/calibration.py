"""The calibration game v_C(S) = A(conformal quantile of all n masked calibration scores).

It does not depend on the patient: built once per (system, background, design) and reused for
every patient. The masked scores are kept sorted per coalition, so a change of alpha is an index
lookup, with no model call.
"""

from __future__ import annotations

import numpy as np

from core.conformal import Family, conformal_rank
from core.games.masking import MaskedEvaluator
from core.typing import Coalitions, FloatArray

CELLS_PER_CHUNK = 1 << 20
"""(calibration rows × coalitions) masked at once: 8 MiB per component (256 rows at d = 12)."""


class CalibrationGame:
    """Sorted masked calibration scores (n_coalitions, n) for every coalition of a design."""

    def __init__(self, family: Family, coalitions: Coalitions, sorted_scores: FloatArray) -> None:
        self.family = family
        self.coalitions = np.asarray(coalitions, dtype=bool)
        self.sorted_scores = sorted_scores
        self.n_calibration = sorted_scores.shape[1]

    @classmethod
    def compute(cls, family: Family, evaluator: MaskedEvaluator, calibration_rows: FloatArray,
                calibration_targets: FloatArray, coalitions: Coalitions) -> CalibrationGame:
        """Mask every component on every calibration row, score, and sort per coalition.

        Rows go in chunks: only the sorted scores (n_coalitions × n) and one chunk's masked
        components are alive at once. Tables give a chunk as rows × coalitions (the families
        answer elementwise); its scores are written straight into the coalitions' rows.
        """
        coalitions = np.asarray(coalitions, dtype=bool)
        rows = np.asarray(calibration_rows, dtype=float)
        targets = np.asarray(calibration_targets, dtype=float)
        by_coalition = np.empty((len(coalitions), len(rows)))
        step = max(1, CELLS_PER_CHUNK // max(len(coalitions), 1))
        for start in range(0, len(rows), step):
            stop = start + step
            tables = evaluator.evaluate_by_row(coalitions, rows[start:stop], family.components)
            family.check_components(tables, "masked calibration row")
            by_coalition[:, start:stop] = family.scores(targets[start:stop, None], tables).T
        by_coalition.sort(axis=1)
        return cls(family, coalitions, by_coalition)

    def quantiles(self, alpha: float) -> FloatArray:
        """q_S for every coalition: the k-th smallest masked score, same k for every S."""
        k = conformal_rank(self.n_calibration, alpha)
        return self.sorted_scores[:, k - 1]

    def values(self, alpha: float) -> FloatArray:
        """v_C(S) = A(q_S) for every coalition, on the family's scale."""
        q = self.quantiles(alpha)
        self.family.check_quantile(q, "coalition's calibration quantile")
        return self.family.calibration_value(q)

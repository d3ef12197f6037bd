"""The calibration game v_C(S) = A(conformal quantile of all n masked calibration scores).

It does not depend on the patient: built once per (system, background, design) and reused for
every patient. The masked scores are kept sorted per coalition, so a change of alpha is an index
lookup, with no model call. With the calibration row behind each sorted score kept as well, a
bootstrap replicate of the calibration set is a re-weighting of the sorted scores and a walk to
the k-th weighted score, again with no model call.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from cpdecomp.core.cancel import checkpoint
from cpdecomp.core.conformal import Family, conformal_rank
from cpdecomp.core.games.base import Game, GameKind
from cpdecomp.core.games.masking import MaskedEvaluator
from cpdecomp.core.parallel import parallel_section
from cpdecomp.core.typing import Coalitions, FloatArray

CELLS_PER_CHUNK = 1 << 20
"""(calibration rows × coalitions) masked at once: 8 MiB per component (256 rows at d = 12)."""
BOOTSTRAP_STREAM = 3
"""Seed stream of the calibration bootstrap, apart from the split's, background's and design's."""


CALIBRATION_GAME = GameKind("calibration", "Calibration game", "v_C", per_patient=False,
                            uses_alpha=True)


class CalibrationGame(Game):
    """Sorted masked calibration scores (n_coalitions, n) for every coalition of a design.

    A `Game` (core.games.base): values(alpha) is v_C on the family's scale.
    """

    kind = CALIBRATION_GAME

    def __init__(self, family: Family, coalitions: Coalitions, sorted_scores: FloatArray,
                 order: np.ndarray | None = None) -> None:
        self.family = family
        self.coalitions = np.asarray(coalitions, dtype=bool)
        self.sorted_scores = sorted_scores
        self.order = order
        """(n_coalitions, n) calibration row of each sorted score, when kept (for bootstraps)."""
        self.n_calibration = sorted_scores.shape[1]

    @classmethod
    def compute(cls, family: Family, evaluator: MaskedEvaluator, calibration_rows: FloatArray,
                calibration_targets: FloatArray, coalitions: Coalitions,
                keep_order: bool = False) -> CalibrationGame:
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
            checkpoint()
            stop = start + step
            tables = evaluator.evaluate_by_row(coalitions, rows[start:stop], family.components)
            family.check_components(tables, "masked calibration row")
            by_coalition[:, start:stop] = family.scores(targets[start:stop, None], tables).T
        if not keep_order:
            by_coalition.sort(axis=1)
            return cls(family, coalitions, by_coalition)
        order = np.argsort(by_coalition, axis=1, kind="stable").astype(np.int32)
        return cls(family, coalitions, np.take_along_axis(by_coalition, order, axis=1), order)

    def quantiles(self, alpha: float) -> FloatArray:
        """q_S for every coalition: the k-th smallest masked score, same k for every S."""
        k = conformal_rank(self.n_calibration, alpha)
        return self.sorted_scores[:, k - 1]

    def values(self, alpha: float) -> FloatArray:
        """v_C(S) = A(q_S) for every coalition, on the family's scale."""
        q = self.quantiles(alpha)
        self.family.check_quantile(q, "coalition's calibration quantile")
        return self.family.calibration_value(q)

    def bootstrap_values(self, alpha: float, n_replicates: int, seed: int = 0,
                         stream: int = 0) -> FloatArray:
        """(n_replicates, n_coalitions) v_C on calibration sets resampled with replacement.

        Replicate r gives calibration row i a count c_ri (multinomial, Σ c_ri = n); each
        coalition's quantile is then the k-th smallest score of the weighted set, found by
        walking its sorted scores from the top until n − k + 1 counts are passed (about nα
        steps). Replicates whose quantile the family refuses (q ≤ 0 on a log scale) are NaN.

        stream: which of the seed's independent resampling streams to draw from. Two sets of
        the same size on the same seed and stream get the same counts, so sets compared with
        each other (core.recalibration) each take their own; stream 0 is the one a single
        set's interval (Explainer.calibration_bootstrap) has always used.
        """
        if self.order is None:
            raise ValueError("the game was kept without its row order; compute it with "
                             "keep_order=True to bootstrap it")
        if n_replicates < 1:
            raise ValueError("a bootstrap needs at least one replicate")
        k = conformal_rank(self.n_calibration, alpha)
        if stream < 0:
            raise ValueError(f"a bootstrap stream is a whole number >= 0, not {stream}")
        # Stream 0 keeps the seed sequence it always had, so existing intervals do not move.
        rng = np.random.default_rng((seed, BOOTSTRAP_STREAM) if stream == 0
                                    else (seed, BOOTSTRAP_STREAM, stream))
        n = self.n_calibration
        counts = rng.multinomial(n, np.full(n, 1.0 / n), size=n_replicates).astype(np.int32)
        with parallel_section():
            quantiles = _weighted_order_statistics(self.sorted_scores, self.order, counts, k)
        with np.errstate(divide="ignore", invalid="ignore"):
            values = np.asarray(self.family.calibration_value(quantiles), dtype=float)
        values[~np.isfinite(values).all(axis=1)] = np.nan
        return values


@njit(cache=True, parallel=True)
def _weighted_order_statistics(sorted_scores, order, counts, k):
    """out[r, c]: the k-th smallest score of coalition c when row i counts counts[r, i] times."""
    n_coalitions, n = sorted_scores.shape
    n_replicates = counts.shape[0]
    need = n - k + 1  # the k-th smallest of n is the (n − k + 1)-th largest
    out = np.empty((n_replicates, n_coalitions))
    for c in prange(n_coalitions):
        for r in range(n_replicates):
            passed = 0
            position = n - 1
            while True:
                passed += counts[r, order[c, position]]
                if passed >= need or position == 0:
                    break
                position -= 1
            out[r, c] = sorted_scores[c, position]
    return out

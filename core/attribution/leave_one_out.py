"""Leave-one-out (occlusion): φ_j = v(N) − v(N ∖ {j}), what removing j alone changes.

Linear, symmetric, null players exactly 0; not efficient (interactions are counted by every
player they involve, or by none). d + 2 coalitions: N, each N ∖ {j}, and ∅ for the report.
"""

from __future__ import annotations

import numpy as np

from cpdecomp.core.attribution.terms import TermDesign, design_from_terms


def leave_one_out_design(n_players: int, budget: int | None = None,
                         seed: int = 0) -> TermDesign:
    """One term per player: the full coalition against the full coalition without it."""
    d = n_players
    full = np.ones((d, d), dtype=bool)
    return design_from_terms("leave-one-out", full, ~np.eye(d, dtype=bool), np.arange(d),
                             np.ones(d), efficient=False)

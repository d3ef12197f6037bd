"""Methods that are not linear in the game: refused by name, with the reason.

φ_T = φ_C + φ_I needs φ(v_C + v_I) = φ(v_C) + φ(v_I); each method here breaks it through a
ratio of the values or a selection that depends on them. Their implementations, and the measured
size of the gap, live with the studies (experiments/nonlinear.py), not in the library.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RefusedMethod:
    """A method the library refuses: its label and why it cannot be decomposed."""

    label: str
    reason: str


NOT_DECOMPOSABLE: dict[str, RefusedMethod] = {
    "proportional": RefusedMethod(
        "Proportional Shapley — not decomposable",
        "proportional Shapley splits each dividend in proportion to the game's own stand-alone "
        "values, a ratio of the values, so φ(v_C + v_I) ≠ φ(v_C) + φ(v_I)"),
    "kernel-l1": RefusedMethod(
        "KernelSHAP with L1 feature selection — not decomposable",
        "KernelSHAP with L1 selection picks different features for each game, so the "
        "calibration and instance attributions do not add up to the total; use kernel "
        "(l1_reg=False)"),
    "lime": RefusedMethod(
        "LIME with feature selection — not decomposable",
        "LIME's feature selection depends on the game's values, so the calibration and "
        "instance attributions do not add up to the total"),
}

"""A patient's case in one paragraph of plain words, generated from the numbers.

    "The interval is 7.9 days wider than for a patient about whom nothing is known (26 vs 18).
    Most of that comes from this patient's chf (+3.9: instance-driven +3.4; calibration-driven
    +0.5). bmi narrows it for this patient (−4.3) but widens it through the calibration set
    (+1.4): the total shows only −2.9."

"A patient about whom nothing is known" is the featureless width (every feature left out), the
number the Patient page shows as "featureless": not the cohort's median or any real patient.

Numbers are rounded for people at the featureless width's scale (`people_number`, the rule every
page uses); the text is plain (no Markdown), for `st.text`-like display
after `markdown_text`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cpdecomp.app.summaries import SIGN_CUT
from cpdecomp.app.text import people_number

NOTHING_KNOWN = "a patient about whom nothing is known"
"""The featureless width in plain words: every feature left out (not the cohort's median)."""


def patient_reading(features: Sequence[str], calibration: np.ndarray, instance: np.ndarray,
                    total: np.ndarray, width: float, base_width: float, *, unit: str = "",
                    has_instance_part: bool = True,
                    calibration_unsettled: np.ndarray | None = None,
                    instance_unsettled: np.ndarray | None = None,
                    reference_sample: bool = False) -> str:
    """One paragraph: how much wider (or narrower) than the featureless interval (a patient
    about whom nothing is known), which feature contributes most with each of its two parts,
    and a feature whose parts pull apart.
    Under a family without an instance-driven part (`has_instance_part` False) every patient
    has the same width: the paragraph says so and compares it with the model's width without
    features instead.

    All arrays are in width units, one entry per feature; `base_width` is the featureless width
    (what the interval would be knowing nothing about the patient). `calibration_unsettled`
    marks features whose calibration-driven part's interval holds 0: their calibration-driven
    direction is never stated as a fact; `instance_unsettled` marks instance-driven parts
    whose interval over redrawn backgrounds holds 0 (never named as pulling against the
    other part). `reference_sample`: the unsettled marks count the reference sample's
    (background's) error too, so the reading names it.
    """
    calibration, instance, total = (np.asarray(v, dtype=float) for v in
                                    (calibration, instance, total))
    unsettled = (np.zeros(len(calibration), bool) if calibration_unsettled is None
                 else np.asarray(calibration_unsettled, dtype=bool))
    instance_open = (np.zeros(len(instance), bool) if instance_unsettled is None
                     else np.asarray(instance_unsettled, dtype=bool))
    units = f" {unit}" if unit else ""

    def number(value: float, signed: bool = False) -> str:
        return people_number(value, base_width, signed)

    difference = float(width) - float(base_width)
    scale = max(float(np.max(np.abs(np.concatenate([calibration, instance, total])),
                             initial=0.0)), 1e-300)
    sentences = []
    about_equal = abs(difference) <= SIGN_CUT * max(abs(base_width), 1e-300)
    word = "wider" if difference > 0 else "narrower"
    if not has_instance_part:
        # Every patient's width is the same here, so "a patient about whom nothing is known"
        # would read as another patient: it is the width the model would have without any
        # feature.
        sentences.append(
            f"Under this conformal family the width is the same for every patient "
            f"({number(width)}{units}): it is set by the calibration set alone, and this "
            "patient's own values do not change it.")
        sentences.append(
            "It is about what it would be if the model used none of the features."
            if about_equal else
            f"It is {number(abs(difference))}{units} {word} than it would be if the model "
            f"used none of the features ({number(base_width)}{units}); the bars show which "
            "features make that difference, all of it through the calibration set.")
        sentences += _unsettled_sentence(features, unsettled, reference_sample)
        return " ".join(sentences)
    # The comparison is with the featureless width (base_width), never the cohort's median:
    # said as what it is, a patient about whom nothing is known.
    if about_equal:
        sentences.append(f"The interval is about as wide as for {NOTHING_KNOWN} "
                         f"({number(width)}{units}).")
    else:
        sentences.append(
            f"The interval is {number(abs(difference))}{units} {word} than for "
            f"{NOTHING_KNOWN} ({number(width)} vs {number(base_width)}{units}).")

    # The feature that moves the width most in the direction it moved.
    direction = 1.0 if difference >= 0 else -1.0
    candidates = np.flatnonzero(direction * total > SIGN_CUT * scale)
    if candidates.size:
        j = int(candidates[np.argmax(np.abs(total[candidates]))])
        # The total, then each part with its own number (the larger first): naming a part
        # beside the total read as if the part were that large.
        parts = [f"instance-driven {number(instance[j], signed=True)}",
                 f"calibration-driven {number(calibration[j], signed=True)}"
                 + (", direction not settled" if unsettled[j] else "")]
        if abs(calibration[j]) > abs(instance[j]):
            parts.reverse()
        lead = "Most of that" if abs(total[j]) >= 0.5 * abs(difference) else "The largest share"
        sentences.append(f"{lead} comes from this patient's {features[j]} "
                         f"({number(total[j], signed=True)}{units}: {'; '.join(parts)}).")

    # The feature whose two parts pull hardest against each other.
    opposed = np.flatnonzero((calibration * instance < 0) & ~unsettled & ~instance_open
                             & (np.minimum(np.abs(calibration), np.abs(instance))
                                > SIGN_CUT * scale))
    if opposed.size:
        k = int(opposed[np.argmax(np.minimum(np.abs(calibration[opposed]),
                                             np.abs(instance[opposed])))])
        own = "widens" if instance[k] > 0 else "narrows"
        through = "widens" if calibration[k] > 0 else "narrows"
        sentences.append(
            f"{features[k]} {own} it for this patient "
            f"({number(instance[k], signed=True)}) but {through} it through the "
            f"calibration set ({number(calibration[k], signed=True)}): the total shows "
            f"only {number(total[k], signed=True)}.")
    sentences += _unsettled_sentence(features, unsettled & (np.abs(calibration)
                                                            > SIGN_CUT * scale),
                                     reference_sample)
    return " ".join(sentences)


def _unsettled_sentence(features: Sequence[str], unsettled: np.ndarray,
                        reference_sample: bool = False) -> list[str]:
    """Name the features whose calibration-driven direction another calibration set (or,
    with `reference_sample`, another reference sample) could reverse (parts too small to
    matter are left out)."""
    names = [features[int(j)] for j in np.flatnonzero(unsettled)]
    if not names:
        return []
    listed = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return [f"Whether the calibration set makes {listed} widen or narrow the interval is not "
            f"settled ({'marked' if len(names) == 1 else 'each marked'} ?): another "
            "calibration set of the same size"
            + (", or another reference sample," if reference_sample else "")
            + " could reverse it."]

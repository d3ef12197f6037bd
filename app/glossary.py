"""Plain words for clinicians: the "How to read this" panel and the glossary.

The precise wording (games, coalitions, masking over a background) stays in the analyst's
details on the Cohort page and in docs/; here every term is said as a clinician would say it.
"""

from __future__ import annotations

import streamlit as st

from cpdecomp.app.charts import DISAGREE_MARK

HOW_TO_READ = f"""
**The interval** is the range the outcome is expected to fall in for this patient, for about
9 patients in 10 at the default setting (the confidence shown beside it). A wide interval means
the prediction is uncertain.

**Why is it wide?** The width is split, feature by feature, into two parts that add up to the
total:

* **Calibration-driven** (blue): how much a feature widens or narrows intervals through
  the calibration set, the patients whose prediction errors set the interval's size. *Example:
  if the model is often wrong for patients with a high bmi, bmi widens everyone's interval a
  little, whatever this patient's bmi.*
* **Instance-driven** (orange): how much this patient's own value of the feature widens
  or narrows their interval. *Example: this patient's chf = yes makes the model less sure
  about them.*
* **Total** (grey): the two added, which is what a usual explanation shows.

A calibration-driven part exists because the interval's size is learned from other patients'
errors: a feature can matter to the width through them even when it does not change this
patient's prediction.

**{DISAGREE_MARK}** marks a feature whose two parts pull in opposite directions: the total then
shows only what is left, and can hide a feature that matters.

**Featureless width**: the width of the interval for a patient about whom nothing is known
(every feature left out). Bars to the right of zero widen the interval compared with it, bars
to the left narrow it.
"""

GLOSSARY = {
    "Interval": "The range the outcome is expected to fall in, with the chosen confidence.",
    "Width": "Upper end minus lower end of the interval: how uncertain the prediction is.",
    "Confidence (1 − α)": "How often the interval contains the outcome over many patients, "
                          "e.g. 90 %.",
    "Calibration set": "Patients held aside whose prediction errors set the interval's size.",
    "Calibration-driven part": "What a feature does to the width through the calibration set; "
                               "the same for every patient in log units and in the absolute "
                               "and CQR families; in width units of the other families it is "
                               "scaled by each patient's width.",
    "Instance-driven part": "What this patient's own value of a feature does to the width.",
    "Total": "Calibration-driven + instance-driven: the usual single explanation.",
    "Featureless width": "The width for a patient about whom nothing is known.",
    DISAGREE_MARK: "The two parts of a feature point in opposite directions.",
    "Clipped (✂)": "The interval reaches values the outcome cannot take (e.g. a negative "
                   "length of stay); it is shown cut at the possible range.",
    "Conformal family": "How the interval's width is made: the same for everyone (absolute) "
                        "or following how hard each patient is to predict (the others).",
    "Background rows": "Training patients used to stand in for a feature that is left out.",
    "Reference sample": "Another name for the background rows. Drawn again, it would move "
                        "each part a little; the green band (an option on Setup) shows how "
                        "much.",
}


def how_to_read(expanded: bool = False) -> None:
    """The panel and the glossary, folded by default so the charts stay above the fold."""
    with st.expander("How to read this", expanded=expanded, icon=":material/help:"):
        st.markdown(HOW_TO_READ)
    with st.expander("Glossary", icon=":material/menu_book:"):
        for term, meaning in GLOSSARY.items():
            st.markdown(f"**{term}**: {meaning}")

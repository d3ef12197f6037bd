"""Patient: the interval, a plain reading, and the calibration-driven, instance-driven and total
bars side by side.

Every patient was explained by the run, so switching patient only indexes into the report; the
panel is a fragment, so a switch reruns the panel alone, and its figures are kept per patient.
Its charts are plain HTML and CSS (app/html_charts.py, through widgets.html_view): the browser
lays them out like text, with no chart library to run on a switch.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from cpdecomp.app import (
    auth,
    cases,
    charts,
    glossary,
    html_charts,
    state,
    summaries,
    whatif,
    widgets,
)
from cpdecomp.app.text import file_name_part, markdown_text, people_number
from cpdecomp.core.errors import CpdecompError

st.title("Patient")
results = widgets.require_results()
e = results.shown  # the run in the units on show: every array the page draws
width = state.results_in_width_units(results).shown  # for the reading, which speaks in widths
n = e.n
ranks = summaries.percentile_ranks(e.width)
positions = list(range(n))
state.ensure_choice("patient", positions, 0)
outcome = state.outcome_range(results.config)
shown_lower, shown_upper, clipped = outcome.clip(e.lower, e.upper)
unit = f" {outcome.unit}" if outcome.unit else ""
width_scale = e.base_width


def num(value: float, signed: bool = False) -> str:
    """A width, an interval end or a prediction, rounded at the featureless width's scale (the
    one rule every number on show follows)."""
    return people_number(value, width_scale, signed)


# The patient panel's subheading, naming the patient whose charts are below it. (A comment, not
# a docstring: Streamlit's magic would show a bare string of a page script on the page.)
HEADING = "Why is patient {}'s interval this wide?"


def step(offset: int) -> None:
    st.session_state["patient"] = (int(st.session_state["patient"]) + offset) % n


@st.fragment
def patient_panel() -> None:
    state.fragment_ran()  # its own rerun drops the other widgets' state (app.state)
    pick, back, forward = st.columns([6, 1.2, 1.2], vertical_alignment="bottom")
    position = pick.selectbox(
        "Patient", positions, key="patient",
        format_func=lambda i: f"{e.patient_ids[i]} · width {num(float(e.width[i]))} "
                              f"(percentile {ranks[i]:.0f})",
    )
    back.button("Previous", key="patient_previous", on_click=step, args=(-1,),
                icon=":material/arrow_back:", use_container_width=True)
    forward.button("Next", key="patient_next", on_click=step, args=(1,),
                   icon=":material/arrow_forward:", use_container_width=True)

    patient = str(e.patient_ids[position])
    cols = st.columns([1, 1.8, 1.4, 1])  # the interval needs room for two numbers
    cols[0].metric("Prediction", f"{num(e.prediction[position])}")
    interval = f"[{num(shown_lower[position])}, {num(shown_upper[position])}]"
    if clipped[position]:
        cols[1].metric(f"Interval ({1 - e.alpha:.0%}), clipped", interval + " ✂",
                       help=f"The model's interval is [{num(e.lower[position])}, "
                            f"{num(e.upper[position])}]; the outcome is {outcome.describe()}, "
                            "so it is shown clipped to that range.")
    else:
        cols[1].metric(f"Interval ({1 - e.alpha:.0%})", interval)
    change = num(e.width[position] - e.base_width, signed=True)
    cols[2].metric("Width", f"{num(e.width[position])}",
                   delta=f"{change} vs featureless {num(e.base_width)}",
                   **widgets.change_arrow(change),
                   help="Featureless width: the interval's width for a patient about whom "
                        "nothing is known (every feature left out).")
    if e.targets is not None and not np.isnan(e.targets[position]):
        y = float(e.targets[position])
        inside = e.lower[position] <= y <= e.upper[position]
        cols[3].metric("Observed", f"{num(y)}",
                       delta="inside the interval" if inside else "outside",
                       delta_color="off", delta_arrow="off")
    else:
        cols[3].metric("Observed", "unknown")

    st.subheader(HEADING.format(markdown_text(patient)))
    widgets.html_view(cases.bars_chart(e, position), key="patient_bars")
    with st.container(key="patient_reading"):
        st.markdown(markdown_text(cases.case_reading(width, position, unit=outcome.unit)))
    if clipped[position]:
        st.caption(f"✂ The interval is clipped to what the outcome can be "
                   f"({markdown_text(outcome.describe())}); the model's own interval is "
                   f"[{num(e.lower[position])}, {num(e.upper[position])}]{markdown_text(unit)}. "
                   "The width and its parts are those of the model's unclipped interval: "
                   "clipping is not a sum of feature parts, so it cannot be split between "
                   "them.")
    flags = e.disagree[position]
    if flags.any():
        names = ", ".join(markdown_text(f) for f, flag in zip(e.features, flags, strict=True)
                          if flag)
        st.caption(f"{charts.DISAGREE_MARK} and a heavy outline: the calibration-driven and "
                   f"instance-driven parts pull in opposite directions ({names}); the total "
                   "shows only what is left. Parts under "
                   f"{summaries.SIGN_CUT:.0%} of the largest bar are not counted.")
    if e.calibration_low is not None or e.background_low is not None:
        st.caption(calibration_range_caption(position))
    if e.sampled:
        st.caption(f"{e.method} is a sampled estimate "
                   f"({e.n_evaluations} coalitions): the whiskers show ±2 Monte Carlo standard "
                   "errors, and the table lists each standard error. A larger budget on the "
                   "Setup page shrinks them as 1/√budget.")

    widgets.html_view(cases.waterfall_chart(e, position), key="patient_waterfall")
    if not e.efficient:
        st.caption("This attribution method is not efficient: the attributions do not add up "
                   "to the width's change, and the waterfall shows the rest as 'not "
                   "attributed'. Calibration + instance = total still holds exactly.")
    standard_shap(position)
    what_if(position)
    compare(position)

    st.subheader("Feature values")
    widgets.html_view(cases.patient_table_html(e, position), key="patient_table")
    review_section(position, patient)


def calibration_range_caption(position: int) -> str:
    if e.calibration_unsettled is None:
        return ""
    unsettled = e.calibration_unsettled[position]
    count = int(unsettled.sum())
    text = ("The black whiskers on the calibration-driven bars show how much each part could "
            "change with another calibration set of the same size."
            if e.calibration_low is not None else "")
    if e.background_low is not None:
        text += " " + cases.background_note(e)
    if count and e.background_low is None:
        text += (f" {charts.UNSETTLED_MARK} and a pale bar: the whisker crosses zero, so whether "
                 "the calibration set makes that feature widen or narrow the interval is not "
                 f"settled ({count} of {len(unsettled)} features here).")
    elif count:
        text += (f" {charts.UNSETTLED_MARK} and a pale bar: the whisker or the green band "
                 "crosses zero, so whether that feature widens or narrows the interval through "
                 "the calibration set is not settled "
                 f"({count} of {len(unsettled)} features here).")
    return text.strip()


def analyst_details() -> None:
    if e.calibration_low is None:
        return
    with st.expander("Details for analysts: the calibration-driven intervals"
                     + (" and the reference sample's error" if e.background_low is not None
                        else "")):
        level = e.calibration_level or 0.9
        st.markdown(
            f"Whiskers: the {level:.0%} percentile interval of each φ_C over "
            f"{e.calibration_bootstrap} bootstrap resamples of the "
            f"{e.n_calibration} calibration rows (rows drawn with replacement, "
            "q̂ and v_C recomputed on each by re-weighting the kept masked scores; the fitted "
            "components and the background stay fixed, so this is the calibration sample's "
            "share of the uncertainty only, not the background's Monte Carlo error). "
            f"{charts.UNSETTLED_MARK} marks φ_C with low ≤ 0 ≤ high; those features are not "
            f"counted as {charts.DISAGREE_MARK} (opposite signs), and the reading does not "
            "state their calibration-driven direction. The interval's ends are in the table "
            "below (its low and high end), in the units on show.")
        if e.background_low is not None:
            st.markdown(
                f"Green bands: the background's Monte Carlo error. The background "
                f"({e.background_size} training rows a masked feature is averaged over) was "
                f"drawn afresh {e.background_bootstrap} times the way the run drew its own, "
                "and the calibration game and every patient's instance game recomputed on each "
                "draw (the fitted components and the calibration set fixed). Redraws scatter "
                "about what the background stands for, not about this run's draw, so each band "
                "is the estimate minus the redraws' spread about their mean, at the "
                f"{(e.background_level or 0.9):.0%} level. A φ_C or φ_I whose band holds 0 has "
                f"no sign: it is pale, not counted as {charts.DISAGREE_MARK}, and (φ_C) marked "
                f"{charts.UNSETTLED_MARK}.")


def standard_shap(position: int) -> None:
    """The practitioners' comparator: Shapley values of the width at a fixed q̂, on request."""
    if e.fixed_quantile is None:
        return
    if st.toggle("Show what a standard SHAP of the interval shows", key="fixed_q_on",
                 help="The width's Shapley values with the conformal quantile held fixed: what "
                      "shap gives on a fitted conformal regressor (e.g. MAPIE)."):
        # Built only when asked for: a switch with the toggle off builds no figure for it.
        figure = cases.fixed_quantile_figure(e, position, width.units_label)
        assert figure is not None  # the run computed the comparator (checked above)
        widgets.html_view(html_charts.chart(figure), key="fixed_q_chart")
        st.caption(
            "A standard SHAP of the interval keeps the calibration set's quantile fixed, so it "
            "only sees how this patient's own values change the width: it has no "
            "calibration-driven part, and unlike the total it leaves out how each feature moves "
            "the width through the calibration set"
            + (" (in width units, whatever the units on show)." if e.units == "log"
               else "."))


def what_if(position: int) -> None:
    """Edit this patient's values and see the interval and the three parts change."""
    if not st.toggle("What if this patient's values were different?", key="whatif_on"):
        return
    fields = whatif.fields(results)
    original = whatif.original_values(results, position)
    keys = {f.name: f"whatif_{j}" for j, f in enumerate(fields)}
    owner = (results.dataset_key, results.config, position)
    if st.session_state.get("whatif_for") != owner:  # another patient: start from its values
        reset_what_if(original, keys)
        st.session_state["whatif_for"] = owner
        st.session_state.pop("whatif_last", None)
    with st.container(border=True, key="whatif_panel"):
        st.caption("Change a value and press Enter: the interval and the three parts below "
                   "follow. Nothing is saved; the edited patient is not part of the cohort or "
                   "of the reviews.")
        columns = st.columns(4)
        for j, field in enumerate(fields):
            cell = columns[j % 4]
            label = markdown_text(field.name)
            if field.categories is not None:
                cell.selectbox(label, [None, *field.categories], key=keys[field.name],
                               format_func=lambda v: "(missing)" if v is None else str(v))
            else:
                cell.text_input(label, key=keys[field.name],
                                help=None if field.low is None else
                                f"Training range {field.low:.6g} to {field.high:.6g}; "
                                "leave empty for a missing value.")
        st.button("Reset to the patient's values", key="whatif_reset", on_click=reset_what_if,
                  args=(original, keys), icon=":material/restart_alt:")
        values, bad = whatif.parse(fields, {name: st.session_state.get(key)
                                            for name, key in keys.items()})
        if bad:
            st.error(f"Not a number: {', '.join(markdown_text(n) for n in bad)}. Showing the "
                     "last values that could be explained.")
        else:
            try:
                st.session_state["whatif_last"] = (values, whatif.explain_edited(results,
                                                                                 values))
            except CpdecompError as error:
                st.error(markdown_text(str(error)) + " Showing the last values that could be "
                         "explained.")
        outside = whatif.outside_training(results, values)
        if outside and not bad:
            st.warning(f"Outside the training range: {', '.join(markdown_text(n) for n in outside)}"
                       ". The model has seen no such patients, so this interval is an "
                       "extrapolation.")
        last = st.session_state.get("whatif_last")
        if last is not None:
            show_edited(position, *last)


def reset_what_if(original: dict[str, object], keys: dict[str, str]) -> None:
    """The widgets back at the patient's values (numbers as text, categories as they are)."""
    for name, key in keys.items():
        value = original[name]
        st.session_state[key] = value if isinstance(value, str) else whatif.as_text(value)


def show_edited(position: int, values: dict[str, object], edited) -> None:
    changed = [name for name, value in values.items()
               if value != whatif.original_values(results, position)[name]]
    cols = st.columns(3)
    moved = num(edited.prediction[0] - e.prediction[position], signed=True)
    cols[0].metric("Edited prediction", f"{num(edited.prediction[0])}", delta=moved,
                   **widgets.change_arrow(moved, coloured=False))
    cols[1].metric(f"Edited interval ({1 - e.alpha:.0%})",
                   f"[{num(edited.lower[0])}, {num(edited.upper[0])}]")
    change = num(edited.width[0] - e.width[position], signed=True)
    cols[2].metric("Edited width", f"{num(edited.width[0])}", delta=f"{change} vs this patient",
                   **widgets.change_arrow(change))
    st.markdown("**Changed:** " + (", ".join(markdown_text(n) for n in changed)
                                   if changed else "nothing yet"))
    texts = [cases.display_value(values[f]) for f in edited.decomposition.features]
    widgets.html_view(html_charts.chart(cases.decomposition_bars(
        edited.decomposition, 0, e.units_label, texts, e.number_scale)), key="whatif_chart")


def compare(position: int) -> None:
    """Another patient's three panels and reading under this one's, on request."""
    # A toggle, not an expander: a folded expander still draws its two charts on every switch.
    if st.toggle("Compare with another patient", key="compare_on"):
        others = [i for i in positions if i != position]
        if not others:
            st.caption("There is no other patient to compare with.")
            return
        state.ensure_choice("compare_patient", others, others[0])
        other = st.selectbox(
            "Other patient", others, key="compare_patient",
            format_func=lambda i: f"{e.patient_ids[i]} · width {num(float(e.width[i]))} "
                                  f"(percentile {ranks[i]:.0f})")
        # One above the other: at half the page's width the three panels' titles collide.
        for side, shown in (("this", position), ("other", other)):
            with st.container(border=True):
                st.markdown(f"**{markdown_text(e.patient_ids[shown])}** · interval "
                            f"[{num(shown_lower[shown])}, {num(shown_upper[shown])}]"
                            + (" ✂" if clipped[shown] else "")
                            + f" · width {num(e.width[shown])}")
                widgets.html_view(cases.bars_chart(e, shown), key=f"compare_{side}")
                st.caption(markdown_text(cases.case_reading(width, shown, unit=outcome.unit)))


def review_section(position: int, patient: str) -> None:
    st.subheader("Review")
    history = []
    may_see_reviews = auth.misconfigured() is None and (not auth.configured()
                                                       or auth.identity() is not None)
    if may_see_reviews:
        try:
            history = state.review_store().history(results.dataset_key, patient)
        except CpdecompError as error:
            st.error(markdown_text(str(error)))
    if not may_see_reviews:
        # Reviews are for signed-in users when sign-in is configured, as the queue is.
        st.caption("Sign in on the Review queue page to see and make reviews.")
    elif history:
        last = history[-1]
        # st.text, not markdown: reviewer names and notes are free text typed by users.
        st.text(f"{last.status} at {last.created_at}" + (f" by {last.reviewer}"
                                                         if last.reviewer else ""))
        if last.note:
            st.text(f"Note: {last.note}")
    else:
        st.caption("Not reviewed yet; mark cases reviewed on the Review queue page.")
    facts = state.run_facts(results)  # read here: the download's data is made later
    st.download_button(
        "Download case summary (HTML)", key="download_patient_html",
        data=lambda: cases.case_html(e, position, facts, history),
        file_name=f"case-{file_name_part(patient)}.html", mime="text/html", on_click="ignore",
        icon=":material/download:",
    )


# The help and the analyst's details are the same for every patient: outside the panel, so a
# switch neither sends nor redraws them (redrawing their Markdown was a tenth of a switch).
with st.sidebar:
    glossary.how_to_read()
patient_panel()
analyst_details()

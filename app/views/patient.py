"""Patient: the interval, a plain reading, and the calibration-driven, instance-driven and total
bars side by side.

Every patient was explained by the run, so switching patient only indexes into the report; the
panel is a fragment, so a switch reruns the panel alone.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from app import auth, cases, charts, glossary, state, summaries, widgets
from app.text import file_name_part, markdown_text
from core.errors import CpdecompError

st.title("Patient")
results = widgets.require_results()
report = results.report
e = report.explanation
n = len(report.patient_ids)
ranks = summaries.percentile_ranks(e.width)
positions = list(range(n))
state.ensure_choice("patient", positions, 0)
outcome = state.outcome_range(results.config)
shown_lower, shown_upper, clipped = outcome.clip(e.lower, e.upper)
unit = f" {outcome.unit}" if outcome.unit else ""


def step(offset: int) -> None:
    st.session_state["patient"] = (int(st.session_state["patient"]) + offset) % n


@st.fragment
def patient_panel() -> None:
    pick, back, forward = st.columns([6, 1.2, 1.2], vertical_alignment="bottom")
    position = pick.selectbox(
        "Patient", positions, key="patient",
        format_func=lambda i: f"{report.patient_ids[i]} · width {e.width[i]:.4g} "
                              f"(percentile {ranks[i]:.0f})",
    )
    back.button("Previous", key="patient_previous", on_click=step, args=(-1,),
                icon=":material/arrow_back:", use_container_width=True)
    forward.button("Next", key="patient_next", on_click=step, args=(1,),
                   icon=":material/arrow_forward:", use_container_width=True)

    patient = str(report.patient_ids[position])
    cols = st.columns([1, 1.8, 1.4, 1])  # the interval needs room for two numbers
    cols[0].metric("Prediction", f"{e.prediction[position]:.4g}")
    interval = f"[{shown_lower[position]:.4g}, {shown_upper[position]:.4g}]"
    if clipped[position]:
        cols[1].metric(f"Interval ({1 - e.alpha:.0%}), clipped", interval + " ✂",
                       help=f"The model's interval is [{e.lower[position]:.4g}, "
                            f"{e.upper[position]:.4g}]; the outcome is {outcome.describe()}, "
                            "so it is shown clipped to that range.")
    else:
        cols[1].metric(f"Interval ({1 - e.alpha:.0%})", interval)
    cols[2].metric("Width", f"{e.width[position]:.4g}",
                   delta=f"{e.width[position] - e.base_width:+.4g} vs featureless "
                         f"{e.base_width:.4g}", delta_color="inverse",
                   help="Featureless width: the interval's width for a patient about whom "
                        "nothing is known (every feature left out).")
    if report.targets is not None and not np.isnan(report.targets[position]):
        y = float(report.targets[position])
        inside = e.lower[position] <= y <= e.upper[position]
        cols[3].metric("Observed", f"{y:.4g}",
                       delta="inside the interval" if inside else "outside",
                       delta_color="off", delta_arrow="off")
    else:
        cols[3].metric("Observed", "unknown")

    st.subheader(f"Why is patient {markdown_text(patient)}'s interval this wide?")
    widgets.chart(cases.bars_figure(results, position))
    with st.container(key="patient_reading"):
        st.markdown(markdown_text(cases.case_reading(results, position, unit=outcome.unit)))
    if clipped[position]:
        st.caption(f"✂ The interval is clipped to what the outcome can be "
                   f"({markdown_text(outcome.describe())}); the model's own interval is "
                   f"[{e.lower[position]:.4g}, {e.upper[position]:.4g}]{markdown_text(unit)}. "
                   "The width and its parts are those of the model's unclipped interval: "
                   "clipping is not a sum of feature parts, so it cannot be split between "
                   "them.")
    flags = cases.disagreements(results, position)
    d = e.decomposition
    if flags.any():
        names = ", ".join(markdown_text(f) for f, flag in zip(d.features, flags, strict=True)
                          if flag)
        st.caption(f"{charts.DISAGREE_MARK} and a heavy outline: the calibration-driven and "
                   f"instance-driven parts pull in opposite directions ({names}); the total "
                   "shows only what is left. Parts under "
                   f"{summaries.SIGN_CUT:.0%} of the largest bar are not counted.")
    if d.total_se is not None:
        st.caption(f"{results.config.method} is a sampled estimate "
                   f"({e.n_evaluations} coalitions): the whiskers show ±2 Monte Carlo standard "
                   "errors, and the table lists each standard error. A larger budget on the "
                   "Setup page shrinks them as 1/√budget.")

    widgets.chart(cases.waterfall_figure(results, position))
    if not d.efficient:
        st.caption("This attribution method is not efficient: the attributions do not add up "
                   "to the width's change, and the waterfall shows the rest as 'not "
                   "attributed'. Calibration + instance = total still holds exactly.")
    glossary.how_to_read()
    compare(position)

    st.subheader("Feature values")
    st.dataframe(cases.patient_table(results, position), hide_index=True,
                 column_config={c: st.column_config.NumberColumn(format="%.4g") for c in
                                ("calibration-driven", "instance-driven", "total")})
    review_section(position, patient)


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
            format_func=lambda i: f"{report.patient_ids[i]} · width {e.width[i]:.4g} "
                                  f"(percentile {ranks[i]:.0f})")
        # One above the other: at half the page's width the three panels' titles collide.
        for side, shown in (("this", position), ("other", other)):
            with st.container(border=True):
                st.markdown(f"**{markdown_text(report.patient_ids[shown])}** · interval "
                            f"[{shown_lower[shown]:.4g}, {shown_upper[shown]:.4g}]"
                            + (" ✂" if clipped[shown] else "")
                            + f" · width {e.width[shown]:.4g}")
                widgets.chart(cases.bars_figure(results, shown), key=f"compare_{side}")
                st.caption(markdown_text(cases.case_reading(results, shown,
                                                            unit=outcome.unit)))


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
    st.download_button(
        "Download case summary (HTML)", key="download_patient_html",
        data=lambda: cases.case_html(results, position, history),
        file_name=f"case-{file_name_part(patient)}.html", mime="text/html", on_click="ignore",
        icon=":material/download:",
    )


patient_panel()

"""Review queue: the high-uncertainty patients, their drivers, and clinicians' reviews."""

from __future__ import annotations

import logging
from collections.abc import Iterable

import numpy as np
import streamlit as st

from cpdecomp.app import auth, cases, export, state, summaries, widgets
from cpdecomp.app.reviews import ReviewStore
from cpdecomp.app.reviews.events import Status
from cpdecomp.app.text import file_name_part, markdown_text, people_number, table_format
from cpdecomp.core.errors import CpdecompError

logger = logging.getLogger("cpdecomp.app.queue")  # a page runs as __main__

st.title("Review queue")
# With sign-in configured, the queue (its notes name patients) is for signed-in users only, and
# reviews record the identity the provider vouched for; otherwise the reviewer types a name.
signed_in = auth.require_sign_in("see and review the queue")
results = widgets.require_results(offer_units=False)
report = results.report  # for the summaries, which read core's report
e = results.shown  # the run's arrays the page shows
key = results.dataset_key
width_scale = e.base_width


def num(value: float) -> str:
    """A width or an interval end, rounded at the featureless width's scale (one rule)."""
    return people_number(value, width_scale)


try:
    store: ReviewStore | None = state.review_store()
    latest = store.latest(key) if store is not None else {}
except CpdecompError as error:
    st.error(markdown_text(str(error)))
    store, latest = None, {}

RULES = {"percentile": "a percentile of the widths", "absolute": "an absolute width"}
left, right = st.columns(2)
with left:
    rule = st.radio("Flag patients whose width is above", list(RULES), key="queue_rule",
                    format_func=RULES.__getitem__, horizontal=True)
with right:
    if rule == "percentile":
        value = float(st.slider("Percentile", min_value=0, max_value=99, step=1,
                                key="queue_percentile"))
    else:
        st.session_state.setdefault("queue_threshold",
                                    round(float(np.percentile(e.width, 90)), 4))
        value = float(st.number_input("Width threshold", min_value=0.0, key="queue_threshold",
                                      format="%.4g"))
threshold = summaries.flag_threshold(e.width, rule, value)  # type: ignore[arg-type]
flagged = summaries.flagged_positions(e.width, threshold)

frame = summaries.queue_frame(report, flagged, latest)
outcome = state.outcome_range(results.config)
shown_lower, shown_upper, clipped = outcome.clip(e.lower, e.upper)
positions_in_frame = frame["position"].to_numpy(dtype=int)
frame["interval"] = [cases.interval_text(e, i, outcome) for i in positions_in_frame]
# The export says what the page shows: the clipped ends beside the model's own (lower, upper).
frame["shown_lower"] = shown_lower[positions_in_frame]
frame["shown_upper"] = shown_upper[positions_in_frame]
frame["clipped_to"] = [outcome.describe() if clipped[i] else "" for i in positions_in_frame]
cols = st.columns(4)
cols[0].metric("Flagged", f"{len(frame)} of {len(e.width)}", help=f"width > {num(threshold)}")
cols[1].metric("Reviewed", f"{int(frame['reviewed'].sum())}")
warned = int((frame["total_view"] != "agrees").sum())
cols[2].metric("Total view hides or flips a driver", f"{warned}")
cols[3].metric("Threshold", num(threshold))

if frame.empty:
    if summaries.widths_tied(e.width):
        st.info("Every patient has the same width, so none stands out and the queue is "
                "empty: under this family the calibration set alone sets the width.")
    else:
        st.info("No patient is above the threshold; lower it to fill the queue.")
    st.stop()

a, b, c = st.columns([1.2, 2, 1], vertical_alignment="bottom")
order = a.selectbox("Order", list(summaries.SORTS), key="queue_sort")
drivers = sorted(set(frame["top_instance_driver"]) - {""})
state.ensure_list("queue_features", drivers)
b.multiselect("Cases where these features drive the width", drivers, key="queue_features",
              placeholder="every feature",
              help="Keeps the cases whose largest widening instance-driven part is one of "
                   "these features.")
c.checkbox("Only cases not reviewed", key="queue_unreviewed")
shown = summaries.sort_queue(frame, order)
if st.session_state["queue_unreviewed"]:
    shown = shown[~shown["reviewed"]]
if st.session_state["queue_features"]:
    shown = shown[shown["top_instance_driver"].isin(st.session_state["queue_features"])]


def text_width(texts: Iterable[object]) -> int:
    """Pixels a data-table column needs for its longest text (header included): the table's
    14 px font averages under 8 px a character (digits and brackets 7-8, ✂ 14), plus the
    cell's padding and the header's sort mark."""
    return int(max(8 * len(str(t)) + 6 * str(t).count("✂") for t in texts)) + 32


# The calibration-driven driver is the same for every patient on the additive scale: said once
# above the table, not repeated in a column.
calibration_drivers = set(frame["top_calibration_driver"]) - {""}
one_calibration_driver = len(calibration_drivers) <= 1
st.dataframe(
    shown, hide_index=True,
    # What a clinician scans first on the left, the interval with them (further right it was
    # cut at 1280 px); the parts' sizes after.
    column_order=["patient_id", "width", "interval", "status", "reviewer", "note", "warnings",
                  "top_instance_driver", "width_percentile", "instance_part",
                  *([] if one_calibration_driver else ["top_calibration_driver"]),
                  "prediction", "reviewed_at"],
    column_config={
        "patient_id": st.column_config.TextColumn("patient", pinned=True),
        "width": st.column_config.NumberColumn("width", format=table_format(width_scale)),
        # Widths in pixels from the longest text: sized to the rows first drawn, "reviewed"
        # came after "open" and was cut to "reviewe".
        "status": st.column_config.TextColumn("status", width=text_width(["reviewed", "open",
                                                                          "status"]),
                                              help="reviewed, or open (not reviewed yet, or "
                                                   "reopened)"),
        "reviewer": st.column_config.TextColumn(
            "reviewer", width=min(text_width([*frame["reviewer"], "reviewer"]), 240)),
        # A long note is cut here; the case's history below has it whole.
        "note": st.column_config.TextColumn(
            "note", width=min(max(text_width(frame["note"]), 200), 400)),
        "warnings": st.column_config.TextColumn(
            "what the total view does",
            width=min(text_width([*frame["warnings"], "what the total view does"]), 400),
            help="'total hides x': x widens this interval most, but the usual (total) "
                 f"explanation does not list it among its top {summaries.TOTAL_TOP}. 'total "
                 "flips x': the total shows x as narrowing although it widens. The full "
                 "sentence is under 'Mark a case reviewed'. A feature whose "
                 "calibration-driven direction is not settled (marked ? on the Patient page) "
                 "raises no warning."),
        "width_percentile": st.column_config.NumberColumn("percentile", format="%.0f"),
        "interval": st.column_config.TextColumn(
            "interval", width=text_width([*frame["interval"], "interval"]),
            help="✂: clipped to what the outcome can be; the width is the model's unclipped "
                 "width."),
        "prediction": st.column_config.NumberColumn(format=table_format(width_scale)),
        "top_instance_driver": st.column_config.TextColumn("widened most by",
                                                           help="The feature whose own value "
                                                                "widens this interval most."),
        "instance_part": st.column_config.NumberColumn("by", format=table_format(width_scale)),
        "top_calibration_driver": "widened most through the calibration set by",
        "reviewed_at": st.column_config.TextColumn(
            "reviewed at", width=text_width([*frame["reviewed_at"], "2000-01-01T00:00:00+00:00"])),
    },
)
if one_calibration_driver and calibration_drivers:
    feature = next(iter(calibration_drivers))
    st.caption(markdown_text(
        f"Through the calibration set, {feature} widens every flagged patient's interval most."))
st.caption(f"{len(shown)} of {len(frame)} flagged cases shown. Click a column header to sort.")
unsettled_cases = int(frame["unsettled_driver"].sum())
if unsettled_cases:
    st.caption(f"{unsettled_cases} flagged {'case has' if unsettled_cases == 1 else 'cases have'}"
               " a driver whose calibration-driven direction is not settled (another "
               "calibration set could reverse it): what the total does to that driver is not "
               "counted as a warning.")

st.subheader("Mark a case reviewed")
case_positions = [int(p) for p in summaries.sort_queue(frame, order)["position"]]
state.ensure_choice("review_patient", case_positions, case_positions[0])
ids = e.patient_ids


def case_label(position: int) -> str:
    review = latest.get(str(ids[position]))
    done = " · reviewed" if review and review.status == "reviewed" else ""
    return f"{ids[position]} · width {num(e.width[position])}{done}"


position = st.selectbox("Case", case_positions, key="review_patient", format_func=case_label)
case_row = frame.set_index("position").loc[position]
if case_row["total_view"] != "agrees":
    st.caption(markdown_text(f"What the total view does: {case_row['total_view']}."))
st.text_area("Note", key="review_note", max_chars=4000,
             placeholder="What was checked, and what was decided")
if signed_in is None:
    st.text_input("Reviewer (optional)", key="reviewer", max_chars=200)
else:
    who, leave = st.columns([3, 1], vertical_alignment="bottom")
    who.text_input("Reviewer (signed in)", value=signed_in, key="reviewer_signed_in",
                   disabled=True)
    with leave:
        auth.sign_out_button()


def save(status: Status) -> None:
    """Record a review event; runs before the rerun, so the note box can be cleared."""
    if store is None:
        return
    patient = str(ids[int(st.session_state["review_patient"])])
    if auth.configured():
        # Read at the click, from the identity provider's claims, never from a widget.
        reviewer = auth.identity()
        if reviewer is None:
            st.session_state["review_message"] = ("error", "Sign in again to save reviews.")
            return
    else:
        reviewer = st.session_state.get("reviewer", "")
    try:
        store.record(key, patient, status, note=st.session_state.get("review_note", ""),
                     reviewer=reviewer, label=results.config.dataset_name)
    except CpdecompError as error:
        st.session_state["review_message"] = ("error", markdown_text(str(error)))
        return
    except Exception as error:  # a bug: callbacks run outside main.py's handler
        logger.error("saving a review failed with %s", type(error).__name__)
        st.session_state["review_message"] = (
            "error", f"The review could not be saved ({type(error).__name__}); please retry.")
        return
    st.session_state["review_note"] = ""
    st.session_state["review_message"] = (
        "success", f"Case {markdown_text(patient)} marked {status}.")


mark, reopen = st.columns(2)
mark.button("Mark reviewed", key="mark_reviewed", type="primary", on_click=save,
            args=("reviewed",), disabled=store is None, icon=":material/check:")
reopen.button("Reopen", key="reopen_review", on_click=save, args=("reopened",),
              disabled=store is None, icon=":material/undo:")
message = st.session_state.pop("review_message", None)
if message:
    getattr(st, message[0])(message[1])

patient = str(ids[position])
try:
    history = store.history(key, patient) if store else []
except CpdecompError as error:
    st.error(markdown_text(str(error)))
    history = []
st.markdown(f"**History of case {markdown_text(patient)}**")
if history:
    for event in reversed(history):
        # st.text, not markdown: notes and names are free text typed by users.
        by = f" by {event.reviewer}" if event.reviewer else ""
        st.text(f"{event.created_at} · {event.status}{by}" +
                (f" · {event.note}" if event.note else ""))
else:
    st.caption("No reviews yet.")

st.subheader("Export")
export_frame = summaries.sort_queue(frame, order).drop(columns=["position"])
facts = state.run_facts(results)  # read here: the download's data is made later
c1, c2 = st.columns(2)
c1.download_button("Queue with reviews (CSV)", key="download_queue_csv",
                   data=lambda: export.safe_csv(export_frame), file_name="review-queue.csv",
                   mime="text/csv", on_click="ignore", icon=":material/download:")
c2.download_button(f"Case summary of {markdown_text(patient)} (HTML)", key="download_case_html",
                   data=lambda: cases.case_html(
                       e, position, facts, history, outcome=outcome,
                       reading=cases.case_reading(e, position, unit=outcome.unit)),
                   file_name=f"case-{file_name_part(patient)}.html", mime="text/html",
                   on_click="ignore",
                   icon=":material/download:")
st.caption("The CSV neutralises cells a spreadsheet would run as formulas; the HTML summary "
           "is one file that opens without network.")

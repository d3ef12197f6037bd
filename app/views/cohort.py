"""Cohort: widths, coverage, the calibration-driven vector and the instance-driven spread."""

from __future__ import annotations

import numpy as np
import streamlit as st

from cpdecomp.app import (
    cases,
    charts,
    glossary,
    html_charts,
    planning,
    state,
    summaries,
    widgets,
)
from cpdecomp.app.text import markdown_text, people_number, table_format
from cpdecomp.app.views import interactions
from cpdecomp.core.coverage import narrowest_undercovered

st.title("Cohort")
results = widgets.require_results()
report = results.report  # for the summaries, which read core's report
e = results.shown  # the run in the units on show: every array the page draws
units = e.units_label
config = results.config
width_scale = e.base_width
part_scale = e.number_scale


def num(value: float, signed: bool = False) -> str:
    """A width rounded at the featureless width's scale (the one rule of every page)."""
    return people_number(value, width_scale, signed)


# Worked out by the run's worker as the run ended (kept with the run's record): the first
# visit only draws.
summary = e.cohort
figures = cases.cohort_figures(e)
cover = summary.coverage
cols = st.columns(4)
cols[0].metric("Patients explained", f"{e.n}")
cols[1].metric("Median width", f"{num(np.median(e.width))}",
               delta=f"{num(np.median(e.width) - e.base_width, signed=True)} vs featureless",
               delta_color="off", delta_arrow="off")
cols[2].metric("Featureless width", f"{num(e.base_width)}",
               help="The width for a patient about whom nothing is known (every feature left "
                    "out).")
if cover.n:
    cols[3].metric("Empirical coverage", f"{cover.rate:.1%}",
                   delta=f"{cover.rate - cover.target:+.1%} vs 1 − α = {cover.target:.0%}",
                   delta_color="off", delta_arrow="off",
                   help=f"{cover.covered} of {cover.n} held-out rows with an observed target "
                        "fall inside their interval.")
else:
    cols[3].metric("Empirical coverage", "n/a",
                   help="The explained rows have no observed target to check coverage on.")
if cover.n:
    st.caption(f"Coverage is checked on {cover.n} held-out rows (not used to fit or calibrate); "
               f"split conformal guarantees at least {cover.target:.0%} on average over "
               "calibration sets, so a small shortfall on few rows is expected noise.")

WIDTH_COVERAGE_COLUMNS = {
    "intervals": html_charts.Column("intervals", "Patients with an observed outcome, in equal "
                                    "groups by the width of their interval."),
    "widths": html_charts.Column("widths", f"The group's narrowest to widest interval, in "
                                 f"{units}."),
    "n": html_charts.Column("patients", "Patients of the group with an observed outcome.",
                            decimals=0),
    "coverage": html_charts.Column("coverage %", "Share whose outcome falls inside their "
                                   "interval.", decimals=0),
    "range": html_charts.Column("95% range", "Exact binomial 95% range of the coverage, in %."),
    "reading": html_charts.Column("reading"),
}


def coverage_by_width() -> None:
    """Coverage per tenth of the intervals by width, and a warning when the narrowest are
    covered less often than promised (a difficulty model too sure of some patients)."""
    groups = summary.by_width
    if not groups:
        return
    narrow = narrowest_undercovered(groups, cover.target)
    if narrow is not None:
        name = summaries.width_group_name(narrow)
        st.warning(
            f"The patients the model looks surest about are covered less often than promised: "
            f"for the {name} of intervals the outcome fell inside for {narrow.coverage:.0%} of "
            f"{narrow.n} patients (95% range {narrow.coverage_low:.0%} to "
            f"{narrow.coverage_high:.0%}), not {cover.target:.0%}. Read these narrow "
            "intervals as too narrow: the model is surer about these patients than it should "
            "be.")
    with st.expander("Coverage by interval width", expanded=narrow is not None):
        widgets.html_view(html_charts.table(
            summaries.width_coverage_frame(groups, cover.target, num), WIDTH_COVERAGE_COLUMNS),
            key="cohort_width_coverage")
        st.caption(
            f"The {cover.n} held-out patients with an observed outcome, in {groups[0].of} equal "
            "groups from the narrowest intervals to the widest. The guarantee of "
            f"{cover.target:.0%} holds on average over all patients, not group by group; a "
            "group is called too narrow only when its whole 95% range lies below "
            f"{cover.target:.0%}.")


coverage_by_width()

tied = summary.tied
if not e.has_instance_part:
    st.info(f"Under the {config.options.family} family every patient's interval has the same "
            "width: it is set by the calibration set alone. No feature of the patient changes "
            "it, so there is no instance-driven part (it is zero for every feature) and the "
            "total equals the calibration-driven part.")
elif tied:
    st.info("Every patient has the same width, so none stands out.")
wider = summary.wider
if not tied and wider > 0.5:
    st.warning(f"For {wider:.0%} of patients the model's interval is wider than the featureless "
               "one (what it would be knowing nothing about the patient): the features add "
               "uncertainty more often than they remove it. A multiplicative family (gamma or "
               "cqr-r), whose width scales with the prediction, may fit this outcome better.")
outcome = state.outcome_range(config)
clipped = outcome.clip(e.lower, e.upper)[2]
if clipped.any():
    st.caption(f"✂ {int(clipped.sum())} of {len(clipped)} intervals reach values the outcome "
               f"cannot take ({outcome.describe()}) and are shown clipped on the Patient and "
               "Review queue pages; widths and parts are those of the unclipped intervals.")

widgets.html_view(figures.pages["widths"], key="cohort_widths")

one_vector = summary.one_vector
left, right = st.columns(2)
with left:
    widgets.html_view(figures.pages["calibration"], key="cohort_calibration")
    if figures.calibration_whiskers and e.calibration_unsettled is not None:
        unsettled = e.calibration_unsettled[0]
        crosses = "the whisker or the green band crosses" if figures.calibration_band else (
            "the whisker crosses")
        st.caption("Whiskers: how much each part could change with another calibration set of "
                   "the same size."
                   + (" Green band: how much it could move with another reference sample "
                      "(the training rows a left-out feature is averaged over)."
                      if figures.calibration_band else "")
                   + f" {charts.UNSETTLED_MARK} and a pale bar: {crosses} "
                   "zero, so whether the calibration set makes that feature widen or narrow "
                   f"intervals is not settled ({int(unsettled.sum())} of {len(unsettled)} "
                   "features).")
    if not one_vector:
        st.caption("In width units a multiplicative family scales the calibration-driven part "
                   "by each patient's width factor; this is the mean over patients. Switch to "
                   "log units to see the single vector.")
    st.caption(f"Specific to α = {e.alpha:g}: a feature's calibration-driven sign can change "
               "with α.")
with right:
    widgets.html_view(figures.pages["instance"], key="cohort_instance")
    st.caption("Each box spans the middle half of the patients; the whiskers and dots show "
               "the rest.")

widgets.html_view(figures.pages["disagreement"], key="cohort_disagreement")
st.caption("Calibration vs instance: the two parts pull in opposite directions. Total vs "
           "instance: the usual (total) attribution shows the patient's own effect with the "
           f"wrong sign. Parts smaller than {summaries.SIGN_CUT:.0%} of the patient's largest "
           "attribution are too small to matter and are not counted"
           + (", nor are calibration-driven parts whose direction is not settled (marked ?)"
              if e.calibration_unsettled is not None else "")
           + (", nor instance-driven parts whose reference-sample range holds 0."
              if e.instance_unsettled is not None else "."))
widgets.html_view(figures.disagreement_table, key="cohort_disagreement_table")


def subgroups() -> None:
    """Coverage, width and the two parts per subgroup of one feature, on request."""
    st.subheader("Subgroups")
    feature = st.selectbox("Group patients by", [None, *e.features], key="subgroup_feature",
                           format_func=lambda f: "(choose a feature)" if f is None else str(f),
                           help="Categories, or quarters of the patients by the feature's "
                                "value (quartiles).")
    if feature is None:
        return
    with st.container(key="subgroup_report"):
        subgroup_report(feature)


def subgroup_report(feature: str) -> None:
    table = summaries.subgroup_summary(report, feature)
    # The 95% range in one column and short part names (explained in the headers' help): at
    # 1280 px the table shows every column without a scroll bar.
    ranges = [f"{100 * low:.1f} to {100 * high:.1f}" if np.isfinite(low) else "n/a"
              for low, high in zip(table["coverage, 95% low"], table["coverage, 95% high"],
                                   strict=True)]
    shown = table.drop(columns=["coverage, 95% low", "coverage, 95% high"]).assign(
        coverage=(100 * table["coverage"]).round(1))
    shown.insert(shown.columns.get_loc("coverage") + 1, "coverage range", ranges)
    parts = st.column_config.NumberColumn
    st.dataframe(
        shown, hide_index=True,
        column_config={
            "with observed target": st.column_config.NumberColumn(
                "observed", help="Rows of the group with a known outcome."),
            "coverage": st.column_config.NumberColumn("coverage %", format="%.1f"),
            "coverage range": st.column_config.TextColumn(
                "95% range", help="Exact binomial 95% range of the coverage, in %."),
            "median width": parts(format=table_format(width_scale)),
            "mean calibration-driven": parts(
                "calibration part", format=table_format(part_scale),
                help="Each patient's calibration-driven parts summed over the features, "
                     "averaged over the group."),
            "mean instance-driven": parts(
                "instance part", format=table_format(part_scale),
                help="Each patient's instance-driven parts summed over the features, averaged "
                     "over the group."),
        })
    st.caption(
        f"Coverage: held-out rows of the group whose observed value falls inside their "
        f"interval ('observed': rows with a known outcome), with a 95% range (exact "
        f"binomial); on few rows it is wide, and the "
        f"{1 - e.alpha:.0%} guarantee holds for the cohort, not for each group. The two mean "
        "parts are each patient's calibration-driven and instance-driven parts summed over the "
        f"features, averaged over the group, in {markdown_text(units)}.")
    st.caption("These are the cohort's own intervals and parts, read group by group. A "
               "conformal system calibrated separately per group (Mondrian, group-conditional "
               "conformal prediction) would change the intervals, and its calibration step does "
               "not split into feature parts, so it is not offered here.")


def link_scale_note(links: dict[str, str]) -> str:
    """The masking's definition for a model with a log link (core.games.masking), said."""
    # The built-in sigma's log scale is part of its definition, not a choice (docs: the method).
    note = (" σ has a log link: a removed feature is averaged over the background on its log "
            "scale, exp(mean of log σ), which keeps the exact tree tables."
            if "sigma" in links else "")
    chosen = sorted(name for name in links if name != "sigma")
    if not chosen:
        return note
    names = " and ".join(chosen)
    return note + (
        f" The model behind {names} has a log link (a gamma, Poisson or Tweedie loss): a "
        "removed feature is averaged over the background on its log scale, exp(mean of the "
        "model's raw output), which keeps the exact tree tables and is shap's "
        "model_output='raw' convention; the mean of its predictions themselves (the command "
        "line's --masking response) is exact too, by brute force, and shares the same width "
        "out differently (docs: the method, models with a log link).")


subgroups()
glossary.how_to_read()
with st.expander("Analyst's details"):
    st.markdown(
        f"Setup: {markdown_text(planning.run_model_name())}, {config.options.family}, "
        f"{config.method}; "
        f"q̂ = {e.q_hat:.4g}; units: {markdown_text(units)}. The featureless width is the "
        f"width with every feature masked over the background ({e.background_size} training "
        "rows). The calibration-driven part is the Shapley value of the calibration game "
        "(coalitions of features masked in the calibration set's conformity scores, through "
        "q̂); the instance-driven part is that of the instance game; on the family's additive "
        "scale they add to the total exactly. Multiplicative families are exact in log units; "
        "in width units all three vectors are rescaled by one logarithmic-mean factor per "
        "patient. Sign counts (⇄, the queue's warnings) leave out a φ_C whose bootstrap "
        "interval holds 0 (low ≤ 0 ≤ high): its direction is not settled."
        + link_scale_note(report.meta.get("link_scale", {})))
interactions.render(results)

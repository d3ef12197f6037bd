"""Recalibration: the run's model under another calibration set (a second file, or groups of the
run's calibration rows such as sites or periods), feature by feature."""

from __future__ import annotations

import numpy as np
import streamlit as st

from cpdecomp.app import recalibration, runs, sources, state, widgets
from cpdecomp.app.text import markdown_text, people_number
from cpdecomp.core.conformal import minimum_calibration_size
from cpdecomp.core.errors import CpdecompError

st.title("Recalibration")
results = widgets.require_results()
study = results.study
e = results.shown
config = results.config
units = e.units_label
scale = e.number_scale
unit = state.outcome_range(config).unit

st.markdown(
    "A model trained elsewhere is often recalibrated on a hospital's own recent patients, "
    "and its intervals come out wider or narrower. This page says why. It keeps the fitted "
    "model and this run's patients, recomputes every interval with another calibration set, "
    "and shows which features' **calibration-driven parts** (the share of the width that "
    "comes from the calibration set) moved, and whether they moved by more than chance.")

MODES = {"upload": "Another calibration file", "split": "Groups of this run's calibration rows"}
columns = recalibration.split_columns(study, config.alpha)
st.session_state.setdefault("recal_mode", "split" if columns else "upload")
mode = st.radio("Compare this run's calibration set with", list(MODES), key="recal_mode",
                format_func=MODES.__getitem__, horizontal=True,
                help="A file: the rows of another site or period, with the model's feature "
                     "columns and the outcome. Groups: this run's own calibration rows split "
                     "by a column such as a site or a period.")

upload_name = ""
if mode == "upload":
    upload = st.file_uploader(
        "Calibration file (CSV or Parquet) with the model's feature columns and the outcome "
        f"({markdown_text(config.options.target)})", type=sources.UPLOAD_TYPES,
        key="recalibration_upload")
    kept_file = st.session_state.get("_recalibration_file")
    if upload is not None and (kept_file is None or kept_file[0] != upload.file_id):
        limits = sources.upload_limits(st.get_option("server.maxUploadSize"))
        try:
            table = sources.read_upload(upload.name, upload.getvalue(), limits)
        except CpdecompError as error:
            st.error(markdown_text(str(error)))
        else:
            kept_file = (upload.file_id, sources.upload_label(upload.name), table)
            st.session_state["_recalibration_file"] = kept_file
    if kept_file is None:
        st.info("Upload the calibration rows of another site or period to see how this run's "
                "intervals change with them.")
        st.stop()
    if upload is None:
        st.caption(f"Comparing with {markdown_text(kept_file[1])}, uploaded earlier; upload "
                   "another file to replace it.")
    upload_name = kept_file[1]
    request = recalibration.Request("upload", kept_file[0])
    upload_table = kept_file[2]
else:
    if not columns:
        st.info("This run's calibration rows have no column with a few values (2 to "
                f"{recalibration.MAX_SETS}) to split them by, such as a site or a period, "
                f"with at least {minimum_calibration_size(config.alpha)} rows in each group "
                f"(what α = {config.alpha:g} needs). Upload another calibration file "
                "instead.")
        st.stop()
    state.ensure_choice("recal_split_by", columns,
                        next((c for c in columns if c.lower() in ("site", "period")), columns[0]))
    by = st.selectbox("Split the calibration rows by", columns, key="recal_split_by",
                      help="Each value of the column makes one calibration set. Offered: "
                           f"columns with 2 to {recalibration.MAX_SETS} values and at least "
                           f"{minimum_calibration_size(config.alpha)} rows for each (what "
                           f"α = {config.alpha:g} needs).")
    if by in e.features:
        st.caption(f"{markdown_text(by)} is one of the model's features: within each group it "
                   "has one value, so its own calibration-driven part says little; the other "
                   "features' parts are what to read.")
    request = recalibration.Request("split", by)
    upload_table = None

try:
    names = recalibration.set_names(study, request, upload_name)
except CpdecompError as error:
    st.error(markdown_text(str(error)))
    st.stop()
state.ensure_choice("recal_reference", names, names[0])
reference = st.selectbox("Compare against", names, key="recal_reference",
                         help="The reference set: the others' changes are measured from it.")
request = recalibration.Request(request.mode, request.source, reference)

key = (config, results.units, request)
comparison = recalibration.kept_comparison(st.session_state, key)
if comparison is None:
    try:
        with st.spinner("Recomputing every interval with the other calibration set…"):
            comparison = recalibration.compare(
                study, request, method=config.method, alpha=config.alpha,
                units="log" if results.units == "log" else "width", budget=config.budget,
                bootstrap=runs.CALIBRATION_BOOTSTRAP, upload=upload_table,
                upload_name=upload_name, n_coalitions=e.n_evaluations)
    except CpdecompError as error:
        st.error(markdown_text(str(error)))
        earlier = st.session_state.get("_recalibration")
        if earlier is None:
            st.stop()
        comparison = earlier[1]
        st.caption("Showing the earlier comparison below ("
                   + markdown_text(", ".join(comparison.names)) + ").")
    else:
        st.session_state["_recalibration"] = (key, comparison)

others = [n for n in comparison.names if n != comparison.reference]
if len(others) > 1:
    state.ensure_choice("recal_set", others, others[0])
    name = st.selectbox("Set to look at", others, key="recal_set")
else:
    name = others[0]
result = comparison.set(name)
base = comparison.set(comparison.reference)

with st.container(key="recal_reading"):
    st.info(markdown_text(recalibration.reading(comparison, name, unit=unit, scale=scale)))
    warning = recalibration.coverage_sentence(comparison, name)
    if warning:
        st.warning(markdown_text(warning))


def width_text(value: float) -> str:
    return people_number(value, base.base_width) + (f" {unit}" if unit else "")


cols = st.columns(3)
before, after = float(np.median(base.width)), float(np.median(result.width))
delta = people_number(after - before, base.base_width, signed=True)
cols[0].metric("Median width", f"{width_text(before)} → {width_text(after)}",
               delta=f"{delta} ({after / before - 1:+.0%})", **widgets.change_arrow(delta),
               help=f"The median patient's interval width under {comparison.reference} "
                    f"({base.n_calibration} calibration rows), then under {name} "
                    f"({result.n_calibration} rows).")
moved = ~comparison.cohort[name].holds_zero
cols[1].metric("Features that moved", f"{int(moved.sum())} of {moved.size}",
               help="Features whose calibration-driven part changed by more than two "
                    "calibration sets of these sizes give by chance (its 90% range excludes "
                    "0).")
cross = comparison.coverage[(comparison.coverage["intervals"] == comparison.reference)
                            & (comparison.coverage["rows"] == name)]
if not cross.empty:
    rate = float(cross["rate"].iloc[0])
    cols[2].metric(f"Coverage on {name}'s rows", f"{rate:.1%}",
                   delta=f"{rate - (1 - comparison.alpha):+.1%} vs aim "
                         f"{1 - comparison.alpha:.0%}", delta_color="off", delta_arrow="off",
                   help=f"{int(cross['covered'].iloc[0])} of {int(cross['n'].iloc[0])} outcomes "
                        f"of {name}'s calibration rows fall inside the intervals computed with "
                        f"{comparison.reference}: the intervals before recalibrating, checked "
                        "on the new rows.")

left, right = st.columns([3, 2])
with left:
    widgets.html_view(recalibration.drawn(recalibration.change_figure(
        comparison, name, units=units, scale=scale)), key="recal_change")
    st.caption("Blue bars: how much each feature's calibration-driven part changed. Whiskers: "
               "where the change would likely fall (90%) with other calibration sets of the "
               "same sizes. A pale bar marked ? has a range that holds 0: that change is "
               "within chance.")
with right:
    widgets.html_view(recalibration.drawn(recalibration.widths_figure(
        comparison, units=f"interval width{f' ({unit})' if unit else ''}")), key="recal_widths")
    st.caption("Each box spans the middle half of the patients; the whiskers and dots show "
               "the rest.")

st.subheader("Coverage: each set's intervals on the other rows")
widgets.html_view(recalibration.coverage_table(comparison), key="recal_coverage")
st.caption(f"How many outcomes fall inside their intervals, checked on rows the intervals were "
           f"not calibrated on (the aim is {1 - comparison.alpha:.0%}). Intervals from one set "
           "that are too narrow on another set's rows are the practical sign that "
           "recalibrating was needed. A set's own rows are left out: they meet the aim by "
           "construction.")

st.subheader("One patient under both sets")
ids = comparison.patient_ids
state.ensure_choice("recal_patient", list(range(len(ids))), 0)
position = st.selectbox("Patient", list(range(len(ids))), key="recal_patient",
                        format_func=lambda i: str(ids[i]))
pcols = st.columns(2)
for col, shown in zip(pcols, (base, result), strict=True):
    col.metric(f"Interval under {shown.name}",
               f"{width_text(shown.lower[position])} to {width_text(shown.upper[position])}",
               help=f"Width {width_text(shown.width[position])}.")
calibration_figure, instance_figure = recalibration.patient_figures(
    comparison, name, int(position), units=units, scale=scale)
widgets.html_view(recalibration.drawn(calibration_figure), key="recal_patient_calibration")
st.caption("Side by side, this patient's calibration-driven parts under each set; whiskers: "
           "each part's likely range with another calibration set of the same size (pale and "
           "?: it holds 0).")
widgets.html_view(recalibration.drawn(instance_figure), key="recal_patient_instance")
ratio = recalibration.instance_scaling(comparison, name)
if ratio is None:
    st.caption("The instance-driven parts come from this patient's own values: they are the "
               "same under both sets.")
else:
    factors = (result.log_mean_factor, base.log_mean_factor)
    own = (float(factors[0][position] / factors[1][position])
           if factors[0] is not None and factors[1] is not None else ratio)
    st.caption("The instance-driven parts come from this patient's own values. In width units "
               "they are rescaled with the interval: under "
               f"{markdown_text(name)} each is {own:.2f} times its value under "
               f"{markdown_text(comparison.reference)}, a change of scale, not of the patient "
               "(in log units they are the same).")

with st.expander("Analyst's details"):
    st.dataframe(recalibration.set_table(comparison), hide_index=True)
    identity = comparison.identity
    st.markdown(
        f"Method {config.method}, α = {comparison.alpha:g}, units: {markdown_text(units)}; "
        f"the fitted components, the background ({comparison.background_size} training rows) "
        "and the coalitions are the same for every set, so only the calibration game changes. "
        "Each set's calibration-driven part has a 90% percentile interval from "
        f"{comparison.calibration_bootstrap} resamples of its own rows; the change's interval "
        "is the 90% percentile interval of the difference over pairs of resamples, each set "
        "resampled independently (its own random stream). In width units of a multiplicative "
        "family every part is its log-unit part times the set's logarithmic-mean factor "
        "L = (U − U∅)/(ln U − ln U∅), which depends on both the width and the featureless "
        "width, so the instance-driven parts differ between sets by L_B/L_A (not by "
        "q̂_B/q̂_A) while in log units they are identical. "
        f"Identity checks: Σ change of the totals vs the change of (width − featureless "
        f"width): {identity['total_change_gap']:.1e}; Σ change of the calibration-driven "
        f"parts in {comparison.separating_units} units: "
        f"{identity['calibration_change_gap']:.1e}; instance-driven parts identical in "
        f"{comparison.separating_units} units: "
        f"{'yes' if identity['instance_identical'] else 'no'}"
        + ("" if identity["efficient"] else
           " (this method is not efficient: the sums are reported, not exact)") + ".")

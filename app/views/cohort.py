"""Cohort: widths, coverage, the calibration-driven vector and the instance-driven spread."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app import charts, summaries, widgets
from app.state import units_label

st.title("Cohort")
results = widgets.require_results()
report = results.report
e = report.explanation
d = e.decomposition
units = units_label(results)
config = results.config

cover = summaries.coverage(report)
cols = st.columns(4)
cols[0].metric("Patients explained", f"{len(report.patient_ids)}")
cols[1].metric("Median width", f"{np.median(e.width):.4g}",
               delta=f"{np.median(e.width) - e.base_width:+.4g} vs featureless",
               delta_color="off", delta_arrow="off")
cols[2].metric("Featureless width", f"{e.base_width:.4g}",
               help="The width with every feature removed (masked over the background).")
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

widgets.chart(charts.width_histogram(e.width, base_width=e.base_width))

# On the additive scale the calibration-driven part is one vector for the whole cohort; in
# width units a multiplicative family rescales it per patient, so the cohort sees its mean.
spread = float(np.ptp(d.calibration, axis=0).max()) if len(d.calibration) else 0.0
one_vector = spread <= 1e-9 * max(float(np.abs(d.calibration).max(initial=0.0)), 1.0)
vector = d.calibration[0] if one_vector else d.calibration.mean(axis=0)
order = charts.feature_order(vector, np.abs(d.instance).mean(axis=0))
label = (f"α = {e.alpha:g} · calibration n = {e.n_calibration} · background "
         f"{e.background_size}")
left, right = st.columns(2)
with left:
    title = ("Calibration-driven (one vector for the cohort)" if one_vector
             else "Calibration-driven (cohort mean)")
    widgets.chart(charts.vector_bars(d.features, vector, order, view="calibration", units=units,
                                     title=f"{title}<br><sup>{label}</sup>"))
    if not one_vector:
        st.caption("In width units a multiplicative family scales the calibration-driven part "
                   "by each patient's width factor; this is the mean over patients. Switch to "
                   "log units to see the single vector.")
    st.caption(f"Specific to α = {e.alpha:g}: a feature's calibration-driven sign can change "
               "with α.")
with right:
    widgets.chart(charts.instance_distribution(d.features, d.instance, order, units=units))
    st.caption("Each box spans the middle half of the patients; the whiskers and dots show "
               "the rest.")

disagreement = summaries.sign_disagreement(report)
widgets.chart(charts.sign_disagreement_bars(
    disagreement["feature"], disagreement["calibration_vs_instance"],
    disagreement["total_vs_instance"]))
st.caption("Calibration vs instance: the two parts pull in opposite directions. Total vs "
           "instance: the usual (total) attribution shows the patient's own effect with the "
           "wrong sign.")
st.dataframe(
    disagreement.assign(
        calibration_vs_instance=lambda f: (100 * f["calibration_vs_instance"]).round(1),
        total_vs_instance=lambda f: (100 * f["total_vs_instance"]).round(1),
    ).rename(columns={"calibration_vs_instance": "% calibration vs instance",
                      "total_vs_instance": "% total vs instance"}),
    hide_index=True,
)
st.caption(f"Setup: {config.options.model}, {config.options.family}, {config.method}; "
           f"q̂ = {e.q_hat:.4g}; units: {units}.")

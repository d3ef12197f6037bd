"""A sampled method's Monte Carlo standard errors are shown with the patient's attributions."""

from __future__ import annotations

import numpy as np
from dashboard_helpers import errors, new_app, run_linear, shown_table

from cpdecomp.app import charts


def test_side_by_side_bars_draw_two_standard_error_whiskers():
    features = ["a", "b"]
    parts = [np.array([0.5, -0.2]), np.array([-0.1, 0.4]), np.array([0.4, 0.2])]
    errors = [np.array([0.01, 0.02]), np.array([0.03, 0.04]), np.array([0.05, 0.06])]
    fig = charts.side_by_side_bars(features, *parts, units="width", errors=errors)
    order = charts.feature_order(parts[2])  # by |total|
    for trace, se in zip(fig.data, errors, strict=True):
        np.testing.assert_allclose(trace.error_x.array, 2 * se[order])
    plain = charts.side_by_side_bars(features, *parts, units="width")
    assert all(trace.error_x.array is None for trace in plain.data)


def test_patient_page_lists_standard_errors_for_a_sampled_method():
    at = run_linear(new_app(), attribution_method="permutation", budget=16)
    at.switch_page("views/patient.py").run()
    assert errors(at) == []
    table = shown_table(at)
    for name in ("calibration ± SE", "instance ± SE", "total ± SE"):
        assert name in table.columns
        assert (table[name] >= 0).all() and table[name].notna().all()
    assert any("Monte Carlo standard errors" in c.value for c in at.caption)

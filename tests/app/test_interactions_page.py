"""Cohort page, "Features that act together": folded and computed on request; its table is the
library's strongest pairs; a run without the exact lattice says why there is none."""

from __future__ import annotations

import numpy as np
from dashboard_helpers import errors, new_app, run_linear

from cpdecomp import prepare_study


def test_pairs_table_is_the_librarys_strongest_pairs() -> None:
    at = run_linear(new_app())
    at.switch_page("views/cohort.py").run()
    assert errors(at) == []
    assert "_interactions" not in at.session_state  # nothing computed until asked
    at.toggle(key="interactions_on").set_value(True).run()
    assert errors(at) == []
    tables = [d.value for d in at.dataframe if "Features" in d.value.columns]
    assert len(tables) == 1
    shown = tables[0]
    config, dataset = at.session_state["last_run"], at.session_state["run_dataset"]
    study = prepare_study(dataset.patients, config.options, train=dataset.train,
                          calibration=dataset.calibration, models=dataset.models)
    expected = study.interactions(alpha=config.alpha).strongest(top=10)
    assert list(shown["Features"]) == [f"{a} & {b}" for a, b in
                                       zip(expected.feature_a, expected.feature_b, strict=True)]
    for column, view in (("Calibration-driven", "calibration"), ("Instance-driven", "instance"),
                         ("Total", "total")):
        np.testing.assert_allclose(shown[column], expected[view], rtol=1e-12, atol=0)
    assert shown["Together they"].str.match(r"^(widen|narrow) for \d+% of patients$").all()


def test_a_sampling_method_says_why_there_are_no_pairs() -> None:
    at = run_linear(new_app(), attribution_method="permutation")
    at.switch_page("views/cohort.py").run()
    assert errors(at) == []
    assert any("only the exact method computes" in i.value for i in at.info)
    assert not [t for t in at.toggle if t.key == "interactions_on"]


def test_the_calibration_pairs_are_called_the_same_for_everyone_only_where_they_are() -> None:
    """In width units a multiplicative family's calibration-driven pairs are scaled by each
    patient's width factor (they differ by patient); in log units they are one value."""
    at = run_linear(new_app())  # the normalized family: multiplicative
    at.switch_page("views/cohort.py").run()
    at.toggle(key="interactions_on").set_value(True).run()
    interactions = at.session_state["_interactions"][1]
    spread = np.ptp(interactions.calibration, axis=0).max()
    assert spread > 1e-6 * np.abs(interactions.calibration).max()
    captions = " ".join(c.value for c in at.caption)
    assert "so it is the same for every patient" not in captions
    assert "differs from patient to patient" in captions
    at.radio(key="units").set_value("log").run()
    assert errors(at) == []
    captions = " ".join(c.value for c in at.caption)
    assert "so it is the same for every patient" in captions

"""CQR-r with linear quantile models: two straight lines cross somewhere, so the range
f_hi - f_lo goes <= 0 at some (masked) rows and CQR-r is refused. The fitted system says so up
front (a warning), and the refusal says why and points to cqr."""

import numpy as np
import pandas as pd
import pytest

from cpdecomp import StudyOptions, fit_system, prepare_study
from cpdecomp.core.data import split_rows
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.system import LINEAR_CQR_R_NOTE
from cpdecomp.sample_data import SAMPLES, load_sample


def test_the_crossing_warning_comes_before_the_refusal():
    sample = SAMPLES["rand_hie"]
    study = prepare_study(load_sample("rand_hie"), StudyOptions(
        sample.target, sample.id_column, family="cqr-r", model="linear"))
    notes = [w for w in study.system.fitted.warnings if "cross" in w]
    assert len(notes) == 1 and LINEAR_CQR_R_NOTE in notes[0] and "cqr family" in notes[0]
    with pytest.raises(CpdecompError, match="cross"):
        study.explain(alpha=0.1)


def test_a_refusal_at_calibration_rows_says_why_for_linear_models():
    sample = SAMPLES["rand_hie"]
    table = load_sample("rand_hie")
    y = table[sample.target].to_numpy(dtype=float)
    features = [c for c in table.columns if c not in (sample.target, sample.id_column)]
    refusals = []
    for seed in range(5):  # the calibration rows themselves cross on 3 of these 5 splits
        train, calibration, _ = split_rows(len(table), (0.5, 0.25, 0.25), seed)
        fitted = fit_system(table.iloc[train], y[train], features, family="cqr-r",
                            model="linear", seed=seed)
        system = fitted.conformalize(table.iloc[calibration], y[calibration])
        try:
            system.quantile(0.1)
        except CpdecompError as refusal:
            refusals.append(str(refusal))
    assert len(refusals) == 3
    for text in refusals:
        assert "calibration row" in text and LINEAR_CQR_R_NOTE in text and "cqr family" in text


def test_no_warning_when_the_lines_do_not_cross():
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(400, 2))
    y = x[:, 0] + (0.5 + x[:, 1]) * rng.normal(size=400)
    fitted = fit_system(pd.DataFrame(x, columns=["a", "b"]), y, family="cqr-r", model="linear")
    assert not [w for w in fitted.warnings if "cross" in w]

"""The normalized family's sigma stays above its floor, and says so when it cannot.

sigma is a random forest on |out-of-fold residual|: every leaf is a mean of non-negative values,
so sigma at any row, and any mean of it over a background, is at least the mean over trees of
each tree's smallest leaf (core.models.sigma_lower_bound). On the bundled samples, with the
default settings, that bound is above the floor, so no row, patient or masked row can sit there.
"""

import numpy as np
import pandas as pd
import pytest

from cpdecomp import StudyOptions, fit_system, prepare_study, system_from_models
from cpdecomp.core.explainer import draw_background
from cpdecomp.core.games import MaskedEvaluator
from cpdecomp.core.models import sigma_lower_bound
from cpdecomp.sample_data import SAMPLES, load_sample

REAL_SAMPLES = ["diabetes", "actg175", "rand_hie"]


@pytest.mark.parametrize("name", REAL_SAMPLES)
def test_no_row_of_a_bundled_sample_reaches_the_sigma_floor(name):
    sample = SAMPLES[name]
    study = prepare_study(load_sample(name), StudyOptions(sample.target, sample.id_column))
    fitted = study.system.fitted
    sigma = fitted.components["sigma"]
    assert sigma.floor is not None and sigma.floor > 0
    for rows in (fitted.training_rows, study.system.calibration_rows, study.patient_rows):
        raw = np.asarray(sigma.predictor.predict(rows))
        assert raw.min() > sigma.floor
        assert fitted.rows_at_sigma_floor(rows) == 0
    lowest = sigma_lower_bound(sigma.predictor)
    assert lowest is not None and sigma.floor < lowest <= raw.min()
    assert not [w for w in study.warnings if "floor" in w]


def test_the_lower_bound_holds_for_every_masked_sigma():
    rng = np.random.default_rng(0)
    table = pd.DataFrame(rng.normal(size=(300, 4)), columns=["a", "b", "c", "d"])
    y = table["a"] + np.exp(table["b"]) * rng.normal(size=300)
    fitted = fit_system(table, y, family="normalized", model="gbm", seed=0)
    sigma = fitted.components["sigma"]
    forest = sigma.predictor.estimator
    smallest_leaves = [tree.tree_.value[tree.tree_.children_left == -1].min()
                       for tree in forest.estimators_]
    lowest = sigma_lower_bound(sigma.predictor)
    np.testing.assert_allclose(lowest, np.mean(smallest_leaves), rtol=1e-15)
    assert min(smallest_leaves) >= 0
    background = draw_background(fitted.training_rows, 50, seed=0)
    coalitions = rng.random((40, 4)) < 0.5
    masked = MaskedEvaluator({"sigma": sigma}, background, path="brute").evaluate(
        coalitions, fitted.training_rows[:60], ["sigma"])["sigma"]
    assert masked.min() >= lowest > sigma.floor


def test_a_sigma_at_its_floor_is_counted_and_warned_about():
    """A user's sigma that is 0 where a < 0: those training rows are at the floor."""
    rng = np.random.default_rng(1)
    table = pd.DataFrame({"a": rng.normal(size=200), "b": rng.normal(size=200)})
    table["y"] = table["a"] + rng.normal(size=200)
    fitted = system_from_models(
        "normalized", {"f": lambda frame: frame["a"].to_numpy(),
                       "sigma": lambda frame: np.where(frame["a"] < 0, 0.0, 1.0)},
        table, target="y", floors={"sigma": 0.05})
    expected = int((table["a"] < 0).sum())
    assert 0 < expected < 200
    assert fitted.rows_at_sigma_floor(fitted.training_rows) == expected
    assert any(f"at its floor for {expected} of 200 training rows" in w for w in fitted.warnings)
    # The forest sigma fitted for the same f when none is given has no such rows.
    with pytest.warns(UserWarning, match="no sigma model was given"):
        own = system_from_models("normalized", {"f": lambda frame: frame["a"].to_numpy()},
                                 table, target="y")
    assert own.rows_at_sigma_floor(own.training_rows) == 0
    assert not [w for w in own.warnings if "floor" in w]


def test_linear_normalized_masks_f_in_closed_form_and_sigma_by_exact_tables():
    rng = np.random.default_rng(4)
    table = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    table["ward"] = rng.choice(["north", "south", "east"], size=200)
    y = table["a"] * 2 + (1 + np.abs(table["b"])) * rng.normal(size=200)
    fitted = fit_system(table, y, family="normalized", model="linear", seed=0)
    background = draw_background(fitted.training_rows, 20, seed=0)
    rows = fitted.training_rows[:30]
    coalitions = rng.random((25, rows.shape[1])) < 0.5
    coalitions[0], coalitions[1] = False, True
    fast = MaskedEvaluator(fitted.components, background)
    assert fast.path_of("f") == "additive" and fast.path_of("sigma") == "tables"
    brute = MaskedEvaluator(fitted.components, background, path="brute")
    for name in fitted.components:
        quick = fast.evaluate(coalitions, rows, [name])[name]
        slow = brute.evaluate(coalitions, rows, [name])[name]
        np.testing.assert_allclose(quick, slow, rtol=0, atol=1e-11 * np.abs(slow).max())

"""The normalized family's sigma stays above its floor, and says so when it cannot.

sigma is a histogram gradient boosting of |out-of-fold residual| with a log link (Poisson
deviance): sigma = exp(eta), eta a sum of trees, so sigma at any row, and any mean over a
background (of eta, as masking takes it, or of sigma itself), is at least exp(baseline + the sum
over trees of each tree's smallest leaf) (core.models.sigma_lower_bound). On the bundled
samples, with the default settings, that bound is above the floor, so no row, patient or masked
row can sit there.
"""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from cpdecomp import StudyOptions, fit_system, prepare_study, system_from_models
from cpdecomp.core.explainer import draw_background
from cpdecomp.core.games import MaskedEvaluator
from cpdecomp.core.models import (
    Component,
    ResponsePredictor,
    difficulty_component,
    sigma_lower_bound,
)
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
        raw = replace(sigma, floor=None).predict(rows)  # sigma before its floor
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
    booster = sigma.predictor.estimator
    assert booster.loss == "poisson"
    # sigma is the booster's own prediction (scikit-learn's exp of its raw margin)
    rows = fitted.training_rows
    np.testing.assert_allclose(replace(sigma, floor=None).predict(rows), booster.predict(rows),
                               rtol=1e-12)
    # the bound from the booster's own leaves, read here straight from its tree records
    smallest = [tree.nodes["value"][tree.nodes["is_leaf"] == 1].min()
                for (tree,) in booster._predictors]
    lowest = sigma_lower_bound(sigma.predictor)
    np.testing.assert_allclose(lowest, np.exp(booster._baseline_prediction[0][0]
                                               + np.sum(smallest)), rtol=1e-12)
    far = rng.normal(scale=10.0, size=(2000, 4))  # rows far outside the training data
    assert booster.predict(far).min() >= lowest > sigma.floor
    background = draw_background(fitted.training_rows, 50, seed=0)
    coalitions = rng.random((40, 4)) < 0.5
    masked = MaskedEvaluator({"sigma": sigma}, background, path="brute").evaluate(
        coalitions, fitted.training_rows[:60], ["sigma"])["sigma"]
    assert masked.min() >= lowest > sigma.floor
    # the mean of sigma itself over the background (not of its log) is bounded too
    response = Component("sigma", ResponsePredictor(sigma.predictor))
    means = MaskedEvaluator({"sigma": response}, background, path="brute").evaluate(
        coalitions, fitted.training_rows[:60], ["sigma"])["sigma"]
    assert means.min() >= lowest
    assert (means >= masked * (1 - 1e-12)).all()  # an arithmetic mean >= the geometric mean


def test_sigma_is_masked_on_its_log_scale_by_exact_tables_under_every_masking_but_brute():
    """sigma's log link is part of its definition: the response-scale option leaves it alone
    (it is for the models whose predictions are the outcome), so sigma keeps its tables."""
    rng = np.random.default_rng(2)
    table = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    y = table["a"] + np.exp(table["b"]) * rng.normal(size=200)
    fitted = fit_system(table, y, family="normalized", model="gbm", seed=0)
    sigma = fitted.components["sigma"]
    assert sigma.link == "log" and not sigma.has_response_scale
    background = draw_background(fitted.training_rows, 20, seed=0)
    rows = fitted.training_rows[:30]
    coalitions = rng.random((25, 3)) < 0.5
    brute = MaskedEvaluator({"sigma": sigma}, background, path="brute")
    expected = brute.evaluate(coalitions, rows, ["sigma"])["sigma"]
    for path in ("auto", "response"):
        evaluator = MaskedEvaluator({"sigma": sigma}, background, path=path)
        assert evaluator.path_of("sigma") == "tables"
        np.testing.assert_allclose(evaluator.evaluate(coalitions, rows, ["sigma"])["sigma"],
                                   expected, rtol=1e-12)
    # exp of the mean over the background of the booster's own raw margin, by hand
    booster = sigma.predictor.estimator
    for c in (0, 7):
        hybrid = np.where(coalitions[c], rows[:, None, :], background[None, :, :])
        margin = booster._raw_predict(hybrid.reshape(-1, 3))[:, 0].reshape(30, 20)
        by_hand = np.exp(margin.mean(axis=1))
        np.testing.assert_allclose(expected[c], np.maximum(by_hand, sigma.floor), rtol=1e-12)


def test_sigma_is_the_same_model_in_any_unit_of_the_target():
    """The Poisson deviance's hessian is the prediction: residuals in small units would grow
    no split (scikit-learn needs a hessian sum of 1e-3 per child) were they not fitted as a
    multiple of their mean."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, 3))
    spread = np.abs((0.2 + np.abs(x[:, 0])) * rng.normal(size=400))
    categorical = np.zeros(3, dtype=bool)
    units = difficulty_component(x, spread, categorical, seed=0)
    micro = difficulty_component(x, spread * 1e-6, categorical, seed=0)
    wide = units.predict(x)
    assert wide.max() > 3 * wide.min()  # it learned the difficulty
    np.testing.assert_allclose(micro.predict(x), wide * 1e-6, rtol=1e-9)
    assert micro.floor == pytest.approx(units.floor * 1e-6, rel=1e-12)


@pytest.mark.parametrize("rows", [40, 80, 160])
def test_sigma_learns_the_difficulty_from_a_small_training_set(rows):
    """A 160-row cohort has 80 training rows: leaves of a fixed 50 rows let no tree split, so
    sigma was one constant and every patient got the same width (the browser tests' cohorts)."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(rows, 3))
    spread = np.abs((0.1 + 2 * (x[:, 0] > 0)) * rng.normal(size=rows))
    sigma = difficulty_component(x, spread, np.zeros(3, dtype=bool), seed=0).predict(x)
    easy, hard = sigma[x[:, 0] < -0.5], sigma[x[:, 0] > 0.5]
    assert np.median(hard) > 2 * np.median(easy), (np.median(easy), np.median(hard))


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
    # The built-in sigma fitted for the same f when none is given has no such rows.
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

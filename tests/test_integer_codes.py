"""A brought Pipeline that one-hot encodes integer codes (ward 1, 2, 3) gets tree tables.

Before the fix such a column stayed numeric in the encoded rows: a split on one of its one-hot
columns is "ward == 2", which is no threshold on the raw number, so the Pipeline fell to brute
force (issue 35 item 3: 442 s for the calibration step against 1.8 s with text codes, with no
warning). The numbers the Pipeline's encoder was fitted with are now coded as categories, like
text, and given back to the model as the numbers themselves: the same predictions, tree tables
that agree with brute force, and no hybrid row run through the model.

The model is read back from a skops file, as a hospital would bring it (never pickle).
"""

import functools

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import make_column_transformer
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder

from cpdecomp.core.data import FeatureKind
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.explainer import Explainer
from cpdecomp.core.games.masking import MaskedEvaluator, has_fast_path
from cpdecomp.core.model_files import load_model_file
from cpdecomp.core.system import system_from_models

skops_io = pytest.importorskip("skops.io")

FEATURES = ["age", "ward", "bp"]


@functools.cache
def tables():
    rng = np.random.default_rng(35)
    n = 900
    ward = rng.integers(1, 5, n)  # integer codes 1..4
    frame = pd.DataFrame({"age": rng.uniform(20, 90, n), "ward": ward,
                          "bp": rng.normal(120, 15, n)})
    frame["y"] = (0.05 * frame.age + 2.0 * (ward == 2) - 1.5 * (ward == 4)
                  + 0.01 * frame.bp + rng.normal(scale=0.5, size=n))
    return frame.iloc[:400], frame.iloc[400:600], frame.iloc[600:]


def skops_file(tmp_path, encoder, last):
    fit, *_ = tables()
    model = make_pipeline(make_column_transformer((encoder, ["ward"]), remainder="passthrough"),
                          last).fit(fit[FEATURES], fit.y)
    skops_io.dump(model, tmp_path / "model.skops")
    return load_model_file(tmp_path / "model.skops")


LAST_STEPS = {
    "one-hot + histogram boosting": (lambda: OneHotEncoder(handle_unknown="ignore"),
                                     lambda: HistGradientBoostingRegressor(max_iter=30,
                                                                           random_state=0)),
    "one-hot + random forest": (lambda: OneHotEncoder(sparse_output=False),
                                lambda: RandomForestRegressor(n_estimators=15, max_depth=6,
                                                              random_state=0)),
    "ordinal + histogram boosting": (lambda: OrdinalEncoder(),
                                     lambda: HistGradientBoostingRegressor(max_iter=30,
                                                                           random_state=0)),
}


@pytest.mark.parametrize("kind", LAST_STEPS)
def test_integer_codes_take_the_tree_tables_and_agree_with_brute_force(kind, tmp_path):
    encoder, last = LAST_STEPS[kind]
    model = skops_file(tmp_path, encoder(), last())
    _, pool, rest = tables()
    calibration, patients = rest.iloc[:150], rest.iloc[150:]
    fitted = system_from_models("absolute", {"f": model}, pool[[*FEATURES, "y"]], target="y")
    assert has_fast_path(fitted.components["f"])  # failed on main: brute force
    assert fitted.encoder.kinds_[1] == FeatureKind("ward", ("1", "2", "3", "4"), numbers=True)
    system = fitted.conformalize(calibration[FEATURES], calibration.y)
    result = Explainer(system, background_size=40).explain(patients[FEATURES])
    # The model is given the numbers it was fitted on: its own predictions.
    np.testing.assert_allclose(result.prediction, model.predict(patients[FEATURES]),
                               rtol=1e-12, atol=0)
    d = result.decomposition
    np.testing.assert_allclose(d.total, d.calibration + d.instance, rtol=0, atol=1e-10)

    rows = fitted.encode(patients.iloc[:15])
    background = fitted.training_rows[:25]
    fast = MaskedEvaluator(fitted.components, background)
    assert fast.path_of("f") == "tables"
    coalitions = np.array([[a, b, c] for a in (0, 1) for b in (0, 1) for c in (0, 1)],
                          dtype=bool)
    values = fast.evaluate(coalitions, rows, ["f"])["f"]
    assert fast.model_rows == 0  # no hybrid row run through the model
    slow = MaskedEvaluator(fitted.components, background, path="brute")
    np.testing.assert_allclose(values, slow.evaluate(coalitions, rows, ["f"])["f"],
                               rtol=1e-12, atol=1e-12)


def test_a_bare_tree_model_beside_the_pipeline_reads_the_numbers_through_their_codes(tmp_path):
    """sigma a bare random forest on the same columns: its threshold on ward is rewritten as a
    test on ward's codes, so it keeps its tables too."""
    model = skops_file(tmp_path, OneHotEncoder(handle_unknown="ignore"),
                       HistGradientBoostingRegressor(max_iter=20, random_state=0))
    fit, pool, _ = tables()
    spread = np.abs(fit.y - model.predict(fit[FEATURES])) + 0.3
    sigma = RandomForestRegressor(n_estimators=10, max_depth=5, random_state=0).fit(
        fit[FEATURES], spread)
    fitted = system_from_models("normalized", {"f": model, "sigma": sigma},
                                pool[[*FEATURES, "y"]], target="y")
    assert all(has_fast_path(c) for c in fitted.components.values())
    rows = fitted.encode(pool.iloc[:10])
    np.testing.assert_allclose(fitted.components["sigma"].predict(rows),
                               sigma.predict(pool[FEATURES].iloc[:10]), rtol=1e-12)
    coalitions = np.array([[True, False, True], [False, True, False], [True, True, False]])
    fast = MaskedEvaluator(fitted.components, fitted.training_rows[:20])
    slow = MaskedEvaluator(fitted.components, fitted.training_rows[:20], path="brute")
    np.testing.assert_allclose(fast.evaluate(coalitions, rows, ["sigma"])["sigma"],
                               slow.evaluate(coalitions, rows, ["sigma"])["sigma"], rtol=1e-12)
    assert fast.model_rows == 0


def test_a_code_neither_the_model_nor_the_pool_knows_is_refused_by_column_and_row(tmp_path):
    model = skops_file(tmp_path, OneHotEncoder(handle_unknown="ignore"),
                       HistGradientBoostingRegressor(max_iter=20, random_state=0))
    _, pool, rest = tables()
    fitted = system_from_models("absolute", {"f": model}, pool[[*FEATURES, "y"]], target="y")
    unknown = rest[FEATURES].reset_index(drop=True)
    unknown.loc[2, "ward"] = 9
    with pytest.raises(CpdecompError, match=r"column 'ward' has a category in data row 3"):
        fitted.encode(unknown)

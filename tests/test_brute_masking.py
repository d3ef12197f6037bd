"""Brute-force masking against a plain loop written here: for every coalition S and row x, the
hybrid rows (the background with x's values on S) are built one by one and handed to the
model's own predict, and g_S(x) is their mean. The evaluator's batched, chunked path must give
the same numbers whatever its call size (chunks that split a coalition, a short last chunk)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import make_column_transformer
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

from cpdecomp.core.games import MaskedEvaluator
from cpdecomp.core.games.masking import HYBRID_BYTES_PER_CALL
from cpdecomp.core.models import Component
from cpdecomp.core.models.design import EncodedPredictor
from cpdecomp.core.system import system_from_models

D = 4
M, N_ROWS = 7, 6
FEATURES = ["age", "ward", "dose"]


def all_coalitions(d: int) -> np.ndarray:
    return np.array(list(itertools.product([False, True], repeat=d)))


def hand_brute(predict, background: np.ndarray, rows: np.ndarray,
               coalitions: np.ndarray) -> np.ndarray:
    """(coalitions, rows): mean of predict over hybrids built by hand, one at a time (one
    predict call per coalition, which changes no value: each row is predicted on its own)."""
    out = np.empty((len(coalitions), len(rows)))
    for s, keep in enumerate(coalitions):
        hybrids = []
        for x in rows:
            for b in background:
                z = b.copy()
                z[keep] = x[keep]
                hybrids.append(z)
        values = np.asarray(predict(np.array(hybrids)), dtype=float)
        out[s] = values.reshape(len(rows), len(background)).mean(axis=1)
    return out


@pytest.fixture(scope="module")
def components():
    """Histogram gradient boosting for f and a floored σ (the floor applies after the mean)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, D))
    y = 2 * x[:, 0] + np.sin(3 * x[:, 1]) * x[:, 2] + rng.normal(size=300) * np.abs(x[:, 3])
    f = HistGradientBoostingRegressor(max_iter=30, max_leaf_nodes=15, random_state=0)
    sigma = HistGradientBoostingRegressor(max_iter=30, max_leaf_nodes=15, random_state=0)
    f.fit(x, y)
    sigma.fit(x, np.abs(y - f.predict(x)))
    floor = float(np.quantile(sigma.predict(x), 0.3))  # binds on some masked values
    return x, {"f": Component("f", EncodedPredictor(f)),
               "sigma": Component("sigma", EncodedPredictor(sigma), floor=floor)}


@pytest.fixture(scope="module")
def by_hand(components):
    x, components = components
    background, rows = x[:M], x[-N_ROWS:]
    coalitions = all_coalitions(D)
    want = {name: component.finish(hand_brute(component.predictor.predict, background, rows,
                                              coalitions))
            for name, component in components.items()}
    return components, background, rows, coalitions, want


# 4 pairs a call splits each coalition's 6 rows across calls and leaves a short last call.
@pytest.mark.parametrize("rows_per_call", [4 * M + 3, 10**6])
def test_brute_force_equals_a_hand_loop_over_every_coalition(by_hand, rows_per_call):
    components, background, rows, coalitions, want = by_hand
    brute = MaskedEvaluator(components, background, rows_per_call=rows_per_call, path="brute")
    inner = len(coalitions) - 2
    if rows_per_call < 10**6:
        assert brute.pairs_per_call == 4
    else:  # one call holds every pair
        assert brute.pairs_per_call >= inner * N_ROWS
    got = brute.evaluate(coalitions, rows, list(components))
    for name in components:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=0)
    # one model row per hybrid of each inner coalition, plus the full rows and the background
    assert brute.model_rows == len(components) * (inner * N_ROWS * M + N_ROWS + M)


def test_brute_force_of_a_user_pipeline_equals_its_own_predict_on_hybrid_frames():
    """A scikit-learn Pipeline reading named columns (text categories, missing values): the
    hand loop builds the hybrid rows as DataFrames of the raw table and calls the pipeline."""
    rng = np.random.default_rng(4)
    n = 200
    table = pd.DataFrame({"age": rng.uniform(20, 80, n), "ward": rng.choice(["a", "b", "c"], n),
                          "dose": rng.normal(size=n)})
    table.loc[rng.random(n) < 0.1, "dose"] = np.nan
    table["y"] = (0.05 * table.age + 2.0 * (table.ward == "a") + np.nan_to_num(table.dose)
                  + rng.normal(scale=0.5, size=n))
    model = make_pipeline(
        make_column_transformer((OneHotEncoder(handle_unknown="ignore"), ["ward"]),
                                (SimpleImputer(), ["age", "dose"])),
        RandomForestRegressor(n_estimators=8, max_depth=4, random_state=0))
    model.fit(table[FEATURES].iloc[:120], table["y"].iloc[:120])
    fitted = system_from_models("absolute", {"f": model}, table.iloc[:150], target="y")
    raw_background = table[FEATURES].iloc[150:159].reset_index(drop=True)
    raw_rows = table[FEATURES].iloc[160:164].reset_index(drop=True)
    coalitions = all_coalitions(len(FEATURES))
    brute = MaskedEvaluator(fitted.components, fitted.encode(raw_background), rows_per_call=20,
                            path="brute")
    got = brute.evaluate(coalitions, fitted.encode(raw_rows), ["f"])["f"]
    want = np.empty_like(got)
    for s, keep in enumerate(coalitions):
        kept = [column for column, k in zip(FEATURES, keep, strict=True) if k]
        for i in range(len(raw_rows)):
            hybrids = raw_background.copy()
            for column in kept:
                hybrids[column] = raw_rows.loc[i, column]
            want[s, i] = np.mean(model.predict(hybrids))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def test_a_call_holds_at_most_the_byte_budget_of_hybrid_rows():
    """Wide rows: fewer (coalition, row) pairs per call, never fewer than one."""
    calls: list[int] = []

    class Counting:
        def predict(self, encoded):
            calls.append(encoded.nbytes)
            return encoded[:, 0] * 2.0

    for d, m in [(10, 50), (400, 30), (2000, 400)]:
        calls.clear()
        rng = np.random.default_rng(d)
        background, rows = rng.normal(size=(m, d)), rng.normal(size=(40, d))
        coalitions = rng.random((3, d)) < 0.5
        coalitions[:, 0] = [True, False, True]
        brute = MaskedEvaluator({"f": Component("f", Counting())}, background, path="brute")
        got = brute.evaluate(coalitions, rows, ["f"])["f"]
        pair_bytes = m * d * 8
        assert max(calls[1:]) <= max(pair_bytes, HYBRID_BYTES_PER_CALL)  # calls[0]: background
        want = np.where(coalitions[:, :1], 2 * rows[None, :, 0], 2 * background[:, 0].mean())
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)

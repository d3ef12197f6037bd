"""A model library that spells column names its own way is matched by that spelling: LightGBM
stores 's1 tc' as 's1_tc', so the bundled diabetes columns were refused as a mismatch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cpdecomp import Explainer, load_table, system_from_models
from cpdecomp.core.errors import CpdecompError

lightgbm = pytest.importorskip("lightgbm")
SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "diabetes.csv"


def test_lightgbm_columns_with_spaces_match_and_stay_exact():
    table = load_table(SAMPLE, text_columns=["patient_id"])
    features = [c for c in table.columns if c not in ("patient_id", "progression")]
    assert any(" " in f for f in features)
    model = lightgbm.LGBMRegressor(n_estimators=20, verbose=-1, random_state=0).fit(
        table[features].iloc[:200], table["progression"].iloc[:200])
    fitted = system_from_models("absolute", {"f": model},
                                table[[*features, "progression"]].iloc[200:320],
                                target="progression")
    system = fitted.conformalize(table.iloc[320:400], table["progression"].iloc[320:400])
    explainer = Explainer(system, background_size=40)
    assert explainer.evaluator.path_of("f") == "tables"
    lower, upper = system.predict_interval(table[features].iloc[400:410], alpha=0.1)
    prediction = model.predict(table[features].iloc[400:410])
    np.testing.assert_allclose((lower + upper) / 2, prediction, rtol=1e-12)
    # The spelling only forgives LightGBM's own change: another column order is still refused.
    reordered = table[[*features[::-1], "progression"]].iloc[200:320]
    with pytest.raises(CpdecompError, match="another order"):
        system_from_models("absolute", {"f": model}, reordered, target="progression")

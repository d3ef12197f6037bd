"""The design matrix (linear model, forest) never reads a category it cannot tell apart.

A column whose training rows had no gaps has no learned missing flag: a flag column that is all
zeros in training gets no coefficient and no split, so a missing or unseen category would be
read as the first (reference) category. Those rows are refused with the column's name; gbm,
which has its own rule for missing values, and columns that had gaps in training still take them.
The normalized family's sigma is a histogram boosting whatever the model, so it takes them by
the same rule as gbm (with the linear model or the forest, f refuses them first).
"""

import numpy as np
import pandas as pd
import pytest

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.system import fit_system


def table(n=120, seed=0, gaps=False):
    rng = np.random.default_rng(seed)
    arm = rng.choice(["A", "B", "C"], size=n).astype(object)
    if gaps:
        arm[::10] = None
    x = rng.normal(size=n)
    effect = pd.Series(arm).map({"A": 0.0, "B": 3.0, "C": -3.0}).fillna(6.0).to_numpy()
    y = x + effect + rng.normal(scale=0.5, size=n)
    return pd.DataFrame({"x": x, "arm": arm}), y


def patients(arm_value):
    return pd.DataFrame({"x": [0.0, 0.5], "arm": ["A", arm_value]})


@pytest.mark.parametrize("model", ["linear", "rf"])
@pytest.mark.parametrize("family", ["absolute", "normalized", "cqr"])
@pytest.mark.parametrize("case", ["unseen", "missing"])
def test_an_unlearned_category_is_refused_by_column_name(model, family, case):
    train, y = table()
    system = fit_system(train, y, family=family, model=model).conformalize(*table(seed=1))
    with pytest.raises(CpdecompError, match="'arm' has a missing or unseen category in 1 row,"):
        system.predict_interval(patients("Z" if case == "unseen" else None), 0.1)
    with pytest.raises(CpdecompError, match="'arm' has a missing or unseen category"):
        fit_system(train, y, family=family, model=model).conformalize(
            patients("Z" if case == "unseen" else None), [0.0, 1.0])
    # Rows given already encoded are refused too (no name there: the feature's number).
    rows = system.fitted.encode(patients("B"))
    rows[1, 1] = np.nan
    with pytest.raises(CpdecompError, match="feature number 2 has a missing or unseen category"):
        system.fitted.point.predict(rows)


@pytest.mark.parametrize("family", ["absolute", "normalized", "cqr"])
@pytest.mark.parametrize("case", ["unseen", "missing"])
def test_gbm_takes_an_unlearned_category_by_its_missing_value_rule(family, case):
    train, y = table()
    system = fit_system(train, y, family=family, model="gbm").conformalize(*table(seed=1))
    lower, upper = system.predict_interval(patients("Z" if case == "unseen" else None), 0.1)
    assert np.isfinite(lower).all() and np.isfinite(upper).all()


@pytest.mark.parametrize("model", ["linear", "rf"])
@pytest.mark.parametrize("case", ["unseen", "missing"])
def test_a_column_with_gaps_in_training_reads_them_by_its_missing_flag(model, case):
    """Training had gaps in 'arm' (their mean effect +6): a gap or an unseen category now goes
    to the learned missing flag, so its prediction is near +6, not the reference's 0."""
    train, y = table(n=400, gaps=True)
    system = fit_system(train, y, family="absolute", model=model).conformalize(
        *table(seed=1, gaps=True))
    prediction = system.predict(patients("Z" if case == "unseen" else None))
    np.testing.assert_allclose(prediction, [0.0, 6.5], atol=1.0)

"""predict_interval takes patients as a table of the training's feature columns (issue 18).

Reordering the columns or holding a string column gives exactly the encoded path's intervals;
a missing or extra column is refused by name.
"""

import numpy as np
import pandas as pd
import pytest

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.system import fit_system


def mixed_table(seed=0, n=240):
    rng = np.random.default_rng(seed)
    ward = rng.choice(["north", "south", "east"], size=n)
    age = rng.uniform(20, 80, size=n)
    dose = rng.normal(size=n)
    dose[rng.random(n) < 0.1] = np.nan
    y = 0.05 * age + np.where(ward == "north", 2.0, 0.0) + np.nan_to_num(dose) \
        + rng.normal(scale=0.5 + (ward == "east"), size=n)
    return pd.DataFrame({"age": age, "ward": ward, "dose": dose}), y


@pytest.fixture(scope="module", params=["gbm", "linear"])
def system(request):
    table, y = mixed_table()
    fitted = fit_system(table.iloc[:120], y[:120], family="normalized", model=request.param)
    return fitted.conformalize(table.iloc[120:200], y[120:200]), table.iloc[200:]


def test_reordered_and_string_columns_give_the_encoded_intervals(system):
    conformal, patients = system
    expected = conformal.interval_at_rows(conformal.fitted.encode(patients), 0.1)
    for order in (["age", "ward", "dose"], ["dose", "ward", "age"], ["ward", "age", "dose"]):
        lower, upper = conformal.predict_interval(patients[order], 0.1)
        np.testing.assert_array_equal(lower, expected[0])
        np.testing.assert_array_equal(upper, expected[1])
    point = conformal.predict(patients[["dose", "age", "ward"]])
    np.testing.assert_array_equal(point, conformal.fitted.point.predict(
        conformal.fitted.encode(patients)))


def test_a_string_column_changes_the_interval_it_should(system):
    # The encoded path is not trivially constant: the ward is a real input of the model.
    conformal, patients = system
    other = patients.assign(ward="north")
    assert not np.array_equal(conformal.predict_interval(other, 0.1)[0],
                              conformal.predict_interval(patients, 0.1)[0])


@pytest.mark.parametrize(("columns", "named"), [
    (["age", "dose"], "lacks 'ward'"),
    (["age", "ward", "dose", "y"], "'y'"),
    (["age", "ward"], "lacks 'dose'"),
])
def test_a_missing_or_extra_column_is_refused_by_name(system, columns, named):
    conformal, patients = system
    table = patients.assign(y=1.0)[columns]
    with pytest.raises(CpdecompError, match=named):
        conformal.predict_interval(table, 0.1)


def test_an_encoded_matrix_is_refused_with_the_columns_named(system):
    conformal, patients = system
    with pytest.raises(CpdecompError, match="'age', 'ward', 'dose'"):
        conformal.predict_interval(conformal.fitted.encode(patients), 0.1)

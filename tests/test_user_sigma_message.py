"""A brought sigma model that predicts 0 or less is refused with what the user can do.

Before the fix the message said "raise the sigma floor", a setting that exists in neither the
command line nor the dashboard (issue 35 item 5). It now names the fixes that exist: a sigma
model that stays positive, no sigma model (cpdecomp fits one), a floor from Python, or the
absolute family; and the floor it names works.
"""

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.system import system_from_models


def tables():
    rng = np.random.default_rng(5)
    n = 300
    frame = pd.DataFrame({"age": rng.uniform(20, 90, n), "bp": rng.normal(120, 15, n)})
    frame["y"] = 0.05 * frame.age + rng.normal(scale=0.2 + 0.02 * frame.age, size=n)
    return frame.iloc[:150], frame.iloc[150:]


def models(train):
    point = LinearRegression().fit(train[["age", "bp"]], train.y)
    # A straight line through |residual|: below 0 for the youngest patients.
    spread = np.abs(train.y - point.predict(train[["age", "bp"]]))
    sigma = LinearRegression().fit(train[["age", "bp"]], spread - spread.mean() * 0.9)
    return {"f": point, "sigma": sigma}


def test_a_sigma_model_below_zero_is_refused_naming_fixes_that_exist():
    train, calibration = tables()
    brought = models(train)
    assert (brought["sigma"].predict(calibration[["age", "bp"]]) <= 0).any()
    fitted = system_from_models("normalized", brought, train, target="y")
    system = fitted.conformalize(calibration[["age", "bp"]], calibration.y)
    with pytest.raises(CpdecompError) as refused:
        system.quantile(0.1)  # the calibration scores need sigma > 0
    message = str(refused.value)
    assert "sigma floor" not in message  # no such setting (main said "raise the sigma floor")
    for fix in ("cannot predict 0 or less", "give no difficulty model",
                "floors={'sigma': 0.01}", "absolute family"):
        assert fix in message, (fix, message)


def test_the_floor_the_message_names_lets_the_model_run():
    train, calibration = tables()
    fitted = system_from_models("normalized", models(train), train, target="y",
                                floors={"sigma": 0.01})
    system = fitted.conformalize(calibration[["age", "bp"]], calibration.y)
    lower, upper = system.predict_interval(calibration[["age", "bp"]], 0.1)
    assert np.all(upper > lower)

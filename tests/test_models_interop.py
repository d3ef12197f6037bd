"""A report as shap.Explanation objects (one per view) and as the CLI's tidy DataFrame."""

import functools

import numpy as np
import pandas as pd
import pytest

from cpdecomp.core.output import tidy_frame
from cpdecomp.core.workflow import StudyOptions, prepare_study

shap = pytest.importorskip("shap")


@functools.cache
def report(family, units):
    rng = np.random.default_rng(0)
    n = 400
    table = pd.DataFrame({"age": rng.uniform(20, 80, n), "ward": rng.choice(["a", "b"], n),
                          "dose": rng.normal(size=n)})
    table["y"] = np.exp(0.01 * table.age + 0.5 * (table.ward == "a")
                        + 0.3 * rng.normal(size=n) * (1 + np.abs(table.dose)))
    study = prepare_study(table, StudyOptions(target="y", family=family, model="gbm",
                                              background=50))
    return study.explain(alpha=0.1, rows=range(8), units=units)


@pytest.mark.parametrize(("family", "units"), [("absolute", "width"), ("normalized", "width"),
                                               ("normalized", "log")])
def test_each_view_is_a_shap_explanation_that_adds_up(family, units):
    result = report(family, units)
    views = result.to_shap()
    d = result.explanation.decomposition
    assert list(views) == ["calibration", "instance", "total"]
    for name, view in views.items():
        np.testing.assert_array_equal(view.values, getattr(d, name))
        assert list(view.feature_names) == list(d.features)
    width = result.explanation.width if units == "width" else np.log(result.explanation.width)
    total = views["total"]
    np.testing.assert_allclose(total.base_values + total.values.sum(axis=1), width, rtol=1e-9)
    both = (views["calibration"].values + views["instance"].values).sum(axis=1)
    np.testing.assert_allclose(total.base_values + both, width, rtol=1e-9)


def test_shaps_own_operations_work_on_the_views():
    # shap's plots need matplotlib (not a dependency here); they read these same operations.
    views = report("normalized", "width").to_shap()
    d = report("normalized", "width").explanation.decomposition
    one = views["instance"][0]
    np.testing.assert_array_equal(one.values, d.instance[0])
    np.testing.assert_array_equal(views["total"].abs.mean(0).values,
                                  np.abs(d.total).mean(axis=0))
    ward = views["total"][:, "ward"]
    np.testing.assert_array_equal(ward.values, d.total[:, list(d.features).index("ward")])
    assert ward.display_data is not None


def test_to_frame_has_the_clis_columns_and_a_wide_layout():
    result = report("normalized", "width")
    long = result.to_frame()
    pd.testing.assert_frame_equal(long, tidy_frame(result))
    wide = result.to_frame("wide")
    assert len(wide) == 8
    d = result.explanation.decomposition
    for view in ("calibration", "instance", "total"):
        for j, name in enumerate(d.features):
            np.testing.assert_array_equal(wide[f"{view}:{name}"], getattr(d, view)[:, j])
    np.testing.assert_array_equal(wide["width"], result.explanation.width)

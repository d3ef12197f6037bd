"""The dashboard on tables wider than 62 features (the engine's coalitions have any width):
the budget check counts a design without building one too large to hold, and a Run on 70
features goes through."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from dashboard_helpers import csv_bytes, errors, new_app

from cpdecomp.app import planning, runs
from cpdecomp.core.attribution import METHODS, build_design
from cpdecomp.core.errors import CpdecompError


def test_a_large_design_is_counted_by_its_bound_and_refused_by_the_cell_limit() -> None:
    count = planning.coalition_count("permutation", 100, 100_000, 0)
    assert count == METHODS["permutation"].coalitions_at_most(100, 100_000)
    assert count * 100 > planning.DESIGN_CELLS_TO_COUNT  # not built: ~1 GB of masks
    size = runs.RunSize(n_features=100, n_train=3000, n_explained=1000, background=1000,
                        coalitions=count, brute_force_seconds=0.0)
    with pytest.raises(CpdecompError, match="command line"):
        runs.check_run_budget(size)


def test_a_small_design_is_counted_exactly_and_refusals_are_the_methods() -> None:
    assert planning.coalition_count("permutation", 12, 64, 3) == len(
        build_design("permutation", 12, 64, 3).coalitions)
    with pytest.raises(CpdecompError, match="16"):
        planning.coalition_count("exact", 70, None, 0)


def wide_table(n: int = 160, d: int = 70, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = x[:, 0] + (1 + np.abs(x[:, 1])) * rng.normal(size=n)
    frame = pd.DataFrame(x, columns=[f"f{j:02d}" for j in range(d)])
    frame["outcome"] = y
    return frame


@pytest.mark.slow
def test_a_run_on_70_features_goes_through() -> None:
    at = new_app()
    at.radio(key="data_source").set_value("upload").run()
    at.file_uploader(key="upload").set_value(("wide.csv", csv_bytes(wide_table()), "text/csv"))
    at.run()
    assert at.selectbox(key="target_column").value == "outcome"
    at.switch_page("views/setup.py").run()
    at.selectbox(key="model").set_value("linear")
    at.selectbox(key="attribution_method").set_value("permutation").run()
    at.number_input(key="budget").set_value(8)
    at.button(key="run").click().run(timeout=300)
    assert errors(at) == []
    assert any("Results for" in s.value for s in at.success)
    at.switch_page("views/patient.py").run(timeout=120)
    assert errors(at) == []
    assert at.session_state["last_run"].method == "permutation"

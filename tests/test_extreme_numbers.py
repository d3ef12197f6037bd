"""Numbers near the float limits, subnormals and infinities written as text: each ends in a
result or in one line that says what to do, never in "internal error", and no numpy warning
reaches the user (issue 32). Features near 1e308 once ended in "internal error: ValueError at
validation.py:186" after numpy's overflow warnings: scikit-learn's trees read features as
32-bit floats, where such a value is infinite.

The sweep runs the command line in-process over every case and family; a case marked "ok"
must give finite attributions, one marked "refused" one line naming the column.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_helpers import run_cli

from cpdecomp.core.data import MAX_FEATURE_MAGNITUDE, MAX_TARGET_MAGNITUDE

ROWS = 240
FAMILIES = ("absolute", "normalized", "gamma", "cqr")


def base(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    table = pd.DataFrame(rng.normal(size=(ROWS, 3)), columns=["a", "b", "c"])
    table["y"] = 5.0 + table["a"] + rng.gamma(2.0, 0.5, ROWS)  # positive, for gamma
    return table


def with_cells(column: str, values: list[object], rows: slice = slice(0, 30)) -> pd.DataFrame:
    table = base().astype({column: object})
    positions = range(*rows.indices(ROWS))
    for k, position in enumerate(positions):
        table.loc[position, column] = values[k % len(values)]
    return table


def scaled(column: str, factor: float) -> pd.DataFrame:
    table = base()
    table[column] = table[column] * factor
    return table


# (name, table, expected: "ok" or the words the one refusal line holds)
CASES: list[tuple[str, pd.DataFrame, str]] = [
    ("feature-1.7e308", with_cells("a", [1.7e308]), "feature 'a' has values beyond"),
    ("feature-minus-1.7e308", with_cells("b", [-1.7e308, 1.0]), "feature 'b' has values beyond"),
    ("feature-scaled-1e300", scaled("a", 1e300), "feature 'a' has values beyond"),
    ("feature-above-float32", with_cells("c", [3.5e38]), "feature 'c' has values beyond"),
    ("feature-only-in-patients", with_cells("a", [1e200], slice(ROWS - 3, ROWS)),
     "feature 'a' has values beyond"),
    ("feature-at-the-bound", scaled("a", MAX_FEATURE_MAGNITUDE / 10), "ok"),
    ("feature-subnormal", with_cells("b", [5e-324, -5e-324, 0.0]), "ok"),
    ("feature-scaled-subnormal", scaled("c", 1e-310), "ok"),
    ("feature-inf-as-text", with_cells("b", ["inf", "-Infinity"]),
     "feature 'b' has infinite values"),
    ("feature-overflowing-text", with_cells("c", ["1e400"]), "feature 'c' has infinite values"),
    ("target-1e308", with_cells("y", [1e308]), "target 'y' has values beyond"),
    ("target-minus-1.7e308", with_cells("y", [-1.7e308]), "target 'y' has values beyond"),
    ("target-inf-as-text", with_cells("y", ["inf"]), "target 'y' has infinite values"),
    ("target-at-the-bound", scaled("y", MAX_TARGET_MAGNITUDE / 100), "ok"),
    ("target-subnormal", scaled("y", 1e-310), "ok"),
]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(("name", "table", "expected"), CASES, ids=[c[0] for c in CASES])
def test_extreme_numbers_end_in_a_result_or_one_line(capsys, tmp_path: Path, name: str,
                                                     table: pd.DataFrame, expected: str,
                                                     family: str) -> None:
    path = tmp_path / f"{name}.csv"
    table.to_csv(path, index=False)
    out = tmp_path / "out.csv"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status, err = run_cli(capsys, "explain", path, "--target", "y", "--family", family,
                              "--model", "gbm", "--background", "16", "--out", out, "-q")
    assert "internal error" not in err, err
    assert "Traceback" not in err, err
    shown = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert not shown, [str(w.message) for w in shown]
    if expected == "ok":
        assert status == 0, err
        result = pd.read_csv(out)
        numbers = result.select_dtypes("number").to_numpy(dtype=float)
        assert np.isfinite(numbers).all(), name
        return
    lines = err.strip("\n").splitlines()
    assert status == 2 and len(lines) == 1, err
    assert expected in lines[0], lines[0]

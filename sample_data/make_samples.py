"""Regenerate the bundled sample tables from data that ships inside scikit-learn (no network).

    python -m sample_data.make_samples
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from sklearn.datasets import load_diabetes

HERE = Path(__file__).resolve().parent

DIABETES_COLUMNS = {
    "age": "age", "sex": "sex", "bmi": "bmi", "bp": "bp",
    "s1": "s1 tc", "s2": "s2 ldl", "s3": "s3 hdl", "s4": "s4 tch", "s5": "s5 ltg",
    "s6": "s6 glu", "target": "progression",
}


def diabetes() -> pd.DataFrame:
    """Efron et al.'s diabetes data in its original units, with a patient id."""
    table = load_diabetes(scaled=False, as_frame=True).frame.rename(columns=DIABETES_COLUMNS)
    table.insert(0, "patient_id", [f"P{i:04d}" for i in range(1, len(table) + 1)])
    return table


def main() -> None:
    diabetes().to_csv(HERE / "diabetes.csv", index=False)


if __name__ == "__main__":
    main()

"""Regenerate the bundled sample tables from data that ships inside Python packages (no network).

    python -m sample_data.make_samples

The diabetes table comes from scikit-learn (a dependency). The ACTG 175 and RAND HIE tables are
read from the data files that lifelines and statsmodels ship; those two packages are needed
only to regenerate the tables, never to load them, so they are located without being imported:

    pip install --no-deps lifelines==0.30.3 statsmodels==0.15.0

The synthetic and semi-synthetic tables are drawn from the generators in this package (seed 0).
See README.md beside this file for provenance and licences.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_diabetes

from cpdecomp.sample_data.semisynthetic import make_semisynthetic
from cpdecomp.sample_data.synthetic import make_synthetic

HERE = Path(__file__).resolve().parent

DIABETES_COLUMNS = {
    "age": "age", "sex": "sex", "bmi": "bmi", "bp": "bp",
    "s1": "s1 tc", "s2": "s2 ldl", "s3": "s3 hdl", "s4": "s4 tch", "s5": "s5 ltg",
    "s6": "s6 glu", "target": "progression",
}

ACTG_COLUMNS = {
    "pidnum": "patient_id", "age": "age", "wtkg": "weight_kg", "karnof": "karnofsky",
    "cd40": "cd4_baseline", "cd80": "cd8_baseline", "preanti": "prior_art_days",
    "symptom": "symptomatic", "gender": "male", "race": "nonwhite", "drugs": "iv_drugs",
    "hemo": "hemophilia", "arms": "arm", "cd420": "cd4_week20",
}
ACTG_ARMS = {0: "zidovudine", 1: "zidovudine+didanosine", 2: "zidovudine+zalcitabine",
             3: "didanosine"}

RAND_COLUMNS = {
    "zper": "patient_id", "xage": "age", "female": "female", "black": "black",
    "linc": "log_income", "educdec": "education_years", "num": "family_size",
    "mhi": "mental_health_index", "xghindx": "general_health_index",
    "disea": "chronic_diseases", "physlm": "physical_limitation", "coins": "coinsurance_pct",
    "idp": "individual_deductible", "mdvis": "md_visits",
}
RAND_PERSONS = 1500
RAND_SEED = 0


def package_file(package: str, relative: str) -> Path:
    """A data file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{package} is not installed: pip install --no-deps {package}")
    return Path(next(iter(spec.submodule_search_locations))) / relative


def diabetes() -> pd.DataFrame:
    """Efron et al.'s diabetes data in its original units, with a patient id."""
    table = load_diabetes(scaled=False, as_frame=True).frame.rename(columns=DIABETES_COLUMNS)
    table.insert(0, "patient_id", [f"P{i:04d}" for i in range(1, len(table) + 1)])
    return table


def actg175() -> pd.DataFrame:
    """ACTG 175 baseline covariates, treatment arm and CD4 count at week 20 (2,139 patients)."""
    raw = pd.read_csv(package_file("lifelines", "datasets/ACTG175.csv"))
    table = raw[list(ACTG_COLUMNS)].rename(columns=ACTG_COLUMNS)
    table["arm"] = table["arm"].map(ACTG_ARMS)
    return table.sort_values("patient_id").reset_index(drop=True)


def rand_hie() -> pd.DataFrame:
    """RAND HIE: first study year of 1,500 adults drawn at random (seed 0), MD visits as target."""
    raw = pd.read_csv(package_file("statsmodels", "datasets/randhie/src/randhie.csv"))
    adults = raw[(raw["year"] == 1) & (raw["xage"] >= 18)]
    rng = np.random.default_rng(RAND_SEED)
    chosen = adults.iloc[np.sort(rng.choice(len(adults), size=RAND_PERSONS, replace=False))]
    table = chosen[list(RAND_COLUMNS)].rename(columns=RAND_COLUMNS)
    whole = ["patient_id", "female", "black", "family_size", "physical_limitation",
             "coinsurance_pct", "individual_deductible", "md_visits"]
    table[whole] = table[whole].astype(int)
    return table.round(4).sort_values("patient_id").reset_index(drop=True)


def synthetic() -> pd.DataFrame:
    return make_synthetic(2000, seed=0).table.round(6)


def actg175_semisynthetic() -> pd.DataFrame:
    table = make_semisynthetic(seed=0).table
    table["outcome"] = table["outcome"].round(6)
    return table


def main() -> None:
    diabetes().to_csv(HERE / "diabetes.csv", index=False)
    actg175().to_csv(HERE / "actg175.csv", index=False)
    rand_hie().to_csv(HERE / "rand_hie.csv", index=False)
    synthetic().to_csv(HERE / "synthetic.csv", index=False)
    # The semi-synthetic table draws on actg175.csv, so it is written after it.
    actg175_semisynthetic().to_csv(HERE / "actg175_semisynthetic.csv", index=False)


if __name__ == "__main__":
    main()

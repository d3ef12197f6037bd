"""Sample tables bundled with cpdecomp; loading them needs no network.

Provenance and licence of every table: README.md beside this file. The generators behind the
synthetic tables are `sample_data.synthetic`, `sample_data.semisynthetic` and, for the method
page's closed-form worlds, `sample_data.known_answers`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Sample:
    """A bundled table and the roles of its columns."""

    name: str
    file: str
    target: str
    id_column: str | None
    description: str
    kind: str = "real"
    """'real' (measured outcome), 'synthetic' or 'semi-synthetic' (simulated outcome)."""

    @property
    def path(self) -> Path:
        return HERE / self.file


SAMPLES: dict[str, Sample] = {
    "diabetes": Sample(
        "diabetes", "diabetes.csv", "progression", "patient_id",
        "442 diabetes patients: age, sex, BMI, blood pressure and six blood serum measurements; "
        "target: disease progression one year after baseline (Efron et al., 2004).",
    ),
    "actg175": Sample(
        "actg175", "actg175.csv", "cd4_week20", "patient_id",
        "2,139 HIV-infected adults of the ACTG 175 trial (Hammer et al., 1996): baseline age, "
        "weight, Karnofsky score, CD4 and CD8 counts, prior antiretroviral days, symptoms, sex, "
        "race, IV drug use, haemophilia and treatment arm; target: CD4 count at week 20.",
    ),
    "rand_hie": Sample(
        "rand_hie", "rand_hie.csv", "md_visits", "patient_id",
        "1,500 adults of the RAND Health Insurance Experiment (first study year): age, sex, "
        "race, income, education, family size, mental and general health indices, chronic "
        "diseases, physical limitation and insurance plan; target: visits to a doctor that year.",
    ),
    "synthetic": Sample(
        "synthetic", "synthetic.csv", "y", "patient_id",
        "2,000 synthetic patients with known roles: y = mean_only + 0.5·dual + "
        "exp(0.6·noise_only + 0.5·dual)·ε; 'dummy' is unused and 'correlated' is unused but "
        "correlated with mean_only (ρ = 0.8).",
        kind="synthetic",
    ),
    "actg175_semisynthetic": Sample(
        "actg175_semisynthetic", "actg175_semisynthetic.csv", "outcome", "patient_id",
        "The ACTG 175 covariates with a simulated outcome whose noise is driven by baseline CD4 "
        "(low = noisier), symptoms, age, Karnofsky score (low = noisier) and IV drug use; "
        "the other features do not touch the noise.",
        kind="semi-synthetic",
    ),
}


def sample_path(name: str) -> Path:
    return SAMPLES[name].path


def load_sample(name: str) -> pd.DataFrame:
    """A bundled table as a DataFrame (ids read as text, so zero padding survives)."""
    sample = SAMPLES[name]
    dtype = {sample.id_column: str} if sample.id_column else None
    return pd.read_csv(sample.path, dtype=dtype)

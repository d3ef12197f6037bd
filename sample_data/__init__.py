"""Sample tables bundled with cpdecomp; loading them needs no network."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Sample:
    """A bundled table and the roles of its columns."""

    name: str
    file: str
    target: str
    id_column: str | None
    description: str

    @property
    def path(self) -> Path:
        return HERE / self.file


SAMPLES: dict[str, Sample] = {
    "diabetes": Sample(
        "diabetes", "diabetes.csv", "progression", "patient_id",
        "442 diabetes patients: age, sex, BMI, blood pressure and six blood serum measurements; "
        "target: disease progression one year after baseline (Efron et al., 2004).",
    ),
}


def sample_path(name: str) -> Path:
    return SAMPLES[name].path

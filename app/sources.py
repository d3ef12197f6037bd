"""Where the dashboard's tables come from: a bundled sample or uploaded files.

A `Dataset` carries the tables and a content digest of the raw bytes they were read from. The
digest, with the chosen target, is the dataset key that reviews are stored under, so the same
file uploaded again (under any name) finds its reviews, and a changed file does not.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from core import load_table
from core.errors import CpdecompError
from sample_data import SAMPLES

UPLOAD_TYPES = ["csv", "tsv", "txt", "parquet", "pq"]
"""Extensions the upload boxes accept; core reads .parquet/.pq as Parquet and the rest as text."""

ROLES = ("training", "calibration", "patients")


@dataclass(frozen=True, eq=False)
class Dataset:
    """Tables from one source: one table to split, or training / calibration / patients files."""

    name: str
    patients: pd.DataFrame
    """The one table (split by the study), or the patients to explain when files are separate."""
    digest: str
    """sha256 over the raw bytes of the file(s), in role order."""
    train: pd.DataFrame | None = None
    calibration: pd.DataFrame | None = None
    default_target: str | None = None
    default_id: str | None = None
    description: str = ""

    @property
    def separate(self) -> bool:
        return self.train is not None

    @property
    def columns(self) -> list[str]:
        """Columns the target and features are chosen from (the training file's, if separate)."""
        source = self.train if self.train is not None else self.patients
        return [str(c) for c in source.columns]

    @property
    def id_choices(self) -> list[str]:
        """Columns that can name the patients (the patients file's)."""
        return [str(c) for c in self.patients.columns]


def content_digest(contents: Sequence[bytes]) -> str:
    """sha256 over length-prefixed contents, so ('ab', 'c') and ('a', 'bc') differ."""
    digest = hashlib.sha256()
    for content in contents:
        digest.update(len(content).to_bytes(8, "big"))
        digest.update(content)
    return digest.hexdigest()


def dataset_key(digest: str, target: str) -> str:
    """The key reviews are kept under: the data's content and the target it is explained for."""
    return hashlib.sha256(f"{digest}\0{target}".encode()).hexdigest()[:32]


def read_upload(name: str, content: bytes) -> pd.DataFrame:
    """Parse uploaded bytes with core's reader, so uploads get the CLI's checks and messages.

    The bytes go to a private temporary folder under the uploaded file's base name: core picks
    the format from the extension and names the file in its messages.
    """
    base = Path(name.replace("\0", "")).name.strip()
    if base in {"", ".", ".."}:  # a name that is a folder would escape the temporary folder
        base = "upload.csv"
    with tempfile.TemporaryDirectory(prefix="cpdecomp-upload-") as folder:
        path = Path(folder) / base
        path.write_bytes(content)
        return load_table(path)


def guess_target(table: pd.DataFrame) -> str | None:
    """The last numeric column: tables usually put the outcome at the end."""
    numeric = [c for c in table.columns if pd.api.types.is_numeric_dtype(table[c])]
    return str(numeric[-1]) if numeric else None


def guess_id(table: pd.DataFrame) -> str | None:
    """A column whose name says it is an identifier and whose values are all distinct."""
    for column in table.columns:
        lowered = str(column).lower()
        if lowered in {"id", "patient_id", "patient", "subject_id", "mrn"} or lowered.endswith(
            "_id"
        ):
            if table[column].is_unique:
                return str(column)
    return None


def load_sample(name: str) -> Dataset:
    """A bundled sample, with its documented target and id column."""
    try:
        sample = SAMPLES[name]
    except KeyError:
        choices = ", ".join(SAMPLES)
        raise CpdecompError(f"unknown sample {name!r}; choose one of {choices}") from None
    content = sample.path.read_bytes()
    table = read_upload(sample.file, content)
    return Dataset(
        name=f"sample: {sample.name}", patients=table, digest=content_digest([content]),
        default_target=sample.target, default_id=sample.id_column,
        description=sample.description,
    )


def single_upload(name: str, content: bytes) -> Dataset:
    """One uploaded table, to be split into training, calibration and patients."""
    table = read_upload(name, content)
    return Dataset(
        name=Path(name).name, patients=table, digest=content_digest([content]),
        default_target=guess_target(table), default_id=guess_id(table),
    )


def separate_uploads(files: Sequence[tuple[str, bytes]]) -> Dataset:
    """Training, calibration and patients files, in that order."""
    if len(files) != len(ROLES):
        raise CpdecompError("give a training, a calibration and a patients file")
    tables = []
    for role, (name, content) in zip(ROLES, files, strict=True):
        try:
            tables.append(read_upload(name, content))
        except CpdecompError as error:
            raise CpdecompError(f"{role} file: {error}") from error
    train, calibration, patients = tables
    names = " / ".join(Path(name).name for name, _ in files)
    return Dataset(
        name=names, patients=patients, digest=content_digest([c for _, c in files]),
        train=train, calibration=calibration, default_target=guess_target(train),
        default_id=guess_id(patients),
    )


def preview(table: pd.DataFrame, rows: int = 50) -> pd.DataFrame:
    """The first rows, with columns of mixed types as text.

    Streamlit sends tables to the browser through Arrow; a column that mixes numbers and text
    fails to convert, and Streamlit's fallback logs the offending cell, which must not happen
    to patient data.
    """
    head = table.head(rows).copy()
    for column in head.columns:
        if head[column].dtype == object:
            head[column] = head[column].map(lambda v: None if v is None or v != v else str(v))
    return head

"""Where the dashboard's tables come from: a bundled sample, uploaded files, or a table with the
user's own fitted model files (one per component).

A `Dataset` carries the tables and a content digest of the raw bytes they were read from. The
digest, with the chosen target, is the dataset key that reviews are stored under, so the same
file uploaded again (under any name) finds its reviews, and a changed file does not.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cpdecomp import load_table
from cpdecomp.app.targets import choose_target
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.model_files import PICKLE_SUFFIXES, READERS, load_model_file
from cpdecomp.core.tables import LIMITS, TableLimits
from cpdecomp.sample_data import SAMPLES

logger = logging.getLogger("cpdecomp.app.upload")

UPLOAD_TYPES = ["csv", "tsv", "txt", "parquet", "pq"]
"""Extensions the upload boxes accept; core reads .parquet/.pq as Parquet and the rest as text."""


def upload_limits(max_upload_mb: int | float) -> TableLimits:
    """core's caps, with the byte cap of Streamlit's `server.maxUploadSize` (in MB of 2**20).

    The browser and Streamlit's upload endpoint enforce that option; the server checks again
    before reading, so a client that skips the browser's check still hits the cap.
    """
    return dataclasses.replace(LIMITS, max_bytes=int(max_upload_mb * 2**20))


class WithoutPatientData(logging.Filter):
    """Keep a log record's message and the failing code's place; drop the exception's text.

    Streamlit's Arrow fallback attaches pyarrow's conversion error, which quotes the cell that
    failed, and Streamlit logs an exception that escapes a script or a widget callback with
    its message (ours, pandas', a database driver's), which can quote patient data.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            kind, _, trace = record.exc_info
            record.msg = (f"{record.getMessage()} [{kind.__name__ if kind else 'exception'}; "
                          "its message is not logged: it can quote patient data]\n"
                          + "".join(traceback.format_tb(trace)))
            record.args = None
        record.exc_info, record.exc_text = None, None
        return True


STREAMLIT_LOGGERS_WITH_EXCEPTIONS = ("streamlit.dataframe_util", "streamlit.error_util")


def keep_patient_data_out_of_streamlit_logs() -> None:
    """Install the filter on Streamlit's loggers that attach exceptions (idempotent)."""
    for name in STREAMLIT_LOGGERS_WITH_EXCEPTIONS:
        log = logging.getLogger(name)
        if not any(isinstance(f, WithoutPatientData) for f in log.filters):
            log.addFilter(WithoutPatientData())


keep_patient_data_out_of_streamlit_logs()  # every page imports this module via app.state

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
    models: Mapping[str, Any] | None = None
    """The user's fitted models by component (f, sigma, lo, hi), read from files; None when
    the study fits its own."""
    model_features: tuple[str, ...] | None = None
    """The columns the models read, in their order (None when they carry no names)."""

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


def upload_label(name: str) -> str:
    """The uploaded file's own name, without any folder: it only labels messages."""
    return Path(name.replace("\0", "").replace("\\", "/")).name.strip() or "the upload"


def read_upload(name: str, content: bytes, limits: TableLimits = LIMITS) -> pd.DataFrame:
    """Parse uploaded bytes with core's reader, so uploads get the CLI's checks and messages.

    The bytes go to a temporary file that has no name in any folder (unlinked as it is made),
    read through /proc/self/fd: a parse the server is killed in the middle of leaves nothing
    behind in /tmp. The uploaded name only labels messages in the page, so it cannot reach a
    path, a parser's error text or a log. (Without /proc, a private folder is used instead.)
    """
    label = upload_label(name)
    if len(content) > limits.max_bytes:
        raise CpdecompError(
            f"{label} is {len(content) / 2**20:,.1f} MiB; the upload limit is "
            f"{limits.max_bytes / 2**20:,.1f} MiB", reason="too_large")
    suffix = Path(label).suffix.lower()
    kind = "parquet" if suffix in {".parquet", ".pq"} else "csv"
    if not Path("/proc/self/fd").is_dir():
        with tempfile.TemporaryDirectory(prefix="cpdecomp-upload-") as folder:
            path = Path(folder) / f"upload.{kind}"
            path.write_bytes(content)
            return load_table(path, limits=limits, label=label, kind=kind)
    # TemporaryFile: O_TMPFILE where the file system has it, else created and unlinked at once.
    with tempfile.TemporaryFile(prefix="cpdecomp-upload-") as staged:
        staged.write(content)
        staged.flush()
        return load_table(Path(f"/proc/self/fd/{staged.fileno()}"), limits=limits,
                          label=label, kind=kind)


def _logged(read: Callable[[], Dataset], n_bytes: int) -> Dataset:
    """Run a read, logging the event with counts and duration only (never names or values)."""
    started = time.perf_counter()
    try:
        dataset = read()
    except CpdecompError as error:
        logger.info("upload.refused reason=%s bytes=%d seconds=%.3f", error.reason, n_bytes,
                    time.perf_counter() - started)
        raise
    tables = [t for t in (dataset.train, dataset.calibration, dataset.patients) if t is not None]
    logger.info("upload.read files=%d rows=%d columns=%d bytes=%d seconds=%.3f", len(tables),
                sum(len(t) for t in tables), tables[0].shape[1], n_bytes,
                time.perf_counter() - started)
    return dataset


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


def single_upload(name: str, content: bytes, limits: TableLimits = LIMITS) -> Dataset:
    """One uploaded table, to be split into training, calibration and patients."""
    def read() -> Dataset:
        table = read_upload(name, content, limits)
        return Dataset(
            name=Path(name).name, patients=table, digest=content_digest([content]),
            default_target=choose_target(table), default_id=guess_id(table),
        )
    return _logged(read, len(content))


def separate_uploads(files: Sequence[tuple[str, bytes]],
                     limits: TableLimits = LIMITS) -> Dataset:
    """Training, calibration and patients files, in that order."""
    if len(files) != len(ROLES):
        raise CpdecompError("give a training, a calibration and a patients file")

    def read() -> Dataset:
        tables = []
        for role, (name, content) in zip(ROLES, files, strict=True):
            try:
                tables.append(read_upload(name, content, limits))
            except CpdecompError as error:
                raise CpdecompError(f"{role} file: {error}", reason=error.reason) from error
        train, calibration, patients = tables
        names = " / ".join(Path(name).name for name, _ in files)
        return Dataset(
            name=names, patients=patients, digest=content_digest([c for _, c in files]),
            train=train, calibration=calibration, default_target=choose_target(train),
            default_id=guess_id(patients),
        )
    return _logged(read, sum(len(c) for _, c in files))


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


MODEL_COMPONENTS = {
    "f": "Point model (f)",
    "sigma": "Difficulty model (sigma, optional)",
    "lo": "Lower quantile model (lo)",
    "hi": "Upper quantile model (hi)",
}
"""The components a user can upload a model for, as the Data page names them."""

MODEL_TYPES = [suffix.lstrip(".") for suffix in (*READERS, *sorted(PICKLE_SUFFIXES))]
"""Extensions the model upload boxes accept. Pickle files are accepted by the box only so that
core refuses them with its message (use skops), instead of the browser's bare 'not allowed'."""


def read_model_upload(component: str, name: str, content: bytes,
                      limits: TableLimits = LIMITS) -> Any:
    """A fitted model from uploaded bytes, through core's reader (never unpickled).

    The reader takes a path and decides by the extension, so the bytes go to a private folder
    under a fixed name with the upload's extension; the uploaded name only labels messages.
    """
    label = upload_label(name)
    suffix = Path(label).suffix.lower()
    if len(content) > limits.max_bytes:
        raise CpdecompError(
            f"{label} is {len(content) / 2**20:,.1f} MiB; the upload limit is "
            f"{limits.max_bytes / 2**20:,.1f} MiB", reason="too_large")
    try:
        with tempfile.TemporaryDirectory(prefix="cpdecomp-model-") as folder:
            path = Path(folder) / f"model{suffix}"
            if suffix not in PICKLE_SUFFIXES and suffix in READERS:
                path.write_bytes(content)
            return load_model_file(path, max_bytes=limits.max_bytes)
    except CpdecompError as error:
        message = str(error).replace(f"model{suffix}", label)
        raise CpdecompError(f"{MODEL_COMPONENTS[component]}: {message}",
                            reason=error.reason) from None


def model_columns(models: Mapping[str, Any], table: pd.DataFrame) -> tuple[str, ...] | None:
    """The columns the models read, checked against the table: every model must read the same
    columns and the table must hold them (the message names the ones it lacks)."""
    from cpdecomp.core.models import model_kind

    found: dict[str, list[str]] = {}
    for component, model in models.items():
        kind = model_kind(model)
        names = kind.feature_names(model)
        if names is not None:
            found[component] = [str(c) for c in names]
    if not found:
        return None
    first, columns = next(iter(found.items()))
    for component, names in found.items():
        if names != columns:
            raise CpdecompError(f"the {first} and {component} models read different columns: "
                                f"{', '.join(map(repr, columns))} and "
                                f"{', '.join(map(repr, names))}")
    present = {str(c) for c in table.columns}
    missing = [c for c in columns if c not in present]
    if missing:
        raise CpdecompError(f"the {first} model does not fit this table: the table lacks "
                            f"{', '.join(map(repr, missing))}; the model reads "
                            f"{', '.join(map(repr, columns))}")
    return tuple(columns)


def position_note(models: Mapping[str, Any] | None, columns: Sequence[str]) -> str | None:
    """A warning when a model file carries no column names: it is given the feature columns
    by their position in the table, which nothing can check; None otherwise."""
    from cpdecomp.core.models import model_kind

    unnamed = [component for component, model in (models or {}).items()
               if model_kind(model).feature_names(model) is None]
    if not unnamed:
        return None
    which = " and ".join(MODEL_COMPONENTS[c].split(" (")[0].lower() for c in unnamed)
    files = "file does" if len(unnamed) == 1 else "files do"
    return (f"The {which} {files} not say which columns the model reads, so the feature "
            f"columns are given to it by their position in the table: "
            f"{', '.join(map(repr, columns))}. Nothing can check that this is the order it "
            "was fitted on: if it is not, its predictions and every explanation are wrong, "
            "with no error. Check the order and the target, or save the model with its "
            "column names (fit it on a DataFrame).")


def model_upload(table_file: tuple[str, bytes], model_files: Mapping[str, tuple[str, bytes]],
                 limits: TableLimits = LIMITS) -> Dataset:
    """One table to split, with fitted model files by component (f, sigma, lo, hi)."""
    unknown = sorted(set(model_files) - set(MODEL_COMPONENTS))
    if unknown:
        raise CpdecompError(f"no model component {unknown[0]!r}")
    if not model_files:
        raise CpdecompError("give at least one model file")
    name, content = table_file

    def read() -> Dataset:
        table = read_upload(name, content, limits)
        models = {component: read_model_upload(component, file_name, data, limits)
                  for component, (file_name, data) in model_files.items()}
        features = model_columns(models, table)
        rest = table if features is None else table.drop(columns=list(features))
        files = [Path(n).name for n, _ in model_files.values()]
        return Dataset(
            name=f"{Path(name).name} with {', '.join(files)}", patients=table,
            digest=content_digest([content, *(
                part for component in sorted(model_files)
                for part in (component.encode(), model_files[component][1]))]),
            default_target=choose_target(rest), default_id=guess_id(table),
            models=models, model_features=features,
        )
    return _logged(read, len(content) + sum(len(c) for _, c in model_files.values()))


def family_for(components: Sequence[str]) -> str:
    """The conformal family the uploaded components make: quantile models give cqr, a point
    and a difficulty model normalized, a point model alone absolute (gamma is chosen on Setup)."""
    given = set(components)
    if {"lo", "hi"} <= given:
        return "cqr"
    return "normalized" if "sigma" in given else "absolute"


def source_table(dataset: Dataset) -> pd.DataFrame:
    """The table the target and features are chosen from (the training file, if separate)."""
    return dataset.train if dataset.train is not None else dataset.patients

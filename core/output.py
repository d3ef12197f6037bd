"""Writing reports for other programs: tidy CSV or Parquet, or JSON with metadata.

Floats keep full precision (%.17g in CSV, repr in JSON), so the identities can be checked from
the file: per patient, Σ total = width - base_width (or the log widths' difference).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TypeVar

import numpy as np
import pandas as pd

from cpdecomp.core.atomic import atomic_write, staged_file
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.interop import optional_parts, tidy_frame
from cpdecomp.core.missing import is_missing
from cpdecomp.core.versions import library_versions
from cpdecomp.core.workflow import CohortTally, Report

if TYPE_CHECKING:
    from cpdecomp.core.recalibration import Comparison

T = TypeVar("T")

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".json": "json"}

STDOUT = "-"
"""`--out -`: standard output, in the format `--format` names (there is no extension)."""

FORMAT_VERSION = "1.4"
"""The JSON output's layout (meta.format_version). The minor number grows when fields are
added, the major number when a field changes meaning or goes: a reader checks the major one.
The layout is core/schema/explanation.schema.json."""

SCHEMA_PATH = Path(__file__).with_name("schema") / "explanation.schema.json"
COMPARISON_FORMAT_VERSION = "1.0"
"""The layout of `cpdecomp compare`'s JSON (core/schema/comparison.schema.json), numbered like
FORMAT_VERSION."""
COMPARISON_SCHEMA_PATH = SCHEMA_PATH.with_name("comparison.schema.json")


def output_format(path: str | Path, fmt: str | None = None) -> str:
    """The format named by `fmt` or else by the extension; checked before any work is done."""
    if str(path) == STDOUT:
        if fmt is None:
            raise CpdecompError("--out - (standard output) needs --format csv, parquet or json")
        return fmt
    path = Path(path)
    named = FORMATS.get(path.suffix.lower())
    if fmt is not None and named is not None and named != fmt:
        raise CpdecompError(f"--format {fmt} does not match the extension of {path.name!r}")
    fmt = fmt or named
    if fmt is None:
        raise CpdecompError(f"--out must end in .csv, .parquet or .json (or give --format), "
                            f"got {path.name!r}")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise CpdecompError(f"the folder for --out does not exist: {folder}")
    if not os.access(folder, os.W_OK):
        raise CpdecompError(f"cannot write to the folder for --out: {folder}")
    return fmt


def _value_text(value: object) -> object:
    if is_missing(value):
        return None
    if isinstance(value, float | np.floating):
        return repr(float(value))
    return str(value)


def _value_texts(values: pd.DataFrame) -> np.ndarray:
    """_value_text of every cell, patient by patient (tidy_frame's order), a column at a time:
    a float column's cells are converted in one list comprehension, not one `map` call each
    (1.2 million cells cost 3.2 s through `map`)."""
    columns = []
    for name in values.columns:
        column = values[name]
        if column.dtype.kind == "f":
            numbers = column.to_numpy()
            texts = np.array([repr(v) for v in numbers.tolist()], dtype=object)
            texts[np.isnan(numbers)] = None
        else:
            texts = column.map(_value_text).to_numpy(dtype=object)
        columns.append(texts)
    return np.column_stack(columns).ravel() if columns else np.empty(0, dtype=object)


def _json_number(value: object) -> object:
    if isinstance(value, dict):  # a meta field of fields (versions, a comparison's tables)
        return {key: _json_number(v) for key, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_number(v) for v in value]
    if is_missing(value) or value is pd.NaT:
        return None
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, float | np.floating):
        return None if not math.isfinite(float(value)) else float(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


def report_json(report: Report) -> dict:
    """Per patient: the interval and the three attributions per feature, plus `meta`."""
    return {"meta": json_meta(report.meta), "patients": patient_records(report)}


def json_meta(meta: dict) -> dict:
    return {"format_version": FORMAT_VERSION,
            **{key: _json_number(value) for key, value in meta.items()}}


def patient_records(report: Report) -> list[dict]:
    """The JSON records of the report's patients."""
    e = report.explanation
    d = e.decomposition
    patients = []
    extra = optional_parts(report)
    for i, patient_id in enumerate(report.patient_ids):
        values = report.feature_values.iloc[i]
        patients.append({
            "patient_id": _json_number(patient_id),
            "prediction": _json_number(e.prediction[i]),
            "lower": _json_number(e.lower[i]),
            "upper": _json_number(e.upper[i]),
            "width": _json_number(e.width[i]),
            "base_width": _json_number(e.base_width),
            **({"y": _json_number(report.targets[i])} if report.targets is not None else {}),
            "features": [
                {
                    "feature": name,
                    "feature_value": _json_number(values[name]),
                    "calibration": float(d.calibration[i, j]),
                    "instance": float(d.instance[i, j]),
                    "total": float(d.total[i, j]),
                    **{name: _json_number(values[i, j]) for name, values in extra.items()},
                }
                for j, name in enumerate(d.features)
            ],
        })
    return patients


def comparison_json(comparison: Comparison) -> dict:
    """Per patient: each set's interval and per feature its parts and their change, plus
    `meta` with the sets, the coverage table and the identity check."""
    meta = {"format_version": COMPARISON_FORMAT_VERSION,
            **{key: _json_number(value) for key, value in comparison_meta(comparison).items()}}
    frame = comparison.to_frame()
    n_sets, n_players = len(comparison.sets), len(comparison.players)
    per_set = ("lower", "upper", "width", "base_width", "q_hat",
               *(("log_mean_factor",) if "log_mean_factor" in frame.columns else ()))
    per_cell = ("calibration", "calibration_low", "calibration_high", "calibration_change",
                "calibration_change_low", "calibration_change_high",
                "calibration_change_holds_zero", "instance", "total")
    columns = {name: frame[name].tolist() for name in frame.columns}
    patients = []
    block = n_players * n_sets
    for i, patient_id in enumerate(comparison.patient_ids):
        first = i * block
        sets = []
        for s, name in enumerate(comparison.names):
            rows = range(first + s, first + block, n_sets)  # this set's row of each feature
            sets.append({
                "set": name, "reference": bool(columns["reference"][first + s]),
                **{key: _json_number(columns[key][first + s]) for key in per_set},
                "features": [{"feature": columns["feature"][r],
                              **{key: _json_number(columns[key][r]) for key in per_cell}}
                             for r in rows],
            })
        values = comparison.feature_values.iloc[i]
        patients.append({
            "patient_id": _json_number(patient_id),
            "prediction": _json_number(comparison.prediction[i]),
            **({"y": _json_number(comparison.targets[i])}
               if comparison.targets is not None else {}),
            "feature_values": {name: _json_number(values[name]) for name in comparison.players},
            "sets": sets,
        })
    return {"meta": meta, "patients": patients}


def comparison_meta(comparison: Comparison) -> dict:
    """The comparison's meta with the library versions (what the file was written with)."""
    return {**comparison.meta, "versions": library_versions()}


def write_comparison(comparison: Comparison, path: str | Path, fmt: str | None = None) -> None:
    """Write a comparison atomically: tidy CSV or Parquet (one row per patient, feature and
    set), or JSON with the sets, coverage and identity check in `meta`."""
    _write_to(path, fmt, lambda fmt, temporary: COMPARISON_WRITERS[fmt](comparison, temporary))


def _comparison_csv(comparison: Comparison, temporary: str) -> None:
    comparison.to_frame().to_csv(temporary, index=False, float_format="%.17g")


def _comparison_parquet(comparison: Comparison, temporary: str) -> None:
    frame = comparison.to_frame()
    frame["feature_value"] = np.repeat(_value_texts(comparison.feature_values),
                                       len(comparison.sets))
    ids = pd.Series(list(frame["patient_id"]))
    frame["patient_id"] = ids if ids.dtype != object else ids.map(str)
    frame.to_parquet(temporary, index=False)


def _comparison_json(comparison: Comparison, temporary: str) -> None:
    with open(temporary, "w", encoding="utf-8") as out:
        json.dump(comparison_json(comparison), out, ensure_ascii=False, allow_nan=False)


COMPARISON_WRITERS: dict[str, Callable[[Comparison, str], None]] = {
    "csv": _comparison_csv, "parquet": _comparison_parquet, "json": _comparison_json,
}


def _write_to(path: str | Path, fmt: str | None, write: Callable[[str, str], T]) -> T:
    """write(format, temporary file) behind an atomic rename, or copied to standard output
    (`path` "-") once it is whole; returns what `write` returns."""
    chosen = output_format(path, fmt)
    if str(path) != STDOUT:
        with atomic_write(path) as temporary:
            return write(chosen, temporary)
    with staged_file(None, "stdout") as temporary:
        result = write(chosen, temporary)
        sys.stdout.flush()
        with open(temporary, "rb") as written:
            _copy_to(written, sys.stdout.buffer)
    return result


def write_report(report: Report, path: str | Path, fmt: str | None = None) -> None:
    """Write atomically (a temporary file renamed into place), so readers never see half.

    `path` "-" writes to standard output: the same bytes, copied from the temporary file.
    """
    write_reports([report], path, fmt)


def write_reports(reports: Iterable[Report], path: str | Path, fmt: str | None = None) -> dict:
    """Write chunks of one explanation as they come, atomically; returns the joined meta.

    Memory holds one chunk: CSV rows are appended, Parquet gets one row group per chunk, and
    JSON's patients go to a side file while the chunks come (meta, whose errors are maxima
    over all chunks, is known only at the end and comes first). The bytes equal those of
    writing the joined report in one go (Parquet: the same table, in row groups). A run that
    fails or is killed leaves only its temporary file (a dot file), never a partial file under
    the final name.
    """
    # Standard output gets the same bytes, copied once the whole file is written.
    return _write_to(path, fmt, lambda fmt, temporary: WRITERS[fmt](reports, temporary))


def _copy_to(source: BinaryIO, target: BinaryIO) -> None:
    try:
        shutil.copyfileobj(source, target)
        target.flush()
    except BrokenPipeError:
        # The reader stopped early (`| head`): point stdout at nothing, so the interpreter's
        # own flush at exit does not fail again, and let the caller end like other tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise


def _write_csv(reports: Iterable[Report], temporary: str) -> dict:
    tally = CohortTally()
    with open(temporary, "w", encoding="utf-8", newline="") as out:
        for report in reports:
            tidy_frame(report).to_csv(out, index=False, header=not tally.metas,
                                      float_format="%.17g")
            tally.add(report)
    return tally.meta()


def _write_parquet(reports: Iterable[Report], temporary: str) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    tally = CohortTally()
    writer = None
    try:
        for report in reports:
            frame = tidy_frame(report)
            frame["feature_value"] = _value_texts(report.feature_values)
            ids = pd.Series(list(frame["patient_id"]))
            frame["patient_id"] = ids if ids.dtype != object else ids.map(str)
            table = pa.Table.from_pandas(frame, preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(temporary, table.schema)
            writer.write_table(table.cast(writer.schema))
            tally.add(report)
    finally:
        if writer is not None:
            writer.close()
    return tally.meta()


def _write_json(reports: Iterable[Report], temporary: str) -> dict:
    # json.dump's own separators, so the file equals json.dump of the joined document.
    tally = CohortTally()
    with tempfile.TemporaryFile("w+", encoding="utf-8") as side:
        separator = ""
        for report in reports:
            for record in patient_records(report):
                side.write(separator)
                json.dump(record, side, ensure_ascii=False, allow_nan=False)
                separator = ", "
            tally.add(report)
        meta = tally.meta()
        side.seek(0)
        with open(temporary, "w", encoding="utf-8") as out:
            out.write('{"meta": ')
            json.dump(json_meta(meta), out, ensure_ascii=False, allow_nan=False)
            out.write(', "patients": [')
            shutil.copyfileobj(side, out)
            out.write("]}")
    return meta


WRITERS: dict[str, Callable[[Iterable[Report], str], dict]] = {
    "csv": _write_csv, "parquet": _write_parquet, "json": _write_json,
}

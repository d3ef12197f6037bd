"""Reading tables, choosing columns, encoding features as numbers, and splitting rows.

Every feature (an original column) is one player. Numeric columns stay as they are (NaN for
missing); string columns become integer category codes (NaN for missing or unseen), so masking
works on one float matrix whatever the column types, and the models expand codes as they need.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from core.errors import CpdecompError
from core.typing import FloatArray

MAX_CATEGORIES = 250
"""Above this many distinct strings a column is an identifier, not a category."""

MIN_ROWS_FOR_IDENTIFIER = 20
"""A text column unique on at least this many rows is an identifier, not a category."""

MISSING_TOKENS = ["", "?", "NA", "N/A", "n/a", "na", "NaN", "nan", "null", "NULL", "None", "-"]


def load_table(source: str | Path | pd.DataFrame,
               text_columns: Sequence[str] = ()) -> pd.DataFrame:
    """Read a CSV or Parquet file (by extension; CSV otherwise), refusing what is not a table.

    `text_columns` are read verbatim (an id like 00042 keeps its zeros).
    """
    if isinstance(source, pd.DataFrame):
        table = source
        name = "the table"
    else:
        path = Path(source)
        name = path.name
        if not path.is_file():
            raise CpdecompError(f"no such file: {path}")
        if path.stat().st_size == 0:
            raise CpdecompError(f"{name} is empty")
        try:
            if path.suffix.lower() in {".parquet", ".pq"}:
                table = pd.read_parquet(path)
            else:
                table = _read_csv(path, text_columns)
        except CpdecompError:
            raise
        except Exception as exc:  # pandas and pyarrow raise many types for a bad file
            kind = "Parquet" if path.suffix.lower() in {".parquet", ".pq"} else "CSV"
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise CpdecompError(f"{name} is not a readable {kind} file ({reason})") from exc
    if table.shape[1] == 0 or table.shape[0] == 0:
        raise CpdecompError(f"{name} has no data rows")
    table.columns = [str(c) for c in table.columns]
    return table


def _read_csv(path: Path, text_columns: Sequence[str]) -> pd.DataFrame:
    with path.open("rb") as handle:
        head = handle.read(4096)
    if b"\x00" in head:
        raise CpdecompError(f"{path.name} looks like a binary file, not CSV")
    try:
        first_line = head.decode("utf-8-sig").splitlines()[0] if head.strip() else ""
    except UnicodeDecodeError as exc:
        raise CpdecompError(f"{path.name} is not UTF-8 text; save it as UTF-8 CSV") from exc
    # Excel in many locales writes ';'-separated CSV with decimal commas; tabs come from
    # copy-paste.
    separator = max([",", ";", "\t"], key=first_line.count)
    text = head.decode("utf-8-sig", errors="ignore")
    decimal = "," if separator == ";" and re.search(r"\d,\d", text) else "."
    return pd.read_csv(
        path,
        sep=separator,
        decimal=decimal,
        encoding="utf-8-sig",
        na_values=MISSING_TOKENS,
        keep_default_na=True,
        low_memory=False,
        dtype={name: str for name in text_columns},
    )


def did_you_mean(name: str, choices: Sequence[str]) -> str:
    """A ' (did you mean ...?)' hint, or a list of the columns."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    listing = ", ".join(repr(c) for c in list(choices)[:12])
    more = " ..." if len(choices) > 12 else ""
    return f"; columns are {listing}{more}"


def require_column(table: pd.DataFrame, name: str, role: str) -> None:
    """Refuse a column name the table does not have, suggesting the closest one."""
    if name not in table.columns:
        hint = did_you_mean(name, table.columns)
        raise CpdecompError(f"{role} column {name!r} is not in the data{hint}")


@dataclass(frozen=True)
class ColumnChoice:
    """Which columns play which role."""

    target: str
    id_column: str | None
    features: tuple[str, ...]


def choose_columns(
    table: pd.DataFrame,
    target: str,
    id_column: str | None = None,
    features: Sequence[str] | None = None,
) -> ColumnChoice:
    """Check the named columns; features default to every other column."""
    require_column(table, target, "target")
    if id_column is not None:
        require_column(table, id_column, "id")
        if id_column == target:
            raise CpdecompError("the id column and the target are the same column")
    if features:
        for name in features:
            require_column(table, name, "feature")
        if target in features:
            raise CpdecompError(f"the target {target!r} cannot also be a feature")
        if len(set(features)) != len(features):
            raise CpdecompError("a feature is listed twice in --features")
        chosen = tuple(features)
    else:
        chosen = tuple(c for c in table.columns if c not in {target, id_column})
    if not chosen:
        raise CpdecompError("no feature columns left: the data needs columns besides the target")
    return ColumnChoice(target=target, id_column=id_column, features=chosen)


def target_values(table: pd.DataFrame, target: str) -> FloatArray:
    """The target as floats (NaN where missing), refusing a non-numeric target."""
    column = table[target]
    if pd.api.types.is_bool_dtype(column):
        return column.astype(float).to_numpy()
    if not pd.api.types.is_numeric_dtype(column):
        numbers = pd.to_numeric(column, errors="coerce")
        bad = column[numbers.isna() & column.notna()]
        if len(bad):
            raise CpdecompError(
                f"target {target!r} must be numeric, but it has values such as {bad.iloc[0]!r}; "
                "choose a numeric target column"
            )
        column = numbers
    values = column.to_numpy(dtype=float, na_value=np.nan)
    if np.isinf(values).any():
        raise CpdecompError(f"target {target!r} has infinite values")
    return values


@dataclass(frozen=True)
class FeatureKind:
    """How one original column is encoded: numeric, or categorical with its categories."""

    name: str
    categories: tuple[str, ...] | None = None

    @property
    def is_categorical(self) -> bool:
        return self.categories is not None


class FeatureEncoder:
    """Turns the chosen feature columns into one float matrix (category codes for strings)."""

    def __init__(self, features: Sequence[str]) -> None:
        self.features = tuple(features)

    def fit(self, table: pd.DataFrame) -> FeatureEncoder:
        kinds = []
        for name in self.features:
            column = table[name]
            if column.isna().all():
                raise CpdecompError(
                    f"feature {name!r} is entirely missing in the training rows; leave it out"
                )
            kinds.append(_feature_kind(name, column))
        self.kinds_ = tuple(kinds)
        return self

    @property
    def categorical_mask(self) -> np.ndarray:
        return np.array([k.is_categorical for k in self.kinds_], dtype=bool)

    def transform(self, table: pd.DataFrame) -> FloatArray:
        missing = [name for name in self.features if name not in table.columns]
        if missing:
            raise CpdecompError(f"feature {missing[0]!r} is not in the data")
        encoded = np.empty((len(table), len(self.features)), dtype=float)
        for j, kind in enumerate(self.kinds_):
            encoded[:, j] = _encode_column(table[kind.name], kind)
        return encoded


def _feature_kind(name: str, column: pd.Series) -> FeatureKind:
    if pd.api.types.is_bool_dtype(column) or pd.api.types.is_numeric_dtype(column):
        values = column.to_numpy(dtype=float, na_value=np.nan)
        if np.isinf(values).any():
            raise CpdecompError(
                f"feature {name!r} has infinite values; replace them or leave it out"
            )
        return FeatureKind(name)
    if pd.api.types.is_datetime64_any_dtype(column):
        raise CpdecompError(
            f"feature {name!r} holds dates; convert it to a number (e.g. days since admission)"
        )
    present = column.dropna()
    numbers = pd.to_numeric(present, errors="coerce")
    share_numeric = float(numbers.notna().mean()) if len(present) else 0.0
    if share_numeric == 1.0:
        return FeatureKind(name)  # numbers stored as text (e.g. a Parquet string column)
    if share_numeric >= 0.9:
        example = present[numbers.isna()].iloc[0]
        raise CpdecompError(
            f"feature {name!r} is numeric but has non-numeric values such as {example!r}; "
            "fix them or leave those cells empty (missing)"
        )
    categories = tuple(sorted({str(v) for v in present}))
    if len(present) >= MIN_ROWS_FOR_IDENTIFIER and len(categories) == len(present):
        raise CpdecompError(
            f"feature {name!r} has a different text value on every row, like an identifier; "
            "pass it as --id-column or leave it out with --features"
        )
    if len(categories) > MAX_CATEGORIES:
        raise CpdecompError(
            f"feature {name!r} has {len(categories)} distinct text values, which looks like an "
            "identifier; pass it as --id-column or leave it out with --features"
        )
    return FeatureKind(name, categories)


def _encode_column(column: pd.Series, kind: FeatureKind) -> FloatArray:
    if not kind.is_categorical:
        if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            return column.to_numpy(dtype=float, na_value=np.nan)
        numbers = pd.to_numeric(column, errors="coerce")
        bad = column[numbers.isna() & column.notna()]
        if len(bad):
            raise CpdecompError(
                f"feature {kind.name!r} is numeric in the training rows but has the value "
                f"{bad.iloc[0]!r} here"
            )
        return numbers.to_numpy(dtype=float, na_value=np.nan)
    lookup = {category: float(code) for code, category in enumerate(kind.categories or ())}
    # Unseen categories are treated as missing: the models have a rule for missing values.
    return np.array(
        [lookup.get(str(v), np.nan) if not _is_missing(v) else np.nan for v in column],
        dtype=float,
    )


def _is_missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def parse_split(text: str | Sequence[float]) -> tuple[float, float, float]:
    """Train / calibration / test fractions, from '0.5,0.25,0.25' or a sequence."""
    try:
        parts = [float(p) for p in (text.split(",") if isinstance(text, str) else text)]
    except ValueError as exc:
        raise CpdecompError(
            f"--split must be three fractions like 0.5,0.25,0.25, got {text!r}"
        ) from exc
    adds_up = math.isclose(sum(parts), 1.0, abs_tol=1e-6)
    if len(parts) != 3 or any(p <= 0 for p in parts) or not adds_up:
        raise CpdecompError(
            f"--split must be three positive fractions that add up to 1, got {text!r}"
        )
    return parts[0], parts[1], parts[2]


def split_rows(
    n_rows: int, fractions: tuple[float, float, float], seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeded train / calibration / test row indices (each sorted)."""
    order = np.random.default_rng(seed).permutation(n_rows)
    n_train = round(fractions[0] * n_rows)
    n_cal = round(fractions[1] * n_rows)
    parts = np.split(order, [n_train, n_train + n_cal])
    return tuple(np.sort(p) for p in parts)  # type: ignore[return-value]

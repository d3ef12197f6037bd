"""Choosing columns, encoding features as numbers, and splitting rows (reading files is
`core.tables`).

Every feature (an original column) is one player. Numeric columns stay as they are (NaN for
missing); string columns become integer category codes (NaN for missing), so masking works on
one float matrix whatever the column types, and the models expand codes as they need. The
categories are those of the training rows, plus those a user's fitted model was fitted with
(a rare level can be missing from the rows given as the background pool). A category outside
them is read as missing for the built-in models, and refused for a user's model (its own rule
for an unknown level is not "missing": XGBoost's, for one, is not).

Messages name rows and columns, never a cell's value: cells are patient data.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.missing import entirely_missing, is_missing, text_cells
from cpdecomp.core.tables import row_name
from cpdecomp.core.typing import FloatArray

MAX_CATEGORIES = 250
"""Above this many distinct strings a column is an identifier, not a category."""

MIN_ROWS_FOR_IDENTIFIER = 20
"""A text column unique on at least this many rows is an identifier, not a category."""

MAX_TARGET_MAGNITUDE = 1e30
"""The largest target value: gradient boosting computes in 32-bit floats (largest 3.4e38),
and near 1e60 its sums overflow to inf and NaN; 1e30 leaves room and covers any real unit."""

MAX_FEATURE_MAGNITUDE = 1e30
"""The largest feature value: scikit-learn's trees read features as 32-bit floats, so a value
beyond 3.4e38 becomes infinite there (numpy's overflow warning, then a crash); 1e30 is the
target's bound, far beyond any real unit."""

SHARE_NUMERIC_FOR_NUMBERS = 0.9
"""A text column with at least this share of numbers is numeric with typos, not categories."""

def _cell_name(column: pd.Series, positions: np.ndarray) -> str:
    """Where the bad cells of a column are, by row (values are patient data: never quoted).

    Row labels of a table read by load_table are 0-based data rows, kept through the split;
    another index (it could hold patient ids) is not shown: the position is.
    """
    label = column.index[positions[0]]
    where = (row_name(int(label)) if isinstance(label, int | np.integer)
             else f"data row {positions[0] + 1} of this table")
    others = len(positions) - 1
    if others:
        where += f" and {others:,} other row" + ("s" if others > 1 else "")
    return where


def did_you_mean(name: str, choices: Sequence[str]) -> str:
    """A ' (did you mean ...?)' hint for a name close to the one asked for, else the count.

    The columns are not listed: when a file has no header line, its "names" are a patient's
    values, and a system file's first line would be printed.
    """
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    count = len(choices)
    return f"; none of its {count:,} column{'s' if count != 1 else ''} has that name"


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
    exclude: Sequence[str] = (),
) -> ColumnChoice:
    """Check the named columns; features default to every other column (but `exclude`)."""
    require_column(table, target, "target")
    if entirely_missing(table[target]):
        raise CpdecompError(f"target {target!r} has no values", reason="target")
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
        chosen = tuple(c for c in table.columns if c not in {target, id_column, *exclude})
    if not chosen:
        raise CpdecompError("no feature columns left: the data needs columns besides the target")
    for name in chosen:
        _refuse_stray_text(table[name], name)
    return ColumnChoice(target=target, id_column=id_column, features=chosen)


def _refuse_stray_text(column: pd.Series, name: str) -> None:
    """A text column that is nearly all numbers has typos: name their rows in the whole file.

    The same rule refuses the training rows when the encoder is fitted; checking the whole
    table first gives every bad row its row number in the file, whichever part it falls in.
    """
    if not pd.api.types.is_string_dtype(column.dtype):  # object or pandas' str
        return
    present = column.dropna()
    if present.empty or pd.to_numeric(present.head(1000), errors="coerce").notna().mean() < 0.5:
        return  # text categories: no need to convert the whole column
    text = text_cells(column)
    if len(text) and 1 - len(text) / len(present) >= SHARE_NUMERIC_FOR_NUMBERS:
        raise CpdecompError(
            f"feature {name!r} is numeric, but it has text in "
            f"{_cell_name(column, text)}; fix those cells or leave them "
            "empty (missing)", reason="feature")


def target_values(table: pd.DataFrame, target: str) -> FloatArray:
    """The target as floats (NaN where missing), refusing a non-numeric target."""
    column = table[target]
    if pd.api.types.is_bool_dtype(column):
        return column.astype(float).to_numpy()
    if not pd.api.types.is_numeric_dtype(column):
        numbers = pd.to_numeric(column, errors="coerce")
        bad = text_cells(column, numbers)
        if len(bad):
            raise CpdecompError(
                f"target {target!r} must be numeric, but it has text in {_cell_name(column, bad)}; "
                "choose a numeric target column or fix those cells", reason="target")
        column = numbers
    values = column.to_numpy(dtype=float, na_value=np.nan)
    if np.isinf(values).any():
        raise CpdecompError(f"target {target!r} has infinite values")
    if np.nanmax(np.abs(values), initial=0.0) > MAX_TARGET_MAGNITUDE:
        # Sums of residuals would overflow to inf and NaN inside the models (numpy warnings,
        # then a crash), instead of one line that says what to do.
        raise CpdecompError(
            f"target {target!r} has values beyond ±{MAX_TARGET_MAGNITUDE:.0e}, too large to "
            f"compute with; rescale it (other units)", reason="target")
    return values


def require_varied_target(values: FloatArray, target: str) -> None:
    """Refuse a target with no values, or the same value on every row: nothing to predict."""
    present = values[~np.isnan(values)]
    if present.size == 0:
        raise CpdecompError(f"target {target!r} has no values", reason="target")
    if np.ptp(present) == 0:
        raise CpdecompError(f"target {target!r} has one value on every row; nothing to predict",
                            reason="target")


def require_values(table: pd.DataFrame, features: Sequence[str]) -> None:
    """Refuse a feature column that is entirely missing, or numeric with infinite values or
    values too large to compute with (the Data page says so before a run)."""
    empty = [name for name in features if entirely_missing(table[name])]
    if empty:
        more = f" (and {len(empty) - 1} more)" if len(empty) > 1 else ""
        raise CpdecompError(f"feature {empty[0]!r}{more} is entirely missing; leave it out",
                            reason="feature")
    for name in features:
        column = table[name]
        # Numeric columns only: this runs on every rerun of the Data page, and parsing text
        # columns there would cost more than the page; numbers written as text are checked
        # when they are encoded for a run (FeatureEncoder.transform).
        if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
            require_computable(name, column, column.to_numpy(dtype=float, na_value=np.nan))


@dataclass(frozen=True)
class FeatureKind:
    """How one original column is encoded: numeric, or categorical with its categories."""

    name: str
    categories: tuple[str, ...] | None = None
    numbers: bool = False
    """The categories are numbers (integer codes, say) that a user's model reads as categories
    (a one-hot or ordinal encoder in its Pipeline): coded like text, so masking has tree tables
    for them, and given back to the model as the numbers themselves."""

    @property
    def is_categorical(self) -> bool:
        return self.categories is not None


def number_text(value: object) -> str:
    """A number as a category name: '3' for 3 and 3.0 alike, else its shortest repr."""
    number = float(value)  # type: ignore[arg-type]
    return str(int(number)) if number.is_integer() else repr(number)


UnseenCategory = Literal["missing", "refuse"]


class FeatureEncoder:
    """Turns the chosen feature columns into one float matrix (category codes for strings).

    `unseen` says what a category outside the known ones becomes: missing (the built-in models
    have a rule for missing values, learned in training), or a refusal naming the column and
    rows (a user's model, whose own reading of an unknown level masking cannot reproduce).
    """

    def __init__(self, features: Sequence[str], unseen: UnseenCategory = "missing") -> None:
        self.features = tuple(features)
        self.unseen = unseen

    def fit(self, table: pd.DataFrame,
            levels: Mapping[str, Sequence[str]] | None = None,
            number_levels: Mapping[str, Sequence[float]] | None = None) -> FeatureEncoder:
        """Learn each column's kind from the training rows; `levels` adds, per text column, the
        categories a fitted model knows (they get codes even where the rows lack them);
        `number_levels`, per numeric column, the numbers a fitted model reads as categories
        (the column is then coded as categories of those numbers and the rows' own)."""
        kinds = []
        for name in self.features:
            column = table[name]
            if entirely_missing(column):
                raise CpdecompError(
                    f"feature {name!r} is entirely missing in the training rows; leave it out"
                )
            kind = _feature_kind(name, column, (levels or {}).get(name, ()))
            if not kind.is_categorical and name in (number_levels or {}):
                kind = _number_kind(name, column, (number_levels or {})[name])
            kinds.append(kind)
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
        # A table of numpy numbers only (the usual patient table) is read as one array: per
        # column, pandas' indexing costs ~20 µs, half of a patient's time at d = 16.
        columns = table.columns.tolist()
        block: list[int] = []
        if len(set(columns)) == len(columns) and all(
                isinstance(t, np.dtype) and t.kind in "fiub" for t in table.dtypes.tolist()):
            position = {name: i for i, name in enumerate(columns)}
            block = [j for j, kind in enumerate(self.kinds_)
                     if not kind.is_categorical and not kind.numbers]
        if block:
            values = table.to_numpy(dtype=float)[:, [position[self.kinds_[j].name]
                                                      for j in block]]
            with np.errstate(invalid="ignore"):
                refused = np.isinf(values) | (np.abs(values) > MAX_FEATURE_MAGNITUDE)
            for i in np.flatnonzero(refused.any(axis=0)):  # the column-wise message
                name = self.kinds_[block[i]].name
                require_computable(name, table[name], values[:, i])
            encoded[:, block] = values
        done = set(block)
        for j, kind in enumerate(self.kinds_):
            if j in done:
                continue
            column = table[kind.name]
            encoded[:, j] = _encode_column(column, kind)
            if self.unseen == "refuse" and kind.is_categorical:
                _refuse_unseen(column, encoded[:, j], kind.name)
            if not kind.is_categorical:
                require_computable(kind.name, column, encoded[:, j])
        return encoded


UNSEEN_LEVEL_FIX = (
    "leave those cells empty (missing), or add rows with that category to the training rows "
    "(the pool the background is drawn from)")


def _refuse_unseen(column: pd.Series, codes: FloatArray, name: str) -> None:
    """A present category that got no code: the model would see it as missing here, but as
    itself in its own predict."""
    unseen = np.flatnonzero(np.isnan(codes) & column.notna().to_numpy())
    if len(unseen):
        raise CpdecompError(
            f"the column {name!r} has a category in {_cell_name(column, unseen)} that neither "
            "the training rows nor the model's own categories hold, so the model would read it "
            f"as missing; {UNSEEN_LEVEL_FIX}", reason="feature")


def require_computable(name: str, column: pd.Series, values: FloatArray) -> None:
    """Refuse a numeric feature with infinite values (also written as text, "inf") or values
    beyond ±MAX_FEATURE_MAGNITUDE, in whichever rows they are, naming the rows."""
    with np.errstate(invalid="ignore"):
        infinite = np.flatnonzero(np.isinf(values))
        huge = np.flatnonzero(np.abs(values) > MAX_FEATURE_MAGNITUDE)
    if len(infinite):
        raise CpdecompError(
            f"feature {name!r} has infinite values in {_cell_name(column, infinite)}; replace "
            "them or leave it out", reason="feature")
    if len(huge):
        raise CpdecompError(
            f"feature {name!r} has values beyond ±{MAX_FEATURE_MAGNITUDE:.0e} in "
            f"{_cell_name(column, huge)}, too large to compute with; rescale it (other units) "
            "or leave it out", reason="feature")


def _feature_kind(name: str, column: pd.Series, known: Sequence[str] = ()) -> FeatureKind:
    if pd.api.types.is_bool_dtype(column) or pd.api.types.is_numeric_dtype(column):
        require_computable(name, column, column.to_numpy(dtype=float, na_value=np.nan))
        return FeatureKind(name)
    if pd.api.types.is_datetime64_any_dtype(column):
        raise CpdecompError(
            f"feature {name!r} holds dates; convert it to a number (e.g. days since admission)"
        )
    present = column.dropna()
    numbers = pd.to_numeric(present, errors="coerce")
    share_numeric = float(numbers.notna().mean()) if len(present) else 0.0
    if share_numeric == 1.0 and not known:
        return FeatureKind(name)  # numbers stored as text (e.g. a Parquet string column)
    if SHARE_NUMERIC_FOR_NUMBERS <= share_numeric < 1.0 and not known:
        bad = text_cells(column)
        raise CpdecompError(
            f"feature {name!r} is numeric, but it has text in {_cell_name(column, bad)}; "
            "fix those cells or leave them empty (missing)", reason="feature")
    seen = {str(v) for v in present}
    if len(present) >= MIN_ROWS_FOR_IDENTIFIER and len(seen) == len(present):
        raise CpdecompError(
            f"feature {name!r} has a different text value on every row, like an identifier; "
            "pass it as --id-column or leave it out with --features"
        )
    categories = tuple(sorted(seen | set(known)))
    if len(categories) > MAX_CATEGORIES:
        whose = " (with the model's own)" if len(seen) <= MAX_CATEGORIES else ""
        raise CpdecompError(
            f"feature {name!r} has {len(categories)} distinct text values{whose}, which looks "
            "like an identifier; pass it as --id-column or leave it out with --features"
        )
    return FeatureKind(name, categories)


def _number_kind(name: str, column: pd.Series, known: Sequence[float]) -> FeatureKind:
    """A numeric column a model reads as categories: its numbers (the rows' and the model's)
    as categories in numeric order, or numeric as before when they are not all finite or too
    many to code."""
    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    numbers = np.unique(np.r_[values[~np.isnan(values)], np.asarray(known, dtype=float)])
    numbers = numbers[~np.isnan(numbers)]
    if not np.isfinite(numbers).all() or len(numbers) > MAX_CATEGORIES:
        return FeatureKind(name)
    texts = tuple(dict.fromkeys(number_text(v) for v in numbers))
    return FeatureKind(name, texts, numbers=True)


def _encode_numbers(column: pd.Series, kind: FeatureKind) -> FloatArray:
    lookup = {category: float(code) for code, category in enumerate(kind.categories or ())}
    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    # a cell that is no number or not one of the categories gets no code (unseen)
    return np.array([np.nan if np.isnan(v) or np.isinf(v) else lookup.get(number_text(v), np.nan)
                     for v in values], dtype=float)


def _encode_column(column: pd.Series, kind: FeatureKind) -> FloatArray:
    if kind.numbers:
        return _encode_numbers(column, kind)
    if not kind.is_categorical:
        if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            return column.to_numpy(dtype=float, na_value=np.nan)
        numbers = pd.to_numeric(column, errors="coerce")
        bad = text_cells(column, numbers)
        if len(bad):
            raise CpdecompError(
                f"feature {kind.name!r} is numeric in the training rows, but it has text in "
                f"{_cell_name(column, bad)}", reason="feature")
        return numbers.to_numpy(dtype=float, na_value=np.nan)
    lookup = {category: float(code) for code, category in enumerate(kind.categories or ())}
    # Unseen categories are NaN here; FeatureEncoder.unseen says whether that stands.
    return np.array(
        [lookup.get(str(v), np.nan) if not is_missing(v) else np.nan for v in column],
        dtype=float,
    )


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

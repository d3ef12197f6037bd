"""Reading and preparing tables (core.data), checked directly and through the command line.

Fixture tables are generated in tmp_path: ';'-separated CSV, column names with dots, spaces
and unicode, a string column, missing values, rows without a target, a constant feature.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_helpers import assert_bad_input, run_ok
from threadpoolctl import threadpool_limits

from cpdecomp.core.data import (
    FeatureEncoder,
    choose_columns,
    parse_split,
    split_rows,
    target_values,
)
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.tables import load_table

FAST = ["--model", "linear", "--background", "8"]
NUMERIC_NAMES = ["a.b", "age years", "Größe µ/m²"]
CATEGORICAL = "group (colour)"
CATEGORIES = ["blue", "green", "red"]
N_ROWS = 120


# ----------------------------------------------------------------------------------- helpers




@pytest.fixture
def one_openmp_thread():
    """gbm (HistGradientBoosting) with OpenMP threads on a busy 2-core machine runs ~50x slower
    than single-threaded (threads spin-wait); its results do not depend on the thread count."""
    with threadpool_limits(limits=1, user_api="openmp"):
        yield


def make_table(seed: int = 1, n: int = N_ROWS) -> pd.DataFrame:
    """Awkward names, a string column, a constant column and a target that depends on them."""
    rng = np.random.default_rng(seed)
    table = pd.DataFrame({
        "pid": [f"id{i:03d}" for i in range(n)],
        NUMERIC_NAMES[0]: rng.normal(size=n),
        NUMERIC_NAMES[1]: rng.normal(50, 10, size=n),
        NUMERIC_NAMES[2]: rng.normal(size=n),
        CATEGORICAL: rng.choice(CATEGORIES, size=n),
        "const": 5.0,
    })
    table["y"] = (
        10 + 2 * table[NUMERIC_NAMES[0]] + 0.1 * table[NUMERIC_NAMES[1]]
        + 3 * (table[CATEGORICAL] == "red")
        + rng.normal(size=n) * (1 + table[NUMERIC_NAMES[2]] ** 2)
    )
    return table


def write_csv(table: pd.DataFrame, path: Path, sep: str = ";") -> Path:
    table.to_csv(path, sep=sep, index=False, encoding="utf-8")
    return path


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def features_of(document: dict) -> dict[str, dict[str, dict]]:
    """patient_id -> feature -> that feature's entry."""
    return {
        p["patient_id"]: {f["feature"]: f for f in p["features"]} for p in document["patients"]
    }


def split_roles(n_rows: int, seed: int = 0) -> dict[str, np.ndarray]:
    """The row positions of each role in the command line's default seeded split."""
    train, calibration, test = split_rows(n_rows, parse_split("0.5,0.25,0.25"), seed)
    return {"train": train, "calibration": calibration, "test": test}


# ---------------------------------------------------------------------------- reading files


@pytest.mark.parametrize("sep", [";", ",", "\t"])
def test_separator_is_detected(tmp_path, sep) -> None:
    """';' (Excel in many locales), ',' and tab CSV all read into the same typed table."""
    table = make_table()
    loaded = load_table(write_csv(table, tmp_path / "t.csv", sep=sep))
    assert loaded.columns.tolist() == table.columns.tolist()
    for name in NUMERIC_NAMES:
        assert pd.api.types.is_float_dtype(loaded[name]), name
        np.testing.assert_allclose(loaded[name], table[name], rtol=1e-15)
    assert loaded[CATEGORICAL].tolist() == table[CATEGORICAL].tolist()


def test_byte_order_mark_is_not_part_of_the_first_name(tmp_path) -> None:
    """An Excel UTF-8 BOM does not end up in the first column's name."""
    path = tmp_path / "bom.csv"
    make_table().to_csv(path, sep=";", index=False, encoding="utf-8-sig")
    assert load_table(path).columns[0] == "pid"


def test_semicolon_csv_with_decimal_commas_reads_numbers(tmp_path) -> None:
    """Excel in the locales that write ';'-separated CSV writes decimal commas (32,1): those
    cells are numbers, so the columns must be numeric (not text categories or a refused
    target)."""
    path = tmp_path / "excel_de.csv"
    path.write_text("bmi;age;y\n32,1;59;151,5\n21,6;48;75,0\n30,5;72;141,25\n",
                    encoding="utf-8")
    table = load_table(path)
    assert pd.api.types.is_float_dtype(table["bmi"]), table.dtypes.to_dict()
    np.testing.assert_allclose(table["bmi"].to_numpy(dtype=float), [32.1, 21.6, 30.5])
    np.testing.assert_allclose(target_values(table, "y"), [151.5, 75.0, 141.25])


def test_missing_tokens_are_missing(tmp_path) -> None:
    """The usual spellings of a missing cell (empty, NA, ?, null) read as missing."""
    path = tmp_path / "tokens.csv"
    path.write_text("x;g;y\n1.5;a;1\nNA;?;2\n;null;3\n2.5;b;\n", encoding="utf-8")
    table = load_table(path)
    assert table["x"].isna().tolist() == [False, True, True, False]
    assert table["g"].isna().tolist() == [False, True, True, False]
    np.testing.assert_array_equal(np.isnan(target_values(table, "y")), [False] * 3 + [True])


def test_parquet_input_keeps_names_and_types(tmp_path) -> None:
    table = make_table()
    path = tmp_path / "t.parquet"
    table.to_parquet(path, index=False)
    loaded = load_table(path)
    assert loaded.columns.tolist() == table.columns.tolist()
    pd.testing.assert_frame_equal(loaded, table)


# ---------------------------------------------------------------------------- column names


def test_awkward_column_names_are_kept_by_choose_columns() -> None:
    """Dots, spaces, slashes and unicode in names are used as given; features default to all
    columns except target and id, in file order."""
    chosen = choose_columns(make_table(), "y", "pid")
    assert chosen.features == (*NUMERIC_NAMES, CATEGORICAL, "const")


@pytest.mark.parametrize("extension", [".csv", ".parquet", ".json"])
def test_awkward_column_names_appear_unchanged_in_output(capsys, tmp_path, extension) -> None:
    """Through the command line (';' CSV in), the 'feature' column holds the names as given."""
    data = write_csv(make_table(), tmp_path / "awkward.csv")
    out = tmp_path / f"out{extension}"
    run_ok(capsys, "explain", data, "--target", "y", "--id-column", "pid", *FAST, "--out", out)
    expected = [*NUMERIC_NAMES, CATEGORICAL, "const"]
    if extension == ".json":
        document = read_json(out)
        assert document["meta"]["features"] == expected
        names = [f["feature"] for p in document["patients"] for f in p["features"]]
    elif extension == ".csv":
        names = pd.read_csv(out)["feature"].tolist()
    else:
        names = pd.read_parquet(out)["feature"].tolist()
    assert list(dict.fromkeys(names)) == expected


def test_awkward_names_can_be_chosen_with_features(capsys, tmp_path) -> None:
    """--features accepts the awkward names verbatim (comma-separated)."""
    data = write_csv(make_table(), tmp_path / "awkward.csv")
    out = tmp_path / "out.json"
    run_ok(capsys, "explain", data, "--target", "y", "--id-column", "pid", *FAST,
           "--features", ",".join([NUMERIC_NAMES[2], NUMERIC_NAMES[0], CATEGORICAL]),
           "--out", out)
    assert read_json(out)["meta"]["features"] == [NUMERIC_NAMES[2], NUMERIC_NAMES[0], CATEGORICAL]


# ------------------------------------------------------------------------ string columns


def test_string_column_is_one_categorical_player() -> None:
    """A string column is encoded as one column of category codes, not one-hot columns."""
    table = make_table()
    encoder = FeatureEncoder([NUMERIC_NAMES[0], CATEGORICAL]).fit(table)
    encoded = encoder.transform(table)
    assert encoded.shape == (len(table), 2)
    np.testing.assert_array_equal(encoder.categorical_mask, [False, True])
    codes = {value: code for value, code in zip(table[CATEGORICAL], encoded[:, 1], strict=True)}
    assert sorted(codes.values()) == sorted(set(codes.values()))
    assert len(codes) == len(CATEGORIES)


def test_unseen_category_is_encoded_as_missing() -> None:
    encoder = FeatureEncoder([CATEGORICAL]).fit(make_table())
    encoded = encoder.transform(pd.DataFrame({CATEGORICAL: ["red", "purple", None]}))
    assert not np.isnan(encoded[0, 0])
    assert np.isnan(encoded[1:, 0]).all()


def test_string_column_is_one_player_in_the_output(capsys, tmp_path) -> None:
    """The feature list has one entry per original column; the category labels themselves
    appear in feature_value."""
    table = make_table()
    data = write_csv(table, tmp_path / "t.csv")
    out = tmp_path / "out.csv"
    run_ok(capsys, "explain", data, "--target", "y", "--id-column", "pid", *FAST, "--out", out)
    frame = pd.read_csv(out)
    assert frame["feature"].unique().tolist() == [*NUMERIC_NAMES, CATEGORICAL, "const"]
    assert frame.groupby("patient_id").size().eq(5).all()
    rows = frame[frame["feature"] == CATEGORICAL]
    assert set(rows["feature_value"]) <= set(CATEGORIES)
    expected = table.set_index("pid").loc[rows["patient_id"], CATEGORICAL].tolist()
    assert rows["feature_value"].tolist() == expected


# ------------------------------------------------------------------------ missing values


@pytest.mark.parametrize(("model", "family"), [("linear", "normalized"), ("gbm", "absolute")])
def test_rows_with_missing_features_are_explained(
    capsys, tmp_path, one_openmp_thread, model, family
) -> None:
    """Missing numeric and categorical values (in every part of the split) do not stop the
    run, and the explained rows that have them get finite attributions."""
    table = make_table()
    table.loc[table.index % 6 == 0, NUMERIC_NAMES[0]] = np.nan
    table.loc[table.index % 7 == 1, CATEGORICAL] = np.nan
    data = write_csv(table, tmp_path / "holes.csv")
    out = tmp_path / "out.json"
    run_ok(capsys, "explain", data, "--target", "y", "--id-column", "pid", "--model", model,
           "--family", family, "--background", "8",
           "--features", f"{NUMERIC_NAMES[0]},{NUMERIC_NAMES[1]},{CATEGORICAL}", "--out", out)
    document = read_json(out)
    explained = features_of(document)
    test_rows = split_roles(len(table))["test"]
    expected_ids = table["pid"].iloc[test_rows].tolist()
    assert sorted(explained) == sorted(expected_ids)

    with_holes = table.iloc[test_rows]
    numeric_holes = with_holes.loc[with_holes[NUMERIC_NAMES[0]].isna(), "pid"].tolist()
    category_holes = with_holes.loc[with_holes[CATEGORICAL].isna(), "pid"].tolist()
    assert numeric_holes and category_holes, "the fixture puts holes in explained rows"
    for pid in numeric_holes:
        assert explained[pid][NUMERIC_NAMES[0]]["feature_value"] is None
    for pid in category_holes:
        assert explained[pid][CATEGORICAL]["feature_value"] is None
    for patient in document["patients"]:
        assert np.isfinite(patient["width"]) and patient["width"] > 0
        for entry in patient["features"]:
            assert np.isfinite([entry["calibration"], entry["instance"], entry["total"]]).all()


def test_rows_without_target_are_explained_not_fitted(capsys, tmp_path) -> None:
    """Rows with a missing target join the explained patients (with y missing) and are in
    neither the training nor the calibration rows; the labelled rows are split as usual."""
    table = make_table()
    unlabelled = [3, 10, 11, 57, 119]
    table.loc[unlabelled, "y"] = np.nan
    data = write_csv(table, tmp_path / "partly_labelled.csv")
    out = tmp_path / "out.json"
    run_ok(capsys, "explain", data, "--target", "y", "--id-column", "pid", *FAST, "--out", out)
    document = read_json(out)
    meta = document["meta"]

    n_labelled = N_ROWS - len(unlabelled)
    train, calibration, test = split_rows(n_labelled, (0.5, 0.25, 0.25), 0)
    assert meta["n_train"] == len(train)
    assert meta["n_calibration"] == len(calibration)
    assert meta["n_train"] + meta["n_calibration"] + len(test) == n_labelled
    assert len(document["patients"]) == len(test) + len(unlabelled)

    y_by_id = {p["patient_id"]: p["y"] for p in document["patients"]}
    for row in unlabelled:
        assert table.at[row, "pid"] in y_by_id
        assert y_by_id[table.at[row, "pid"]] is None
    labelled_y = [y for y in y_by_id.values() if y is not None]
    assert len(labelled_y) == len(test)
    assert any("without a target" in w for w in meta["warnings"])


def test_rows_without_target_keep_their_row_numbers(capsys, tmp_path) -> None:
    """Without an id column, an unlabelled row's patient_id is its row number in DATA."""
    table = make_table().drop(columns=["pid"])
    table.loc[[4, 90], "y"] = np.nan
    data = write_csv(table, tmp_path / "t.csv")
    out = tmp_path / "out.csv"
    run_ok(capsys, "explain", data, "--target", "y", *FAST, "--features", NUMERIC_NAMES[1],
           "--out", out)
    frame = pd.read_csv(out)
    missing_y = sorted(frame.loc[frame["y"].isna(), "patient_id"].tolist())
    assert missing_y == [4, 90]
    np.testing.assert_allclose(frame["feature_value"].to_numpy(dtype=float),
                               table[NUMERIC_NAMES[1]].to_numpy()[frame["patient_id"]],
                               rtol=0, atol=0)


# ---------------------------------------------------------------------------- bad columns


@pytest.mark.parametrize("role", ["train", "calibration", "test"])
def test_stray_text_in_numeric_column_is_a_clear_error(capsys, tmp_path, role) -> None:
    """One text cell in a numeric column, wherever the split puts its row, is refused with
    status 2 and a message naming the column and the cell's row in the file (not its value:
    cells are patient data)."""
    table = make_table()
    row = int(split_roles(len(table))[role][0])
    column = NUMERIC_NAMES[1]
    table[column] = table[column].astype(object)
    table.loc[row, column] = "n/k"
    data = write_csv(table, tmp_path / "stray.csv")
    message = assert_bad_input(capsys, "explain", data, "--target", "y", "--id-column", "pid",
                               *FAST, "--out", tmp_path / "o.csv")
    assert repr(column) in message
    assert f"data row {row + 1}" in message
    assert "n/k" not in message


def test_numeric_text_column_fits_as_numeric() -> None:
    """A column stored as text that is all numbers (e.g. from Parquet) is a numeric feature."""
    table = pd.DataFrame({"x": ["1.5", "2.0", "3.25", None]})
    encoder = FeatureEncoder(["x"]).fit(table)
    np.testing.assert_array_equal(encoder.categorical_mask, [False])
    np.testing.assert_allclose(encoder.transform(table)[:, 0], [1.5, 2.0, 3.25, np.nan])


def test_single_valued_target_is_refused(capsys, tmp_path) -> None:
    table = make_table()
    table["y"] = 7.0
    data = write_csv(table, tmp_path / "flat.csv")
    message = assert_bad_input(capsys, "explain", data, "--target", "y", "--id-column", "pid",
                               *FAST, "--out", tmp_path / "o.csv")
    assert "one value" in message


def test_entirely_missing_feature_is_refused(capsys, tmp_path) -> None:
    table = make_table()
    table["empty"] = np.nan
    data = write_csv(table, tmp_path / "empty_col.csv")
    message = assert_bad_input(capsys, "explain", data, "--target", "y", "--id-column", "pid",
                               *FAST, "--out", tmp_path / "o.csv")
    assert "'empty'" in message


def test_boolean_column_is_a_numeric_player_in_every_format(capsys, tmp_path) -> None:
    """A True/False column is a numeric feature (0/1) and all three formats are written."""
    table = make_table()
    table["smoker"] = table.index % 3 == 0
    data = write_csv(table, tmp_path / "flags.csv")
    for extension in (".csv", ".parquet", ".json"):
        out = tmp_path / f"out{extension}"
        run_ok(capsys, "explain", data, "--target", "y", "--id-column", "pid", *FAST,
               "--features", f"{NUMERIC_NAMES[0]},smoker", "--out", out)
        assert out.exists()


def test_nullable_parquet_columns_with_missing_values_write_json(capsys, tmp_path) -> None:
    """Parquet's nullable Int64 / boolean columns with a missing cell in an explained row are
    written to every format; the missing cell is null in JSON."""
    table = make_table()
    table["visits"] = pd.array(np.arange(N_ROWS) % 4, dtype="Int64")
    table["insured"] = pd.array(np.arange(N_ROWS) % 3 == 0, dtype="boolean")
    first_test_row = int(split_roles(N_ROWS)["test"][0])
    table.loc[first_test_row, ["visits", "insured"]] = pd.NA
    data = tmp_path / "nullable.parquet"
    table.to_parquet(data, index=False)
    for extension in (".csv", ".parquet", ".json"):
        out = tmp_path / f"out{extension}"
        run_ok(capsys, "explain", data, "--target", "y", "--id-column", "pid", *FAST,
               "--features", f"{NUMERIC_NAMES[0]},visits,insured", "--out", out)
    explained = features_of(read_json(tmp_path / "out.json"))
    patient = explained[table.at[first_test_row, "pid"]]
    assert patient["visits"]["feature_value"] is None
    assert patient["insured"]["feature_value"] is None


# --------------------------------------------------------------------------- seeded split


@pytest.mark.parametrize("n_rows", [10, 101, 442])
def test_split_is_disjoint_and_covers_all_rows(n_rows) -> None:
    parts = split_rows(n_rows, (0.5, 0.25, 0.25), seed=0)
    joined = np.concatenate(parts)
    np.testing.assert_array_equal(np.sort(joined), np.arange(n_rows))
    assert len(set(joined.tolist())) == n_rows
    for part in parts:
        np.testing.assert_array_equal(part, np.sort(part))
    np.testing.assert_allclose([len(p) / n_rows for p in parts[:2]], [0.5, 0.25], atol=1 / n_rows)


def test_split_is_deterministic_given_the_seed() -> None:
    """Same seed -> the same rows in each part; another seed -> a different split."""
    first = split_rows(200, (0.5, 0.25, 0.25), seed=3)
    again = split_rows(200, (0.5, 0.25, 0.25), seed=3)
    other = split_rows(200, (0.5, 0.25, 0.25), seed=4)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(first, other, strict=True))
    assert [len(p) for p in first] == [len(p) for p in other]


def test_seed_changes_the_explained_rows(capsys, tmp_path) -> None:
    """Through the command line: --seed picks the test rows reproducibly."""
    data = write_csv(make_table(), tmp_path / "t.csv")
    ids = {}
    for seed in ("0", "0", "1"):
        out = tmp_path / f"out_{seed}.json"
        run_ok(capsys, "explain", data, "--target", "y", "--id-column", "pid", *FAST,
               "--features", NUMERIC_NAMES[0], "--seed", seed, "--out", out)
        ids.setdefault(seed, []).append([p["patient_id"] for p in read_json(out)["patients"]])
    assert ids["0"][0] == ids["0"][1]
    assert sorted(ids["0"][0]) != sorted(ids["1"][0])
    expected = make_table()["pid"].iloc[split_roles(N_ROWS, seed=1)["test"]].tolist()
    assert sorted(ids["1"][0]) == sorted(expected)


@pytest.mark.parametrize("text", ["0.5,0.25", "0.5,0.5,0.5", "0,0.5,0.5", "x,y,z", "0.5;0.25;0.25"])
def test_parse_split_refuses_bad_fractions(text) -> None:
    with pytest.raises(CpdecompError, match="--split"):
        parse_split(text)


def test_parse_split_reads_three_fractions() -> None:
    assert parse_split("0.6, 0.2, 0.2") == (0.6, 0.2, 0.2)


# ------------------------------------------------------------------------------ null player


@pytest.mark.parametrize(
    ("model", "family"),
    [("linear", "normalized"), ("linear", "absolute"), ("linear", "cqr"), ("gbm", "cqr")],
)
def test_constant_feature_is_a_null_player(
    capsys, tmp_path, one_openmp_thread, model, family
) -> None:
    """A feature with one value everywhere changes no coalition's value, so its calibration,
    instance and total attributions are exactly 0.0 for every patient (null-player axiom),
    not a rounding residue. All five features are players (32 coalitions)."""
    data = write_csv(make_table(), tmp_path / "t.csv")
    out = tmp_path / "out.csv"
    run_ok(capsys, "explain", data, "--target", "y", "--id-column", "pid", "--model", model,
           "--family", family, "--background", "8", "--out", out)
    frame = pd.read_csv(out)
    const = frame[frame["feature"] == "const"]
    assert len(const) == frame["patient_id"].nunique()
    for column in ("calibration", "instance", "total"):
        np.testing.assert_array_equal(const[column].to_numpy(), 0.0, err_msg=column)

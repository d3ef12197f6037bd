"""`cpdecomp compare`: calibration sets from a column or from files, the tidy columns, the JSON
against its schema, and bad input as one line with status 2."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest
from cli_helpers import assert_bad_input, run_ok

from cpdecomp.core.cli import build_parser
from cpdecomp.core.output import COMPARISON_FORMAT_VERSION, COMPARISON_SCHEMA_PATH

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data" / "diabetes.csv"
FAST = ["--model", "linear", "--background", "8", "--calibration-bootstrap", "40"]
BASE = ["compare", SAMPLE, "--target", "progression", "--id-column", "patient_id", *FAST]
COLUMNS = ["patient_id", "feature", "set", "calibration", "calibration_change",
           "calibration_change_low", "calibration_change_high", "instance", "width",
           "base_width"]


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(COMPARISON_SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(validator, document) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(document)]


@pytest.fixture(scope="module")
def site_files(tmp_path_factory) -> dict[str, Path]:
    """The diabetes table as a hospital would bring it: training rows from elsewhere, two
    sites' calibration rows with a `site` column, and patients."""
    folder = tmp_path_factory.mktemp("sites")
    table = pd.read_csv(SAMPLE, dtype={"patient_id": str})
    order = np.random.default_rng(0).permutation(len(table))
    parts = {"train": order[:200], "site_a": order[200:300], "site_b": order[300:400],
             "patients": order[400:]}
    files = {}
    for name, rows in parts.items():
        part = table.iloc[rows]
        if name.startswith("site"):
            part = part.assign(site=name[-1].upper())
        files[name] = folder / f"{name}.csv"
        part.to_csv(files[name], index=False)
    both = pd.concat([pd.read_csv(files["site_a"]), pd.read_csv(files["site_b"])])
    files["sites"] = folder / "sites.csv"
    both.to_csv(files["sites"], index=False)
    return files


def test_the_sample_split_by_a_column_gives_the_tidy_rows(capsys, tmp_path, validator):
    out = tmp_path / "recalibration.csv"
    err = run_ok(capsys, *BASE, "--calibration-by", "sex", "--out", out)
    assert "compared 2 calibration sets, '1' (" in err and "reference '1'" in err
    frame = pd.read_csv(out, dtype={"patient_id": str})
    assert list(frame.columns[:4]) == ["patient_id", "feature", "feature_value", "set"]
    assert set(COLUMNS) <= set(frame.columns)
    assert "sex" not in set(frame["feature"])  # the split's column is left out of the features
    assert len(frame) == 111 * 9 * 2
    reference = frame[frame["set"] == 1]
    assert (reference["calibration_change"] == 0).all()
    assert reference["calibration_change_low"].isna().all()
    other = frame[frame["set"] == 2]
    assert other["calibration_change_low"].notna().all()
    assert (other["calibration_change_low"] <= other["calibration_change_high"]).all()
    document = tmp_path / "recalibration.json"
    run_ok(capsys, *BASE, "--calibration-by", "sex", "--out", document, "-q")
    doc = json.loads(document.read_text(encoding="utf-8"))
    assert errors(validator, doc) == []
    meta = doc["meta"]
    assert meta["format_version"] == COMPARISON_FORMAT_VERSION
    assert [s["name"] for s in meta["sets"]] == ["1", "2"]
    assert {(c["intervals"], c["rows"]) for c in meta["coverage"]} == {
        ("1", "2"), ("2", "1"), ("1", "patients"), ("2", "patients")}
    assert meta["identity"]["instance_identical"] is True
    assert meta["identity"]["total_change_gap"] < 1e-9
    assert meta["instance_note"].startswith("In width units")


def test_files_from_two_sites_are_named_by_their_file_names(capsys, tmp_path, site_files,
                                                           validator):
    out = tmp_path / "sites.json"
    run_ok(capsys, "compare", site_files["patients"], "--target", "progression", "--id-column",
           "patient_id", *FAST, "--train", site_files["train"], "--calibration",
           site_files["site_a"], "--against", site_files["site_b"], "--reference", "site_b",
           "--features", "age,bmi,bp,s5 ltg", "--family", "absolute", "--out", out)
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert errors(validator, doc) == []
    assert doc["meta"]["reference"] == "site_b"
    assert [s["name"] for s in doc["meta"]["sets"]] == ["site_a", "site_b"]
    assert doc["meta"]["instance_note"] is None  # absolute: width units separate already
    patient = doc["patients"][0]
    by_set = {s["set"]: s for s in patient["sets"]}
    assert all(f["calibration_change"] == 0 for f in by_set["site_b"]["features"])
    assert [f["instance"] for f in by_set["site_a"]["features"]] == [
        f["instance"] for f in by_set["site_b"]["features"]]


def test_a_site_column_of_one_calibration_file_and_a_chosen_reference(capsys, tmp_path,
                                                                     site_files):
    out = tmp_path / "by_site.parquet"
    run_ok(capsys, "compare", site_files["patients"], "--target", "progression", "--id-column",
           "patient_id", *FAST, "--train", site_files["train"], "--calibration",
           site_files["sites"], "--calibration-by", "site", "--reference", "B", "--out", out)
    frame = pd.read_parquet(out)
    assert set(frame["set"]) == {"A", "B"} and "site" not in set(frame["feature"])
    assert (frame.loc[frame["set"] == "B", "calibration_change"] == 0).all()


def test_three_periods_against_the_first(capsys, tmp_path):
    table = pd.read_csv(SAMPLE, dtype={"patient_id": str})
    table["period"] = np.resize(["2024-01", "2024-02", "2024-03"], len(table))
    data = tmp_path / "periods.csv"
    table.to_csv(data, index=False)
    out = tmp_path / "periods.csv.out.csv"
    run_ok(capsys, "compare", data, "--target", "progression", "--id-column", "patient_id",
           *FAST, "--calibration-by", "period", "--split", "0.4,0.4,0.2", "--out", out)
    frame = pd.read_csv(out)
    assert list(dict.fromkeys(frame["set"])) == ["2024-01", "2024-02", "2024-03"]
    assert (frame.loc[frame["set"] == "2024-01", "calibration_change"] == 0).all()


@pytest.mark.parametrize(("extra", "needle"), [
    (["--calibration-by", "sex", "--reference", "3"], "no calibration set '3'"),
    (["--calibration-by", "sexx"], "did you mean 'sex'"),
    (["--calibration-by", "sex", "--alpha", "0.01"],
     "calibration set '1' has 56 rows; alpha = 0.01 needs at least 99"),
    ([], "give --against FILE"),
    (["--calibration-by", "sex", "--against", "x.csv"], "not allowed with argument"),
])
def test_bad_input_is_one_line(capsys, tmp_path, extra, needle):
    message = assert_bad_input(capsys, *BASE, *extra, "--out", tmp_path / "o.csv")
    assert needle in message, message
    assert not (tmp_path / "o.csv").exists()


def test_a_set_with_other_columns_is_refused_by_name(capsys, tmp_path, site_files):
    other = tmp_path / "site_c.csv"
    pd.read_csv(site_files["site_b"]).drop(columns="bmi").to_csv(other, index=False)
    message = assert_bad_input(
        capsys, "compare", site_files["patients"], "--target", "progression", "--id-column",
        "patient_id", *FAST, "--train", site_files["train"], "--calibration",
        site_files["site_a"], "--against", other, "--out", tmp_path / "o.csv")
    assert "calibration set 'site_c' has no feature column 'bmi'" in message
    small = tmp_path / "tiny.csv"
    pd.read_csv(site_files["site_b"]).head(5).to_csv(small, index=False)
    message = assert_bad_input(
        capsys, "compare", site_files["patients"], "--target", "progression", "--id-column",
        "patient_id", *FAST, "--train", site_files["train"], "--calibration",
        site_files["site_a"], "--against", small, "--out", tmp_path / "o.csv")
    assert "calibration set 'tiny' has 5 rows; alpha = 0.1 needs at least 9" in message


def test_compare_takes_explains_shared_options():
    """The options explain and compare share come from one definition (core/cli.py)."""
    parser = build_parser()
    commands = next(a for a in parser._actions if hasattr(a, "choices") and a.choices
                    and "compare" in a.choices).choices
    shared = {"--target", "--id-column", "--features", "--train", "--calibration", "--split",
              "--family", "--model", "--model-file", "--method", "--budget", "--group",
              "--alpha", "--background", "--scale", "--masking", "--seed", "--out", "--format",
              "--max-rows", "--max-cells", "--max-bytes", "--quiet", "--verbose",
              "--calibration-bootstrap"}

    def options(name):
        return {o: a for a in commands[name]._actions for o in a.option_strings}

    explain, compare = options("explain"), options("compare")
    assert shared <= set(explain) and shared <= set(compare)
    for option in shared - {"--calibration", "--calibration-bootstrap"}:
        assert explain[option].help == compare[option].help, option
    assert compare["--calibration-bootstrap"].default == 200


@pytest.mark.parametrize(("method", "scale"), [("leave-one-out", "log"), ("permutation", "width")])
def test_other_methods_and_log_units_validate_and_report_their_gaps(capsys, tmp_path, validator,
                                                                    method, scale):
    out = tmp_path / "o.json"
    run_ok(capsys, *BASE, "--calibration-by", "sex", "--method", method, "--scale", scale,
           *(["--budget", "8"] if method == "permutation" else []), "--out", out, "-q")
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert errors(validator, doc) == []
    identity = doc["meta"]["identity"]
    assert identity["instance_identical"] is True and identity["instance_change"] == 0
    assert identity["efficient"] is (method != "leave-one-out")
    if method == "leave-one-out":  # not efficient: the gap is reported, not asserted
        assert identity["total_change_gap"] > 1e-6
    else:
        assert identity["total_change_gap"] < 1e-9
    assert (doc["meta"]["instance_note"] is None) == (scale == "log")

"""The JSON output against its committed schema (core/schema/explanation.schema.json), validated
by the jsonschema package: every family × method, groups, log scale, rows without a target."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from cli_helpers import run_ok

from cpdecomp.core.attribution import METHOD_BUDGETS, METHODS
from cpdecomp.core.conformal import FAMILIES
from cpdecomp.core.models import MODELS
from cpdecomp.core.output import FORMAT_VERSION, SCHEMA_PATH

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data" / "diabetes.csv"
FAST = ["--model", "linear", "--background", "8", "--features", "bmi,bp,s5 ltg"]


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def explain_json(capsys, tmp_path: Path, *argv: object) -> dict:
    out = tmp_path / "explained.json"
    run_ok(capsys, "explain", *argv, "--out", out)
    return json.loads(out.read_text(encoding="utf-8"))


def errors(validator: jsonschema.Draft202012Validator, document: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(document)]


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_family_and_method_validates(capsys, tmp_path, validator, family, method) -> None:
    document = explain_json(capsys, tmp_path, SAMPLE, "--target", "progression", "--id-column",
                            "patient_id", *FAST, "--family", family, "--method", method,
                            *(["--budget", "8"] if METHOD_BUDGETS[method] else []))
    assert errors(validator, document) == []
    assert document["meta"]["format_version"] == FORMAT_VERSION
    assert document["meta"]["method"] == method and document["meta"]["family"] == family


def test_groups_log_scale_and_row_numbers_validate(capsys, tmp_path, validator) -> None:
    document = explain_json(capsys, tmp_path, SAMPLE, "--target", "progression", *FAST[:4],
                            "--features", "bmi,bp,s1 tc,s2 ldl", "--group", "s1 tc,s2 ldl",
                            "--scale", "log")
    assert errors(validator, document) == []
    patient = document["patients"][0]
    assert isinstance(patient["patient_id"], int)  # no id column: the row number
    assert any(" | " in str(f["feature_value"]) for f in patient["features"])


def test_patients_without_a_target_validate(capsys, tmp_path, validator) -> None:
    import pandas as pd

    table = pd.read_csv(SAMPLE)
    train, calibration, new = table.iloc[:250], table.iloc[250:400], table.iloc[400:]
    paths = {}
    for name, part in {"train": train, "calibration": calibration,
                       "new": new.drop(columns="progression")}.items():
        paths[name] = tmp_path / f"{name}.csv"
        part.to_csv(paths[name], index=False)
    document = explain_json(capsys, tmp_path, paths["new"], "--target", "progression",
                            "--id-column", "patient_id", "--train", paths["train"],
                            "--calibration", paths["calibration"], *FAST)
    assert errors(validator, document) == []
    assert "y" not in document["patients"][0]


def test_the_schema_rejects_what_the_format_does_not_allow(capsys, tmp_path, validator) -> None:
    """The schema can fail: each mutation of a valid document is caught."""
    document = explain_json(capsys, tmp_path, SAMPLE, "--target", "progression",
                            "--id-column", "patient_id", *FAST)
    assert errors(validator, document) == []

    def broken(change) -> list[str]:
        copied = copy.deepcopy(document)
        change(copied)
        return errors(validator, copied)

    assert broken(lambda d: d["meta"].pop("format_version"))
    assert broken(lambda d: d["meta"].update(format_version="2.0"))
    assert broken(lambda d: d["meta"].update(family="poisson"))
    assert broken(lambda d: d["meta"].update(additivity_error=-1.0))
    assert broken(lambda d: d["meta"].update(masking_check_error=-1e-9))
    assert broken(lambda d: d["meta"].update(undocumented=1))
    assert broken(lambda d: d["patients"][0]["features"][0].pop("instance"))
    assert broken(lambda d: d["patients"][0]["features"][0].update(total="1.0"))
    assert broken(lambda d: d["patients"][0].update(width="wide"))
    assert broken(lambda d: d["meta"].update(calibration_bootstrap=-1))
    assert broken(lambda d: d["meta"].update(calibration_level=1.5))
    # Fields of meta that other work adds (the fast paths' spot check, φ_C's bootstrap):
    assert not broken(lambda d: d["meta"].update(masking_check_error=3e-15))
    assert not broken(lambda d: d["meta"].update(calibration_bootstrap=0, calibration_level=None))
    assert not broken(lambda d: d["meta"].update(calibration_bootstrap=200, calibration_level=0.9))


def test_the_schema_lists_the_registries() -> None:
    """The enums in the committed schema are the code's registries (one home: the code)."""
    meta = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))["$defs"]["meta"]["properties"]
    assert meta["family"]["enum"] == list(FAMILIES)
    assert meta["method"]["enum"] == list(METHODS)
    assert meta["model"]["enum"] == list(MODELS)
    assert FORMAT_VERSION.split(".")[0] == "1"  # the schema describes major version 1


@pytest.mark.parametrize("family", ["normalized", "cqr"])
def test_calibration_interval_and_fixed_quantile_columns_validate(capsys, tmp_path, validator,
                                                                   family) -> None:
    document = explain_json(capsys, tmp_path, SAMPLE, "--target", "progression", "--id-column",
                            "patient_id", *FAST, "--family", family,
                            "--calibration-bootstrap", "60", "--fixed-quantile")
    assert errors(validator, document) == []
    assert document["meta"]["calibration_bootstrap"] == 60
    assert document["meta"]["calibration_level"] == 0.9
    for patient in document["patients"]:
        for f in patient["features"]:
            assert f["calibration_low"] <= f["calibration_high"]
            assert f["calibration_sign_uncertain"] == (f["calibration_low"] <= 0
                                                       <= f["calibration_high"])
            if family == "cqr":  # no recalibration: the fixed-q̂ view is the instance part
                assert f["fixed_quantile"] == pytest.approx(f["instance"], abs=1e-9)
    csv_out = tmp_path / "explained.csv"
    run_ok(capsys, "explain", SAMPLE, "--target", "progression", "--id-column", "patient_id",
           *FAST, "--family", family, "--calibration-bootstrap", "60", "--out", csv_out)
    header = csv_out.read_text(encoding="utf-8").splitlines()[0].split(",")
    assert header[-3:] == ["calibration_low", "calibration_high", "calibration_sign_uncertain"]

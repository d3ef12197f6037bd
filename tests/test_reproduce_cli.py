"""`cpdecomp reproduce --quick` end to end, as CI and a user run it."""

from __future__ import annotations

import json

import pytest

from cpdecomp.core.cli import main


@pytest.mark.slow
def test_reproduce_quick_writes_tables_summary_report_and_verdicts(tmp_path, capsys):
    out = tmp_path / "results"
    assert main(["reproduce", "--quick", "--out", str(out)]) == 0
    assert "reproduction written to" in capsys.readouterr().err
    names = {p.name for p in out.iterdir()}
    assert {"summary.md", "report.html", "run.json", "claim3_identity_grid.csv",
            "claim1_null_subtracted.csv", "claim1_calibration_signs.csv", "claim2_units.csv",
            "claim2_comparisons.csv"} <= names
    verdicts = json.loads((out / "run.json").read_text())["verdicts"]
    assert verdicts["3. identity across families and methods"] == "reproduced"


def test_reproduce_refuses_a_file_as_output_folder(tmp_path, capsys):
    target = tmp_path / "taken"
    target.write_text("x")
    assert main(["reproduce", "--quick", "--out", str(target)]) == 2
    assert capsys.readouterr().err.count("\n") == 1

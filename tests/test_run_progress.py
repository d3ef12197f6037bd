"""A slow run says so before it starts, reports from inside its first chunk, and is refused
before any masking when its estimate is past --max-seconds.

The runs here force brute force (`--masking brute`), the slow path, on a few features of the
diabetes sample; the disk cache is off so the calibration game is computed, not read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cpdecomp import StudyOptions, load_table, prepare_study

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data" / "diabetes.csv"
ENV = {**os.environ, "CPDECOMP_CACHE_DIR": ""}


def explain(*argv: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cpdecomp", "explain", str(SAMPLE), "--target", "progression",
         "--id-column", "patient_id", *argv, "--out", str(tmp_path / "o.csv")],
        capture_output=True, text=True, timeout=600, check=False, env=ENV, cwd=tmp_path)


@pytest.mark.slow
def test_brute_force_reports_from_inside_the_calibration_game(tmp_path):
    done = explain("--features", "age,bmi,bp,s5 ltg,s6 glu", "--masking", "brute",
                   "--background", "24", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    *lines, summary = done.stderr.strip().splitlines()
    assert summary.startswith("explained 111 patients"), summary
    # (a coverage-by-width warning may come between the progress lines and the summary)
    progress = [line for line in lines if line.startswith("explaining: ")]
    # the 111 patients are one chunk: without ticks inside it the first line came at the end
    assert any("(the calibration set)" in line for line in progress), progress
    assert progress[-1].startswith("explaining: 100.0% (111/111 patients)"), progress


def test_a_run_past_max_seconds_is_refused_before_masking_naming_what_fits(tmp_path):
    done = explain("--masking", "brute", "--background", "64", "--max-seconds", "1",
                   tmp_path=tmp_path)
    assert done.returncode == 2, done.stderr
    # On a busy machine the fit takes long enough for a "preparing" progress line before the
    # refusal: the refusal is still the one line that is not progress, and the last.
    lines = [line for line in done.stderr.strip().splitlines()
             if not line.startswith("explaining: ")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == lines[0], done.stderr
    assert lines[0].startswith("cpdecomp: error: this run is expected to take about "), lines
    assert "above --max-seconds 1; --masking auto " in lines[0], lines
    assert not (tmp_path / "o.csv").exists()


def test_the_estimate_counts_the_runs_cells_and_names_the_slow_components():
    table = load_table(SAMPLE)
    options = StudyOptions(target="progression", id_column="patient_id",
                           features=("age", "bmi", "bp"), background=16)
    study = prepare_study(table, options)
    fast = study.estimate()
    n_patients, n_calibration = len(study.patients), study.system.n_calibration
    assert fast.coalitions == 8 and fast.players == 3 and fast.slow == ()
    assert fast.cells == 8 * (n_calibration + n_patients)
    assert fast.calibration_cells == 8 * n_calibration
    redrawn = study.estimate(background_bootstrap=3)
    assert redrawn.cells == 8 * (n_calibration + n_patients) * 4
    study.explain()  # the calibration game is now computed: it costs nothing more
    again = study.estimate()
    assert again.calibration_cells == 0 and again.cells == 8 * n_patients
    brute = prepare_study(table, StudyOptions(**{**options.__dict__, "masking": "brute"}))
    slow = brute.estimate()
    assert slow.slow == ("f", "sigma")
    # brute force: each cell is a background's model rows (16 here): far above the tables
    assert slow.seconds > fast.seconds
    assert np.isfinite(slow.seconds) and slow.seconds > 0

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


class FakeClock:
    """perf_counter for core.explainer: it moves only by what the wrapped work adds."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


CELL, SCORE, PATIENT, SUM = 1e-6, 3e-6, 1e-3, 1e-4
"""Seconds the fake clock moves per masked cell, per scored calibration cell, per patient on
the leaf groups' path and per Shapley sum over the combinations (per game): distinct, so a
wrong term shows."""


def priced(study, monkeypatch) -> FakeClock:
    """The study's estimate timed by a fake clock: masking, the groups' φ_I and the design's
    sums each move it by their own pace."""
    from cpdecomp.core import explainer as module
    clock = FakeClock()
    monkeypatch.setattr(module, "time", clock)
    evaluator, family = study.explainer.evaluator, study.system.family
    evaluate, shapley, scores = evaluator.evaluate_by_row, module.instance_shapley, family.scores

    def masked(coalitions, rows, names, *args, **kwargs):
        clock.now += CELL * len(coalitions) * len(rows)
        return evaluate(coalitions, rows, names, *args, **kwargs)

    def from_groups(family, evaluator, rows, design, fixed_quantile=False):
        out = shapley(family, evaluator, rows, design, fixed_quantile)
        clock.now += PATIENT * len(rows) if out is not None else 0.0
        return out

    def summed(apply):
        def timed(self, values):
            clock.now += SUM * np.asarray(values).reshape(-1, np.shape(values)[-1]).shape[0]
            return apply(self, values)
        return timed

    def scored(targets, components):
        out = scores(targets, components)
        clock.now += SCORE * out.size  # the calibration game's scores (and, in a run, sort)
        return out

    monkeypatch.setattr(evaluator, "evaluate_by_row", masked)
    monkeypatch.setattr(module, "instance_shapley", from_groups)
    monkeypatch.setattr(family, "scores", scored)
    for method, budget in (("exact", None), ("kernel", 256)):
        design = type(study.explainer.design(method, budget, None))
        monkeypatch.setattr(design, "apply", summed(design.apply))
    return clock


def test_the_estimate_prices_each_patient_on_the_path_the_run_takes(monkeypatch):
    """CQR with exact Shapley from GROUP_SHAPLEY_PLAYERS features: the patients' φ_I comes
    from the trees' leaf groups, so their time is that path's, not the combinations'; on the
    lattice each patient adds its Shapley sums (φ_I and φ_T, and the fixed-q̂ view)."""
    from cpdecomp.core.games.instance import GROUP_SHAPLEY_PLAYERS
    from cpdecomp.core.warmup import synthetic_table
    table = synthetic_table(GROUP_SHAPLEY_PLAYERS)
    wide = prepare_study(table, StudyOptions(target="outcome", family="cqr", background=16))
    priced(wide, monkeypatch)
    n, n_cal = len(wide.patients), wide.system.n_calibration
    combinations = 2 ** GROUP_SHAPLEY_PLAYERS
    for fixed in (False, True):  # the dashboard's fixed-q̂ view keeps the groups on CQR
        groups = wide.estimate(fixed_quantile=fixed)
        assert groups.instance_path == "groups"
        assert groups.cells == combinations * (n_cal + n)  # the meter still ticks every cell
        assert groups.seconds == pytest.approx((CELL + SCORE) * combinations * n_cal
                                               + PATIENT * n)
    redrawn = wide.estimate(background_bootstrap=2)
    # each redrawn background is a calibration game, and masks the patients on the lattice
    assert redrawn.seconds == pytest.approx(
        (CELL + SCORE) * combinations * 3 * n_cal + CELL * combinations * 2 * n
        + n * (PATIENT + 2 * SUM))
    kernel = wide.estimate("kernel", 256)
    assert kernel.instance_path == "lattice"
    assert kernel.seconds == pytest.approx((CELL + SCORE) * 256 * n_cal + CELL * 256 * n
                                           + 2 * SUM * n)

    monkeypatch.undo()
    narrow = prepare_study(synthetic_table(4), StudyOptions(target="outcome", family="cqr",
                                                            background=16))
    priced(narrow, monkeypatch)
    n, n_cal = len(narrow.patients), narrow.system.n_calibration
    for fixed in (False, True):
        lattice = narrow.estimate(fixed_quantile=fixed)
        assert lattice.instance_path == "lattice"
        assert lattice.seconds == pytest.approx((CELL + SCORE) * 16 * n_cal + CELL * 16 * n
                                                + (2 + fixed) * SUM * n)


def test_the_cli_says_where_the_patients_time_goes():
    from cpdecomp.core.cli import estimate_text
    from cpdecomp.core.explainer import RunEstimate
    groups = RunEstimate(1 << 26, 1 << 24, 90.0, 65536, 16, 100, (), "groups")
    assert estimate_text(groups, 3000) == (
        "expected to take about 1:30 (65,536 feature combinations for the calibration set, "
        "3,000 patients from the trees' leaf groups)")
    cached = RunEstimate(1 << 26, 0, 9.0, 65536, 16, 100, (), "groups")
    assert estimate_text(cached, 3000) == (
        "expected to take about 0:09 (3,000 patients from the trees' leaf groups)")
    lattice = RunEstimate(1 << 20, 1 << 19, 131.0, 8192, 13, 64, ("f",))
    assert estimate_text(lattice, 125) == (
        "expected to take about 2:11 (8,192 feature combinations for 125 patients and the "
        "calibration set; f by brute force: each costs 64 model rows (the background) per "
        "combination)")

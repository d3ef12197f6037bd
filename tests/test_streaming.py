"""Streamed output: a cohort written chunk by chunk equals the joined report written at once,
and a run that fails part way leaves the finished file it would have replaced."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import cpdecomp.core.explainer
from cpdecomp import load_table
from cpdecomp.core.output import write_report, write_reports
from cpdecomp.core.workflow import StudyOptions, join_reports, prepare_study

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "diabetes.csv"


@pytest.fixture(scope="module")
def study():
    options = StudyOptions(target="progression", id_column="patient_id", model="linear",
                           background=16)
    return prepare_study(load_table(SAMPLE, text_columns=["patient_id"]), options)


def seven_patients_a_chunk(study, monkeypatch) -> None:
    coalitions = len(study.explainer.design("permutation", 4).coalitions)
    monkeypatch.setattr(cpdecomp.core.explainer, "CELLS_PER_CHUNK", 7 * coalitions)


@pytest.mark.parametrize("suffix", ["csv", "json", "parquet"])
def test_streamed_chunks_equal_the_joined_report(study, tmp_path, monkeypatch, suffix):
    seven_patients_a_chunk(study, monkeypatch)
    chunks = list(study.iter_explain(method="permutation", budget=4, calibration_bootstrap=20,
                                     fixed_quantile=True))
    assert len(chunks) > 10
    joined = join_reports(chunks)
    whole = study.explain(method="permutation", budget=4, calibration_bootstrap=20,
                          fixed_quantile=True)
    np.testing.assert_array_equal(joined.explanation.decomposition.total,
                                  whole.explanation.decomposition.total)
    streamed, at_once = tmp_path / f"streamed.{suffix}", tmp_path / f"at_once.{suffix}"
    meta = write_reports(iter(chunks), streamed)
    write_report(joined, at_once)
    assert meta["additivity_error"] == joined.meta["additivity_error"]
    if suffix == "parquet":  # the same table, in one row group per chunk
        pd.testing.assert_frame_equal(pd.read_parquet(streamed), pd.read_parquet(at_once))
    else:
        assert streamed.read_bytes() == at_once.read_bytes()


def test_a_run_that_fails_part_way_leaves_the_finished_file(study, tmp_path, monkeypatch):
    seven_patients_a_chunk(study, monkeypatch)
    out = tmp_path / "explained.csv"
    out.write_text("finished earlier\n", encoding="utf-8")

    def failing():
        chunks = study.iter_explain(method="permutation", budget=4)
        yield next(chunks)
        yield next(chunks)
        raise KeyboardInterrupt  # as a Ctrl-C part way through the cohort would

    with pytest.raises(KeyboardInterrupt):
        write_reports(failing(), out)
    assert out.read_text(encoding="utf-8") == "finished earlier\n"
    assert [p.name for p in tmp_path.iterdir()] == ["explained.csv"]  # no temporary left


def test_the_fitted_systems_own_warnings_reach_the_report():
    """A built-in system's warnings (sigma at its floor, crossing quantile models) are the
    study's too, so the command line's meta and the dashboard show them."""
    options = StudyOptions(target="progression", id_column="patient_id", family="cqr-r",
                           model="linear")
    crossing = prepare_study(load_table(SAMPLE, text_columns=["patient_id"]), options)
    assert crossing.system.fitted.warnings
    for warning in crossing.system.fitted.warnings:
        assert warning in crossing.warnings

"""The patients' preparation after a Run waits while a session's script runs.

A real Streamlit script run (AppTest runs it on a script thread carrying Streamlit's script-run
context, as the server does) holds still until the test lets it finish; the run's worker
preparation, started meanwhile, must build nothing until it has. A script run that only follows
a run's progress (Setup's `follow`) does not hold the preparation back.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from timing import seconds

from cpdecomp import StudyOptions
from cpdecomp.app import cases, runs
from cpdecomp.app.shown import shown_for
from cpdecomp.app.sources import load_sample

OPTIONS = StudyOptions(target="progression", id_column="patient_id", model="linear",
                       family="normalized")
CONFIG = runs.RunConfig("digest-of-the-sample", "diabetes", OPTIONS, "exact", None, 0.1)
PATIENTS = 3


def held_script(flag: str, following: bool) -> None:
    """A script run that lasts until the file `flag` exists (optionally as a run's follower)."""
    import contextlib
    import os
    import time

    from cpdecomp.app import runs

    with runs.following() if following else contextlib.nullcontext():
        while not os.path.exists(flag):
            time.sleep(0.01)


@pytest.fixture(scope="module")
def report():
    dataset = load_sample("diabetes")
    runs.compute(CONFIG, dataset)
    handle = runs.fitted_study(CONFIG.digest, CONFIG.options, dataset)
    return handle.report(CONFIG.method, CONFIG.alpha, "width", CONFIG.budget)


def built(record) -> int:
    """Patients' figures and tables of `record` kept so far."""
    return sum(1 for key in list(cases._kept) if key[1] == record.key and key[2] >= 0)


def prepare_beside_a_script(record, tmp_path: Path, following: bool) -> tuple[int, int]:
    """(builds while the script ran, builds once it had ended)."""
    flag = tmp_path / f"release-{following}"
    script = AppTest.from_function(held_script, args=(str(flag), following), default_timeout=60)
    session = threading.Thread(target=script.run)
    session.start()
    try:
        for _ in range(1000):  # until the script run is under way
            if runs._following if following else runs.scripts_running():
                break
            threading.Event().wait(0.01)
        assert runs.scripts_running() is not following
        worker = threading.Thread(target=cases.prepare, args=(record,), kwargs=dict(
            patients=PATIENTS, pace=0.0, wait=runs.QuietWaiter(grace=0.0, longest=30.0)))
        worker.start()
        # Without the wait, the three patients are built in a few tens of milliseconds.
        worker.join(timeout=1.5)
        during = built(record)
    finally:
        flag.touch()
        session.join(timeout=seconds(60))
    worker.join(timeout=seconds(60))
    assert not worker.is_alive()
    return during, built(record)


def test_the_preparation_waits_for_a_script_run(report, tmp_path: Path) -> None:
    record = shown_for(report, (CONFIG, "width", "waits"), "progression")
    during, after = prepare_beside_a_script(record, tmp_path, following=False)
    assert during == 0
    assert after == 6 * PATIENTS  # bars, waterfall and table of each, and their HTML


def test_a_script_following_a_run_does_not_hold_it_back(report, tmp_path: Path) -> None:
    record = shown_for(report, (CONFIG, "width", "follows"), "progression")
    during, after = prepare_beside_a_script(record, tmp_path, following=True)
    assert during == after == 6 * PATIENTS


def test_no_script_is_running_outside_a_script_run() -> None:
    assert not runs.scripts_running()
    waiter = runs.QuietWaiter(grace=0.0, longest=30.0)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (waiter(), done.set()))
    thread.start()
    thread.join(timeout=seconds(30))
    assert done.is_set()

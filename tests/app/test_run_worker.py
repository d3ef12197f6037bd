"""Runs off the session's lock: readers never wait behind a computation, a second session asking
for the same report waits for that run's result, a stop ends the work at the next chunk and
leaves the caches as good as before, and a run over the per-run budget is refused before any
fit.

The computations are held at a checkpoint by an event (no sleeps, no timing): what a test
checks is what can happen *while* another computation is provably in progress.
"""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest
from timing import seconds

from cpdecomp import StudyOptions, prepare_study
from cpdecomp.app import runs
from cpdecomp.app.sources import load_sample
from cpdecomp.core.cancel import Cancelled, cancellable

KEY = ("exact", 0.1, "width", None)
# Brute force: the slow path, with checkpoints between model calls.
OPTIONS = StudyOptions(target="progression", id_column="patient_id", model="linear",
                       family="gamma", background=8, masking="brute")


@pytest.fixture(scope="module")
def handle() -> runs.StudyHandle:
    return runs.StudyHandle(prepare_study(load_sample("diabetes").patients, OPTIONS))


class Gate:
    """A cancel check that holds the computation at its first checkpoint until released, and
    says stop once `stop` is set."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()
        self.stop = threading.Event()

    def __call__(self) -> bool:
        self.reached.set()
        self.release.wait(timeout=seconds(120))
        return self.stop.is_set()


def in_thread(target, gate: Gate | None = None) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def work() -> None:
        try:
            if gate is None:
                out["report"] = target()
            else:
                with cancellable(gate):
                    out["report"] = target()
        except Cancelled:
            out["cancelled"] = True

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread, out


def test_readers_and_other_configurations_do_not_wait_for_a_running_computation(handle):
    finished = handle.report(*KEY)  # a report another session computed earlier
    gate = Gate()
    slow, slow_out = in_thread(lambda: handle.report("permutation", 0.1, "width", 8), gate)
    assert gate.reached.wait(seconds(120)), "the computation never reached a checkpoint"
    try:
        # Held mid-computation: a reader of the finished report, its other units, and a
        # different configuration all complete while it is held.
        assert handle.report(*KEY) is finished
        log_units = handle.report("exact", 0.1, "log", None)
        np.testing.assert_allclose(np.exp(log_units.explanation.decomposition.full_value),
                                   finished.explanation.width, rtol=1e-9)
        other = handle.report("exact", 0.2, "width", None)
        assert len(other.patient_ids) == len(finished.patient_ids)
        assert slow.is_alive() and "report" not in slow_out
    finally:
        gate.release.set()
        slow.join(timeout=seconds(300))
    assert "report" in slow_out


def test_the_same_report_asked_twice_is_computed_once_and_a_stop_leaves_good_caches(handle):
    key = ("permutation", 0.1, "width", 12)
    first_gate = Gate()
    first, first_out = in_thread(lambda: handle.report(*key), first_gate)
    assert first_gate.reached.wait(seconds(120))
    stages: list[str] = []
    second, second_out = in_thread(lambda: handle.report(*key, stage=stages.append))
    try:
        # The second asker is told it waits for another session, and computes nothing.
        for _ in range(600):
            if stages:
                break
            second.join(timeout=0.1)
        assert stages[:1] == [runs.WAITING]
        # The first run is stopped at its checkpoint: the waiter then computes it itself.
        first_gate.stop.set()
    finally:
        first_gate.release.set()
        first.join(timeout=seconds(300))
        second.join(timeout=seconds(300))
    assert first_out.get("cancelled") is True and "report" not in first_out
    assert runs.STAGES[2] in stages, stages
    again = handle.report(*key)
    assert again is second_out["report"]
    # Against a study that was never interrupted: the stop left nothing half-done behind.
    fresh = prepare_study(load_sample("diabetes").patients, OPTIONS)
    clean = fresh.explain(method="permutation", alpha=0.1, budget=12)
    np.testing.assert_allclose(again.explanation.decomposition.calibration,
                               clean.explanation.decomposition.calibration, rtol=1e-9,
                               atol=1e-12)
    np.testing.assert_allclose(again.explanation.width, clean.explanation.width, rtol=1e-12)


def test_a_run_over_the_budget_is_refused_before_anything_is_fitted():
    from cpdecomp.core.errors import CpdecompError

    exact = runs.RunSize(n_features=20, n_train=10, n_explained=10, background=1,
                          coalitions=None, brute_force_seconds=None,
                          design_error="exact Shapley supports at most 16 features")
    with pytest.raises(CpdecompError, match="at most 16"):
        runs.check_run_budget(exact)
    big = runs.RunSize(n_features=10, n_train=100, n_explained=10_000, background=64,
                        coalitions=runs.MAX_RUN_CELLS // 10_000 + 1, brute_force_seconds=0.0)
    with pytest.raises(CpdecompError, match="command line"):
        runs.check_run_budget(big)
    slow = runs.RunSize(n_features=10, n_train=100, n_explained=100, background=64,
                         coalitions=1024, brute_force_seconds=runs.MAX_RUN_SECONDS + 1.0)
    with pytest.raises(CpdecompError, match="expected to take"):
        runs.check_run_budget(slow)
    fine = runs.RunSize(n_features=10, n_train=100, n_explained=100, background=64,
                         coalitions=1024, brute_force_seconds=30.0)
    runs.check_run_budget(fine)  # no exception


def test_the_largest_permutation_budget_on_twenty_features_is_refused_before_fitting():
    # The Setup page allows budgets up to 100,000; on 20 features that samples about a million
    # feature combinations, far past the per-run limit: refused with the reason, from the
    # setup alone (run_size fits nothing), not after minutes of work.
    from cpdecomp.app.sources import Dataset
    from cpdecomp.core.errors import CpdecompError

    rng = np.random.default_rng(0)
    table = pd.DataFrame(rng.normal(size=(400, 21)), columns=[f"x{i}" for i in range(21)])
    dataset = Dataset(name="wide.csv", patients=table, digest="wide")
    options = StudyOptions(target="x20")
    config = runs.RunConfig("wide", "wide.csv", options, "permutation", 100_000, 0.1)
    size = runs.run_size(dataset, config)
    assert size.n_features == 20
    assert size.cells is not None and size.cells > runs.MAX_RUN_CELLS
    with pytest.raises(CpdecompError, match="limit"):
        runs.check_run_budget(size)
    # The default budget on the same table stays well inside it.
    default = runs.RunConfig("wide", "wide.csv", options, "permutation", 64, 0.1)
    runs.check_run_budget(runs.run_size(dataset, default))


def test_exact_shapley_past_its_limit_is_refused_before_fitting():
    from cpdecomp.app.sources import Dataset
    from cpdecomp.core.attribution import MAX_EXACT_PLAYERS
    from cpdecomp.core.errors import CpdecompError

    rng = np.random.default_rng(1)
    n = MAX_EXACT_PLAYERS + 2
    table = pd.DataFrame(rng.normal(size=(200, n)), columns=[f"x{i}" for i in range(n)])
    dataset = Dataset(name="wide.csv", patients=table, digest="wide-exact")
    config = runs.RunConfig("wide-exact", "wide.csv", StudyOptions(target=f"x{n - 1}"),
                             "exact", None, 0.1)
    size = runs.run_size(dataset, config)
    assert size.coalitions is None and size.design_error
    with pytest.raises(CpdecompError, match=str(MAX_EXACT_PLAYERS)):
        runs.check_run_budget(size)


def test_a_session_that_reconnects_keeps_its_run_and_one_that_stays_gone_stops_it(monkeypatch):
    """A busy server can miss a browser's websocket ping: the session is inactive while the
    browser reconnects. That must not stop its run (CI saw a slow run stopped as "session
    ended" right after it started); a session still gone after the grace has ended."""
    clock = [1000.0]
    alive = [True]
    monkeypatch.setattr(runs.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(runs, "session_alive", lambda session_id: alive[0])
    config = runs.RunConfig("sample", "sample: diabetes", StudyOptions(target="progression"),
                            "exact", None, 0.1)
    job = runs.RunJob(config, load_sample("diabetes"), "session:x", "x")

    def tick(seconds: float) -> bool:
        clock[0] += seconds
        return job._should_stop()

    assert not tick(1.0)
    alive[0] = False  # the browser reconnects
    assert not tick(1.0) and not tick(1.0) and not tick(1.0)
    alive[0] = True
    assert not tick(1.0) and not tick(10.0)  # back: the grace starts again next time
    alive[0] = False  # the tab closed
    assert not tick(1.0)
    assert not tick(runs.SESSION_LOST_GRACE - 0.5)
    assert tick(1.0)
    assert job.stop_asked is not None


def test_the_runs_share_moves_from_inside_the_calibration_game(handle):
    """The progress bar of a Run: the masking's share reaches the page as it goes, before the
    first chunk of patients is done (brute force ticks between model calls), and ends at 1."""
    shares: list[float] = []
    patients: list[int] = []
    handle.report("permutation", 0.1, "width", 10, progress=lambda done, total: patients.append(
        done) or shares.append(-1.0), work=shares.append)
    ticks = [share for share in shares if share >= 0]
    assert ticks == sorted(ticks) and ticks[-1] == 1.0
    first_chunk = shares.index(-1.0)  # where the first chunk of patients was reported
    assert any(0 < share < 0.5 for share in shares[:first_chunk]), shares[:first_chunk]
    assert patients[-1] == len(handle.study.patients)

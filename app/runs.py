"""Runs: what a run depends on, the fitted studies and their reports shared by the sessions,
and the worker thread that computes a Run.

Fitting is the expensive step, so a fitted study is an `st.cache_resource` shared by every
session, keyed on the data's digest and the `StudyOptions`. Reports (all patients explained
under one method, alpha, budget and units) are kept inside the study's handle: the calibration
game is cached in the study's explainer, so another alpha or the other units cost one pass over
the patients, and going back to a configuration already seen costs nothing. Nothing here reads
or writes a session's widgets (app/state.py does).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.script_run_context import SCRIPT_RUN_CONTEXT_ATTR_NAME

from cpdecomp import FAMILIES, Report, Study, StudyOptions, prepare_study, target_values
from cpdecomp.app import auth, cases, planning, sources
from cpdecomp.app.shown import Shown, shown_for
from cpdecomp.app.sources import Dataset, source_table
from cpdecomp.core.bounded import BoundedCache
from cpdecomp.core.cancel import Cancelled, cancellable, checkpoint
from cpdecomp.core.decomposition import Units
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.explainer import Progress
from cpdecomp.core.progress import metered

logger = logging.getLogger("cpdecomp.app.runs")

ROWS_PER_MODEL_CALL = 40_000
"""Rows per brute-force model call in the dashboard (a Stop waits for the call under way)."""
MAX_REPORTS = 24
"""Reports kept per fitted study; each is a few arrays of patients x features."""
CALIBRATION_BOOTSTRAP = 200
"""Resampled calibration sets behind each calibration-driven part's interval: a re-weighting of
the kept masked scores, no model call (a few tenths of a second on the bundled sample)."""
BACKGROUND_BOOTSTRAP = 20
"""Backgrounds drawn afresh when the Setup page's background check is on: each redraw computes
the calibration game once more (planning.background_redraw_seconds) and keeps its masking
tables, about 13 MiB, while the study is kept."""
MAX_BACKGROUND_BOOTSTRAP = 50
"""Most redraws one dashboard Run may ask for (memory: about 13 MiB each, per kept study)."""


@dataclass(frozen=True)
class RunConfig:
    """Everything a run's results depend on."""

    digest: str
    dataset_name: str
    options: StudyOptions
    method: str
    budget: int | None
    alpha: float
    background_bootstrap: int = 0
    """Backgrounds drawn afresh behind the background intervals of φ_C and φ_I (0: none)."""

    @property
    def dataset_key(self) -> str:
        return sources.dataset_key(self.digest, self.options.target)

    @property
    def log_family(self) -> bool:
        return FAMILIES[self.options.family].scale == "log"



class StudyHandle:
    """A fitted study and the reports computed from it, shared by every session on the same data
    and options.

    Nothing here is locked while a report is computed: a session reading a finished report, or
    asking for another configuration, never waits behind another session's computation. The
    lock guards the bookkeeping only (look up, claim a report to compute, publish it); a second
    session asking for a report being computed waits for that computation's result instead of
    computing it again. The explainer's caches are dicts that take concurrent use (two threads
    filling the same entry compute it twice, and keep either).
    """

    def __init__(self, study: Study) -> None:
        self.study = study
        self._reports: BoundedCache[tuple, Report] = BoundedCache(MAX_REPORTS)
        self._claims: dict[tuple, threading.Event] = {}
        """Reports being computed, each with the event its computation sets when it ends."""
        self._lock = threading.Lock()

    def _lookup(self, key: tuple) -> Report | None:
        """A finished report, or its rescaling from the other units (no game evaluated).
        Called with the lock held."""
        report = self._reports.get(key)
        if report is None:
            method, alpha, units, budget, redraws = key
            other = self._reports.get((method, alpha, "log" if units == "width" else "width",
                                       budget, redraws))
            if other is not None:
                report = self._publish(key, other.in_units(units))
        return report

    def _publish(self, key: tuple, report: Report) -> Report:
        self._reports[key] = report  # the oldest report goes past MAX_REPORTS
        return report

    def report(self, method: str, alpha: float, units: Units, budget: int | None,
               progress: Progress | None = None,
               stage: Callable[[str], None] = lambda name: None,
               background_bootstrap: int = 0,
               work: Callable[[float], None] | None = None) -> Report:
        """Every patient explained under one configuration, computed once.

        stage(name) says what is being done: a stage of STAGES, or WAITING while another
        session computes the same report. Waiting, like computing, stops at a cancelled run's
        next checkpoint (core.cancel). `background_bootstrap`: backgrounds drawn afresh for
        the background intervals (0: none); a report with them is another report. work(share)
        gets the share of the masking done, as it goes (from inside the calibration game and
        each chunk of patients: core.progress).
        """
        key = (method, alpha, units, budget, background_bootstrap)
        while True:
            with self._lock:
                found = self._lookup(key)
                if found is not None:
                    return found
                claim = self._claims.get(key)
                mine = claim is None
                if claim is None:
                    claim = self._claims[key] = threading.Event()
            if mine:
                break
            stage(WAITING)
            while not claim.wait(0.2):
                checkpoint()
            # Finished (then found above) or stopped (then claimed by this session): look again.
        done: Report | None = None
        try:
            # One core call: it computes the calibration game before its first chunk of
            # patients, so the stage changes when that chunk is done.
            stage(STAGES[1])
            explaining = False

            def chunk_done(finished: int, total: int) -> None:
                nonlocal explaining
                if not explaining:
                    explaining = True
                    stage(STAGES[2])
                if progress is not None:
                    progress(finished, total)

            cells = self.study.estimate(method, budget, None, background_bootstrap).cells
            counted = 0

            def meter(done_cells: int) -> None:
                nonlocal counted
                counted += done_cells
                if work is not None:
                    work(min(counted / max(cells, 1), 1.0))

            with metered(meter):
                done = self.study.explain(
                    method=method, alpha=alpha, units=units, budget=budget, progress=chunk_done,
                    calibration_bootstrap=CALIBRATION_BOOTSTRAP, fixed_quantile=True,
                    background_bootstrap=background_bootstrap)
        finally:
            with self._lock:
                del self._claims[key]
                if done is not None:
                    self._publish(key, done)
            claim.set()
        return done

    def has_report(self, method: str, alpha: float, units: Units, budget: int | None,
                   background_bootstrap: int = 0) -> bool:
        return (method, alpha, units, budget, background_bootstrap) in self._reports


@st.cache_resource(max_entries=4, show_spinner=False)
def fitted_study(digest: str, options: StudyOptions, _dataset: Dataset) -> StudyHandle:
    """Split, fit and conformalize once per (data, options); `_dataset` is not hashed: the
    digest stands for its content."""
    study = prepare_study(_dataset.patients, options, train=_dataset.train,
                          calibration=_dataset.calibration, models=_dataset.models)
    # A stop is honoured between brute-force model calls; core's default call (250,000 rows)
    # took up to 3 s on a loaded 2-core server, past the 2 s a Stop may take.
    study.explainer.evaluator.rows_per_call = ROWS_PER_MODEL_CALL
    return StudyHandle(study)


STAGES = ("Fitting the model components", "Computing the calibration game",
          "Explaining every patient")
WAITING = "Being computed by another session; waiting for its results"
STAGE_NAMES = ("fit", "calibration", "explain")
"""STAGES as the server's log names them."""


def shown_record(config: RunConfig, report: Report, units: str) -> Shown:
    """The run's flat record in `units`, one per report for every session (`Shown.key`: the
    configuration and the units, which fix every number in it)."""
    return shown_for(report, (config, units), config.options.target)


def compute(config: RunConfig, dataset: Dataset,
            on_progress: Callable[[float, str], None] = lambda share, label: None,
            finished: Callable[[Shown], None] = lambda record: None) -> dict[str, float]:
    """Fit (or reuse), then explain every patient; returns seconds per stage.

    on_progress(share done in [0, 1], what is being done) is called between stages and as the
    masking goes (core.progress ticks it between model calls and chunks). Inside
    core.cancel.cancellable, a stop request ends the work at the next chunk with Cancelled (a
    fit, once started, runs to its end). The run's record in width units, with the Cohort
    page's numbers and charts, is built before the run counts as done (a few milliseconds), so
    the page's first visit only draws; `finished` gets it.
    """
    timings: dict[str, float] = {}
    start = time.perf_counter()
    on_progress(0.0, STAGES[0])
    handle = fitted_study(config.digest, config.options, dataset)
    checkpoint()
    timings[STAGES[0]] = time.perf_counter() - start
    if handle.has_report(config.method, config.alpha, "width", config.budget,
                         config.background_bootstrap):
        finished(prepared(config, handle))
        on_progress(1.0, "Done")
        return timings
    n = len(handle.study.patients)
    current, since = STAGES[1], time.perf_counter()

    label = STAGES[1]

    def stage(name: str) -> None:
        nonlocal current, since, label
        now = time.perf_counter()
        if current in STAGES:  # time spent waiting for another session is no stage's
            timings[current] = timings.get(current, 0.0) + now - since
        current, since = name, now
        label = f"{name} (0 of {n})" if name == STAGES[2] else name
        on_progress(1 / 3, label)

    def patients_done(done: int, total: int) -> None:
        nonlocal label
        label = f"{STAGES[2]} ({done} of {total})"

    def work(share: float) -> None:
        # the masking is nearly all of a run's time after the fit: it fills the bar's last
        # two thirds, the calibration game's part included
        on_progress(1 / 3 + 2 / 3 * share, label)

    handle.report(config.method, config.alpha, "width", config.budget, patients_done, stage,
                  background_bootstrap=config.background_bootstrap, work=work)
    stage("Done")
    finished(prepared(config, handle))
    on_progress(1.0, "Done")
    return timings


def prepared(config: RunConfig, handle: StudyHandle) -> Shown:
    """The run's record in width units (the pages' default) with the Cohort page's numbers and
    charts built."""
    report = handle.report(config.method, config.alpha, "width", config.budget,
                           background_bootstrap=config.background_bootstrap)
    record = shown_record(config, report, "width")
    cases.cohort_figures(record)
    return record


MAX_RUN_CELLS = 100_000_000
"""Most (explained rows × feature combinations) one dashboard Run may cost. Measured on 20
features with tree tables (permutation sampling, calibration bootstrap): about 3.5 µs a cell
on this project's 2-core machine, so about 6 minutes at the limit, where the Setup page's
largest permutation budget (100,000 on 20 features, 2.6e8 cells) ran 764 s. The command line
has no such limit."""
MAX_RUN_SECONDS = 15 * 60
"""Most expected seconds of brute-force masking one Run may cost."""


@dataclass(frozen=True)
class RunSize:
    """What a run will cost, from the setup alone (nothing fitted)."""

    n_features: int
    n_train: int
    n_explained: int
    background: int
    coalitions: int | None
    """Feature combinations the method evaluates (None when the design cannot be built)."""
    brute_force_seconds: float | None
    """Expected seconds of brute-force masking (0 on a fast path; None when unknown)."""
    design_error: str | None = None
    """Why the method cannot be used on these features (exact Shapley past 16, ...)."""
    n_calibration: int = 0
    background_redraws: int = 0
    """Backgrounds drawn afresh for the background intervals: each is one more calibration
    game, over the calibration rows."""
    redraw_seconds: float | None = 0.0
    """Expected seconds of one redraw (None when the design cannot be built)."""

    @property
    def cells(self) -> int | None:
        """Patient × feature-combination cells: the explained rows, and the calibration rows
        once more per redrawn background."""
        if self.coalitions is None:
            return None
        return self.coalitions * (self.n_explained + self.n_calibration * self.background_redraws)

    @property
    def redraws_seconds(self) -> float | None:
        """Expected seconds of all the redraws together."""
        if self.redraw_seconds is None:
            return None
        return self.redraw_seconds * self.background_redraws


def run_size(dataset: Dataset, config: RunConfig) -> RunSize:
    options = config.options
    target, id_column = options.target, options.id_column
    n_features = len(options.features) if options.features else len(
        [c for c in dataset.columns if c not in (target, id_column)])
    target_array = target_values(source_table(dataset), target)
    labelled = int((~np.isnan(target_array)).sum())
    if dataset.calibration is not None:  # separate files: no split
        n_train, n_explained = labelled, len(dataset.calibration) + len(dataset.patients)
        n_calibration = len(dataset.calibration)
    else:
        n_train, n_calibration, n_held_out = planning.split_sizes(labelled, options)
        n_explained = n_calibration + n_held_out + (len(target_array) - labelled)
    plan = planning.run_plan(dataset, options)
    background = planning.background_size(options, n_train, plan.fast)
    coalitions: int | None = None
    design_error: str | None = None
    try:
        coalitions = planning.coalition_count(config.method, n_features, config.budget,
                                              options.seed)
    except CpdecompError as error:
        design_error = str(error)
    seconds = (None if coalitions is None else
               planning.brute_force_seconds(plan, coalitions, n_explained, background))
    redraw = (None if coalitions is None else
              planning.background_redraw_seconds(plan, coalitions, n_calibration, background))
    return RunSize(n_features, n_train, n_explained, background, coalitions, seconds,
                   design_error, n_calibration, config.background_bootstrap, redraw)


def check_run_budget(size: RunSize) -> None:
    """Refuse, before anything is fitted, a run above the dashboard's per-run budget."""
    if size.design_error is not None:  # said now, not after the models are fitted
        raise CpdecompError(size.design_error)
    cells = size.cells
    if cells is not None and cells > MAX_RUN_CELLS:
        raise CpdecompError(
            f"This run would evaluate {cells:,} patient × feature-combination cells, above the "
            f"dashboard's limit of {MAX_RUN_CELLS:,} per run; choose a smaller budget or fewer "
            "features, or run it with the command line (cpdecomp explain), which has no limit")
    seconds = size.brute_force_seconds
    if seconds is not None and size.redraws_seconds is not None:
        seconds += size.redraws_seconds
    if seconds is not None and seconds > MAX_RUN_SECONDS:
        raise CpdecompError(
            f"This run is expected to take {planning.rounded_seconds(seconds)}, above the "
            f"dashboard's limit of {MAX_RUN_SECONDS // 60} min per run; choose a smaller "
            "background, a sampling method with a smaller budget or another family, "
            "fewer background redraws, or run it with the command line (cpdecomp explain)")
    if size.background_redraws > MAX_BACKGROUND_BOOTSTRAP:
        raise CpdecompError(
            f"{size.background_redraws} background redraws is more than the "
            f"{MAX_BACKGROUND_BOOTSTRAP} the dashboard allows per run (each keeps about 13 MiB "
            "of masking tables); choose fewer, or use the command line "
            "(cpdecomp explain --background-bootstrap)")


class RunJob:
    """One Run, computed on a worker thread of its own: its progress, outcome and stop switch.

    The session's script only starts it and polls it, so its reruns (a click elsewhere, a page
    switch) never wait for the computation, and Stop, a closed tab or a lost connection end the
    work at its next chunk (core.cancel).
    """

    def __init__(self, config: RunConfig, dataset: Dataset, owner: str,
                 session_id: str | None) -> None:
        self.config = config
        self.dataset = dataset
        self.owner = owner
        self.session_id = session_id
        self.share = 0.0
        self.label = "Starting"
        self.timings: dict[str, float] = {}
        self.error: str | None = None
        self.cancelled = False
        self.stop_asked: float | None = None
        """time.monotonic() of the stop request (Stop pressed or the session gone)."""
        self.ended: float | None = None
        self.finished = threading.Event()
        self._stop = threading.Event()
        self._session_checked = 0.0
        self._session_lost_since: float | None = None
        self._seen = time.monotonic()
        self._unwatched_since: float | None = None
        self._thread = threading.Thread(target=self._work, name="cpdecomp-run", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def cancel(self, why: str) -> None:
        if not self._stop.is_set():
            self.stop_asked = time.monotonic()
            logger.info("run.stop asked=%s", why)
            self._stop.set()

    def seen(self) -> None:
        """A script run of the session looked at the job (it still wants the run)."""
        self._seen = time.monotonic()
        self._unwatched_since = None

    def unwatched(self) -> None:
        """The script following the job was stopped: by a click or a page switch (Streamlit
        stops a running script for every rerun, and a new run looks at the job at once), or by
        Streamlit's own Stop (no new run follows)."""
        self._unwatched_since = time.monotonic()

    def _should_stop(self) -> bool:
        """Asked at every checkpoint: stopped; Streamlit's Stop (the script following the run
        stopped and no run came after it for UNWATCHED_GRACE seconds); or the session that
        started the run has been gone for SESSION_LOST_GRACE seconds (looked up at most twice a
        second)."""
        if self._stop.is_set():
            return True
        now = time.monotonic()
        if self.session_id is not None and now - self._session_checked > 0.5:
            self._session_checked = now
            # A session is inactive while its browser reconnects (a busy server can miss a
            # websocket ping); only one still gone after SESSION_LOST_GRACE has ended.
            if session_alive(self.session_id):
                self._session_lost_since = None
            elif self._session_lost_since is None:
                self._session_lost_since = now
        lost = self._session_lost_since
        if lost is not None:  # a closed tab also stops its script: said as the session ending
            if now - lost > SESSION_LOST_GRACE:
                self.cancel("session ended")
            return self._stop.is_set()
        since = self._unwatched_since
        if since is not None and self._seen < since and now - since > UNWATCHED_GRACE:
            self.cancel("Streamlit's Stop")
        return self._stop.is_set()

    def _progress(self, share: float, label: str) -> None:
        self.share, self.label = share, label

    def _work(self) -> None:
        _yield_to_interactive_work()
        record: Shown | None = None

        def keep(done: Shown) -> None:
            nonlocal record
            record = done

        try:
            with cancellable(self._should_stop):
                self.timings = compute(self.config, self.dataset, self._progress, keep)
            # Durations only: what an operator compares after a restart (the caches on /data
            # make its first Run as fast as a warm one; docs/benchmarks/container.md).
            logger.info("run.done %s", " ".join(
                f"{name}_s={self.timings.get(stage, 0.0):.2f}"
                for name, stage in zip(STAGE_NAMES, STAGES, strict=True)))
        except Cancelled:
            self.cancelled = True
        except CpdecompError as error:
            self.error = str(error)
        except Exception as error:  # a bug, not bad input: keep the app usable
            # Only the type is logged: messages from libraries can quote uploaded cell values.
            logger.error("computing failed with %s", type(error).__name__)
            self.error = (f"Unexpected error ({type(error).__name__}); the previous results "
                          "are kept. Please report it.")
        finally:
            self.ended = time.monotonic()
            if self.stop_asked is not None:
                logger.info("run.stopped after_stop_s=%.2f cancelled=%s",
                            self.ended - self.stop_asked, self.cancelled)
            with _RUNS_LOCK:
                if _RUNS.get(self.owner) is self:
                    del _RUNS[self.owner]
            self.finished.set()
        if record is not None and not self.cancelled and self.error is None:
            # After the run is done (its results are on screen): the first patients' figures
            # and tables, on this low-priority thread, while the user reads the results line.
            # A patient switch then only sends them (a few milliseconds less server work per
            # switch, which counts when many sessions switch at once).
            try:
                cases.prepare(record, wait=QuietWaiter())
            except Exception as error:  # the pages build what is missing themselves
                logger.error("preparing the patients' figures failed with %s",
                             type(error).__name__)


UNWATCHED_GRACE = 3.0
"""Seconds a run's page may go without a script run before the run counts as stopped."""
SESSION_LOST_GRACE = 3.0
"""Seconds a run's session may stay disconnected (its browser reconnecting) before the run
counts as abandoned: a closed tab stops its run after this, a reconnection does not."""
RUN_NICENESS = 10
"""How much lower than the sessions' own threads a Run's worker is scheduled (Linux nice)."""


def _yield_to_interactive_work() -> None:
    """Lower this thread's scheduling priority: a long Run should take the CPU that clicks
    leave, not slow another user's patient switch. Linux schedules threads one by one, so this
    thread alone is reniced; elsewhere it is left as it is."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), RUN_NICENESS)
    except (AttributeError, OSError):  # not Linux, or not permitted
        pass


PREPARE_GRACE = 0.5
"""Seconds with no session's script running before the patients' preparation goes on: after a
script run the server still sends its page for a moment, and a user's next click (the Cohort
page after Run) usually comes within a second."""
PREPARE_LONGEST_WAIT = 10.0
"""Most seconds the preparation waits for a quiet moment before one more build anyway: a steady
stream of clicks from many sessions would otherwise hold it back for good."""

_following_lock = threading.Lock()
_following: set[int] = set()
"""Threads of script runs that only poll a run's progress (`following`)."""


@contextmanager
def following() -> Iterator[None]:
    """The calling script run only polls a run's progress (Setup's `follow`, for as long as the
    run lasts): it does not count as a script running for `scripts_running`."""
    me = threading.get_ident()
    with _following_lock:
        _following.add(me)
    try:
        yield
    finally:
        with _following_lock:
            _following.discard(me)


def scripts_running() -> bool:
    """Whether a session's script run is under way on this server, besides the caller: a live
    thread carrying Streamlit's script-run context (Streamlit attaches it to the thread of each
    script run), other than those only following a run."""
    me = threading.current_thread()
    with _following_lock:
        polling = set(_following)
    return any(thread is not me and thread.ident not in polling and thread.is_alive()
               and getattr(thread, SCRIPT_RUN_CONTEXT_ATTR_NAME, None) is not None
               for thread in threading.enumerate())


class QuietWaiter:
    """Called before each step of low-priority work: returns once no session's script has run
    for `grace` seconds (at once while that holds), or after `longest` seconds of waiting.

    The run's worker prepares the patients' figures in the server process the pages run in;
    Python runs one thread at a time, so a step under way delays a script run by up to the
    interpreter's switch interval each time they trade, and the first visits after a Run are
    exactly when both want it. Measured on the bundled sample: the preparation of 111 patients
    took 3.1-4.7 s of wall time (0.6 s of CPU) after each Run and overlapped the first Cohort
    visit and often the next one."""

    def __init__(self, grace: float = PREPARE_GRACE, longest: float = PREPARE_LONGEST_WAIT,
                 poll: float = 0.02) -> None:
        self.grace, self.longest, self.poll = grace, longest, poll
        self._busy_at = time.monotonic()
        """When a script run was last seen (made: the run just ended, its page is being drawn)."""

    def __call__(self) -> None:
        start = time.monotonic()
        while True:
            now = time.monotonic()
            if scripts_running():
                self._busy_at = now
            elif now - self._busy_at >= self.grace:
                return
            if now - start >= self.longest:
                return
            time.sleep(self.poll)


_RUNS_LOCK = threading.Lock()
_RUNS: dict[str, RunJob] = {}
"""The running computation of each user (signed-in identity, else session): at most one."""


def session_alive(session_id: str) -> bool:
    """Whether the Streamlit session is still connected (False once its tab closed)."""
    from streamlit import runtime

    return not runtime.exists() or runtime.get_instance().is_active_session(session_id)


def run_owner() -> tuple[str, str | None]:
    """Who a Run counts against (the signed-in user, else this browser session) and the
    session's id."""
    context = get_script_run_ctx()
    session_id = None if context is None else context.session_id
    who = auth.identity() if auth.configured() else None
    return (f"user:{who}" if who else f"session:{session_id}"), session_id




def start(config: RunConfig, dataset: Dataset) -> RunJob:
    """Check the budget and start the run on its worker; refused while the same user has one
    running (another tab, or a Run pressed twice)."""
    check_run_budget(run_size(dataset, config))
    owner, session_id = run_owner()
    with _RUNS_LOCK:
        running = _RUNS.get(owner)
        if running is not None and not running.finished.is_set():
            raise CpdecompError(
                "One computation per user at a time: yours is still running (perhaps in "
                "another tab); wait for it to finish or press Stop there first")
        job = RunJob(config, dataset, owner, session_id)
        _RUNS[owner] = job
    job.start()
    return job


def running_studies() -> set[tuple[str, StudyOptions]]:
    """The fitted studies (data digest, options) a run is computing with now."""
    with _RUNS_LOCK:
        return {(job.config.digest, job.config.options) for job in _RUNS.values()}

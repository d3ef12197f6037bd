"""Session state and caches: the loaded dataset, the chosen setup, fitted studies and reports.

Fitting is the expensive step, so a fitted study is an `st.cache_resource` shared by every
session, keyed on the data's digest and the `StudyOptions`. Reports (all patients explained
under one method, alpha, budget and units) are kept inside the study's handle: the calibration
game is cached in the study's explainer, so another alpha or the other units cost one pass over
the patients, and going back to a configuration already seen costs nothing. Pages index into a
report to switch patient.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from app import auth, planning, sources
from app.reviews import ReviewStore, configured_location
from app.shown import Shown, shown_report
from app.sources import Dataset
from core import FAMILIES, MODELS, Report, Study, StudyOptions, prepare_study, target_values
from core.attribution import DEFAULT_PERMUTATIONS, METHOD_BUDGETS, METHOD_LABELS, build_design
from core.bounded import BoundedCache
from core.cancel import Cancelled, cancellable, checkpoint
from core.coalitions import MAX_PLAYERS
from core.decomposition import Units
from core.errors import CpdecompError
from core.explainer import Progress
from sample_data import SAMPLES

logger = logging.getLogger("cpdecomp.app.state")

NO_ID = "(row number)"
"""The id choice meaning 'no id column': patients are named by their row number."""

SOURCES = {
    "sample": "Bundled sample",
    "upload": "Upload one table",
    "separate": "Upload training / calibration / patients files",
    "model": "Your fitted model",
}

_OPTION_DEFAULTS = StudyOptions(target="")
"""Core's defaults, so the dashboard starts where the command line does."""
DEFAULTS: dict[str, object] = {
    "data_source": "sample",
    "sample": next(iter(SAMPLES)),
    "all_features": True,
    "features": [],
    "model": _OPTION_DEFAULTS.model,
    "cp_family": _OPTION_DEFAULTS.family,
    "attribution_method": "exact",
    "budget": DEFAULT_PERMUTATIONS,
    "background_auto": True,
    "background": 64,
    "seed": _OPTION_DEFAULTS.seed,
    "alpha": 0.1,
    "confidence": 0.9,
    "units": "width",
    "queue_rule": "percentile",
    "queue_percentile": 90,
    "queue_sort": "widest first",
    "queue_unreviewed": False,
    "reviewer": "",
    "review_note": "",
    "queue_features": [],
    "outcome_low_on": False,
    "outcome_low": 0.0,
    "outcome_high_on": False,
    "outcome_high": 1.0,
    "outcome_unit": "",
    "used_targets": [],
}

WIDGET_KEYS = (*DEFAULTS, "target_column", "id_column", "patient", "queue_threshold",
               "review_patient", "compare_patient", "compare_on", "fixed_q_on", "whatif_on",
               "subgroup_feature")
"""Widget values that must survive switching pages (Streamlit drops a widget's state when a
page without that widget runs, unless the value is re-assigned each run)."""

ROWS_PER_MODEL_CALL = 40_000
"""Rows per brute-force model call in the dashboard (a Stop waits for the call under way)."""
MAX_REPORTS = 24
"""Reports kept per fitted study; each is a few arrays of patients x features."""
CALIBRATION_BOOTSTRAP = 200
"""Resampled calibration sets behind each calibration-driven part's interval: a re-weighting of
the kept masked scores, no model call (a few tenths of a second on the bundled sample)."""


def init_session() -> None:
    """Defaults for every setting, and the bundled sample as the first dataset."""
    state = st.session_state
    for key, value in DEFAULTS.items():
        state.setdefault(key, value)
    if "dataset" not in state:
        set_dataset(sources.load_sample(str(state["sample"])), ("sample", str(state["sample"])))


def keep_widget_state() -> None:
    """Re-assign widget values so that a page without the widget does not drop them.

    A fragment's rerun (the Patient panel) ends with Streamlit dropping the state of widgets
    it did not draw, re-assigned or not; a plain copy, which is no widget's key, restores them.
    """
    state = st.session_state
    kept = state.setdefault("_kept_widget_values", {})
    for key in WIDGET_KEYS:
        if key in state:
            kept[key] = state[key]
            state[key] = state[key]
        elif key in kept:
            state[key] = kept[key]


def set_dataset(dataset: Dataset, origin: tuple[str, ...]) -> None:
    """Make `dataset` current and reset the column roles to its defaults."""
    state = st.session_state
    state["dataset"] = dataset
    state["dataset_origin"] = origin
    columns = dataset.columns
    # A bundled sample names its outcome; for an upload the column is chosen from the data
    # (never an id, a 0/1 flag or a constant; a name used before wins).
    target = dataset.default_target if origin[0] == "sample" else planning.choose_target(
        source_table(dataset), state.get("used_targets", []))
    state["target_column"] = target or columns[-1]
    state["id_column"] = dataset.default_id or NO_ID
    state["all_features"] = True
    state["features"] = []


def current_dataset() -> Dataset | None:
    return st.session_state.get("dataset")


def source_table(dataset: Dataset):
    """The table the target and features are chosen from (the training file, if separate)."""
    return dataset.train if dataset.train is not None else dataset.patients


def ensure_outcome_range(dataset: Dataset, target: str) -> None:
    """Start the outcome's range from the training target when the data or target changed:
    "never negative" when no value is below 0."""
    state = st.session_state
    if state.get("range_for") == (dataset.digest, target):
        return
    state["range_for"] = (dataset.digest, target)
    try:
        values = target_values(source_table(dataset), target)
    except CpdecompError:
        values = None
    low = None if values is None else planning.inferred_lower_bound(values)
    state["outcome_low_on"] = low is not None
    state["outcome_low"] = 0.0 if low is None else low
    state["outcome_high_on"] = False
    state["outcome_inferred"] = low is not None


def outcome_range(config: RunConfig) -> planning.OutcomeRange:
    """What the run's outcome can be: as stated on the Data page, or inferred."""
    state = st.session_state
    dataset = state.get("run_dataset")
    if dataset is not None:
        ensure_outcome_range(dataset, config.options.target)
    return planning.OutcomeRange(
        low=float(state["outcome_low"]) if state.get("outcome_low_on") else None,
        high=float(state["outcome_high"]) if state.get("outcome_high_on") else None,
        unit=str(state.get("outcome_unit") or "").strip(),
    )


def ensure_choice(key: str, options: list, fallback: object) -> None:
    """Keep a select widget's stored value among its options (they change with the data)."""
    if st.session_state.get(key) not in options:
        st.session_state[key] = fallback if fallback in options else options[0]


def ensure_list(key: str, options: list) -> None:
    """Keep a multiselect's stored values among its options."""
    st.session_state[key] = [v for v in st.session_state.get(key) or [] if v in options]


def chosen_columns() -> tuple[str, str | None, tuple[str, ...] | None]:
    """Target, id column (None for row numbers) and features (None for all the others)."""
    state = st.session_state
    id_column = state.get("id_column")
    features = None if state.get("all_features", True) else tuple(state.get("features") or ())
    return str(state["target_column"]), None if id_column in (None, NO_ID) else id_column, (
        features or None)


@dataclass(frozen=True)
class RunConfig:
    """Everything a run's results depend on."""

    digest: str
    dataset_name: str
    options: StudyOptions
    method: str
    budget: int | None
    alpha: float

    @property
    def dataset_key(self) -> str:
        return sources.dataset_key(self.digest, self.options.target)

    @property
    def log_family(self) -> bool:
        return FAMILIES[self.options.family].scale == "log"


def run_config(dataset: Dataset) -> RunConfig:
    """The configuration the Setup page's widgets describe."""
    state = st.session_state
    target, id_column, features = chosen_columns()
    family = str(state["cp_family"])
    alpha = round(float(state["alpha"]), 6)
    method = str(state["attribution_method"])
    # Quantile models are fitted at alpha/2 and 1 - alpha/2, as the command line does; the
    # other families ignore the level, so pinning it keeps their fitted study cached when
    # alpha changes.
    quantile_alpha = (alpha if FAMILIES[family].uses_quantile_level
                      else _OPTION_DEFAULTS.quantile_alpha)
    options = StudyOptions(
        target=target, id_column=id_column, features=features, family=family,
        model=str(state["model"]), seed=int(state["seed"]), quantile_alpha=quantile_alpha,
        # None lets core choose: large where masking is exact and cheap, small where it is not.
        background=None if state.get("background_auto", True) else int(state["background"]),
    )
    budget = int(state["budget"]) if METHOD_BUDGETS.get(method) else None
    return RunConfig(dataset.digest, dataset.name, options, method, budget, alpha)


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
            method, alpha, units, budget = key
            other = self._reports.get((method, alpha, "log" if units == "width" else "width",
                                       budget))
            if other is not None:
                report = self._publish(key, other.in_units(units))
        return report

    def _publish(self, key: tuple, report: Report) -> Report:
        self._reports[key] = report  # the oldest report goes past MAX_REPORTS
        return report

    def report(self, method: str, alpha: float, units: Units, budget: int | None,
               progress: Progress | None = None,
               stage: Callable[[str], None] = lambda name: None) -> Report:
        """Every patient explained under one configuration, computed once.

        stage(name) says what is being done: a stage of STAGES, or WAITING while another
        session computes the same report. Waiting, like computing, stops at a cancelled run's
        next checkpoint (core.cancel).
        """
        key = (method, alpha, units, budget)
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

            done = self.study.explain(
                method=method, alpha=alpha, units=units, budget=budget, progress=chunk_done,
                calibration_bootstrap=CALIBRATION_BOOTSTRAP, fixed_quantile=True)
        finally:
            with self._lock:
                del self._claims[key]
                if done is not None:
                    self._publish(key, done)
            claim.set()
        return done

    def has_report(self, method: str, alpha: float, units: Units, budget: int | None) -> bool:
        return (method, alpha, units, budget) in self._reports


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


def compute(config: RunConfig, dataset: Dataset,
            on_progress: Callable[[float, str], None] = lambda share, label: None
            ) -> dict[str, float]:
    """Fit (or reuse), then explain every patient; returns seconds per stage.

    on_progress(share done in [0, 1], what is being done) is called between stages and after
    each chunk of patients. Inside core.cancel.cancellable, a stop request ends the work at the
    next chunk with Cancelled (a fit, once started, runs to its end).
    """
    timings: dict[str, float] = {}
    start = time.perf_counter()
    on_progress(0.0, STAGES[0])
    handle = fitted_study(config.digest, config.options, dataset)
    checkpoint()
    timings[STAGES[0]] = time.perf_counter() - start
    if handle.has_report(config.method, config.alpha, "width", config.budget):
        on_progress(1.0, "Done")
        return timings
    n = len(handle.study.patients)
    current, since = STAGES[1], time.perf_counter()

    def stage(name: str) -> None:
        nonlocal current, since
        now = time.perf_counter()
        if current in STAGES:  # time spent waiting for another session is no stage's
            timings[current] = timings.get(current, 0.0) + now - since
        current, since = name, now
        share = {STAGES[1]: 1 / 3, STAGES[2]: 2 / 3}.get(name, 1 / 3)
        on_progress(share, f"{name} (0 of {n})" if name == STAGES[2] else name)

    def patients_done(done: int, total: int) -> None:
        on_progress(2 / 3 + done / max(total, 1) / 3, f"{STAGES[2]} ({done} of {total})")

    handle.report(config.method, config.alpha, "width", config.budget, patients_done, stage)
    stage("Done")
    on_progress(1.0, "Done")
    return timings


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

    @property
    def cells(self) -> int | None:
        return None if self.coalitions is None else self.coalitions * self.n_explained


def run_size(dataset: Dataset, config: RunConfig) -> RunSize:
    options = config.options
    target, id_column = options.target, options.id_column
    n_features = len(options.features) if options.features else len(
        [c for c in dataset.columns if c not in (target, id_column)])
    target_array = target_values(source_table(dataset), target)
    labelled = int((~np.isnan(target_array)).sum())
    if dataset.calibration is not None:  # separate files: no split
        n_train, n_explained = labelled, len(dataset.calibration) + len(dataset.patients)
    else:
        n_train, n_calibration, n_held_out = planning.split_sizes(labelled, options)
        n_explained = n_calibration + n_held_out + (len(target_array) - labelled)
    plan = planning.masking_plan(options.model, options.family)
    background = planning.background_size(options, n_train, plan.fast)
    coalitions: int | None = None
    design_error: str | None = None
    if n_features <= MAX_PLAYERS:
        try:
            coalitions = len(build_design(config.method, n_features, config.budget,
                                          options.seed).coalitions)
        except CpdecompError as error:
            design_error = str(error)
    seconds = (None if coalitions is None else planning.brute_force_seconds(
        plan, config.method, config.budget, n_features, n_explained, background, options.seed))
    return RunSize(n_features, n_train, n_explained, background, coalitions, seconds,
                   design_error)


def check_run_budget(size: RunSize) -> None:
    """Refuse, before anything is fitted, a run above the dashboard's per-run budget."""
    if size.n_features > MAX_PLAYERS:
        raise CpdecompError(
            f"{size.n_features} features is more than the {MAX_PLAYERS} the dashboard can "
            "explain; choose fewer features on the Data page")
    if size.design_error is not None:  # said now, not after the models are fitted
        raise CpdecompError(size.design_error)
    cells = size.cells
    if cells is not None and cells > MAX_RUN_CELLS:
        raise CpdecompError(
            f"This run would evaluate {cells:,} patient × feature-combination cells, above the "
            f"dashboard's limit of {MAX_RUN_CELLS:,} per run; choose a smaller budget or fewer "
            "features, or run it with the command line (cpdecomp explain), which has no limit")
    seconds = size.brute_force_seconds
    if seconds is not None and seconds > MAX_RUN_SECONDS:
        raise CpdecompError(
            f"This run is expected to take {planning.rounded_seconds(seconds)}, above the "
            f"dashboard's limit of {MAX_RUN_SECONDS // 60} min per run; choose a smaller "
            "background, a sampling method with a smaller budget or another family, or run it "
            "with the command line (cpdecomp explain)")


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
        started the run has ended (looked up at most twice a second)."""
        if self._stop.is_set():
            return True
        now = time.monotonic()
        since = self._unwatched_since
        if since is not None and self._seen < since and now - since > UNWATCHED_GRACE:
            self.cancel("Streamlit's Stop")
        if self.session_id is not None and now - self._session_checked > 0.5:
            self._session_checked = now
            if not session_alive(self.session_id):
                self.cancel("session ended")
        return self._stop.is_set()

    def _progress(self, share: float, label: str) -> None:
        self.share, self.label = share, label

    def _work(self) -> None:
        _yield_to_interactive_work()
        try:
            with cancellable(self._should_stop):
                self.timings = compute(self.config, self.dataset, self._progress)
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


UNWATCHED_GRACE = 3.0
"""Seconds a run's page may go without a script run before the run counts as stopped."""
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


def start_run(config: RunConfig, dataset: Dataset) -> RunJob:
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
    st.session_state["run_job"] = job
    return job


def current_job() -> RunJob | None:
    job: RunJob | None = st.session_state.get("run_job")
    if job is not None:
        job.seen()
    return job


def collect_run() -> RunJob | None:
    """If this session's run has ended, take its outcome (results on success, the error or
    the stop kept for the page to show) and forget the job; returns the ended job."""
    state = st.session_state
    job: RunJob | None = state.get("run_job")
    if job is None or not job.finished.is_set():
        return None
    del state["run_job"]
    if job.error is None and not job.cancelled:
        remember_run(job.config, job.dataset, job.timings)
    state["run_outcome"] = ("error", job.error) if job.error is not None else (
        ("stopped", None) if job.cancelled else ("done", None))
    return job


def remember_run(config: RunConfig, dataset: Dataset, timings: dict[str, float]) -> None:
    state = st.session_state
    context = get_script_run_ctx()
    if context is not None:
        use_study(context.session_id, (config.digest, config.options))
    state["last_run"] = config
    used = [t for t in state.get("used_targets", []) if t != config.options.target]
    state["used_targets"] = [*used, config.options.target][-8:]
    state["run_dataset"] = dataset
    state["run_timings"] = timings


@dataclass(frozen=True, eq=False)
class Results:
    """The last run's study and its report in the units on show. Pages read `shown`, its flat
    record; the study is for the few that compute more (what-if, interactions)."""

    config: RunConfig
    study: Study
    report: Report
    units: str

    @property
    def dataset_key(self) -> str:
        return self.config.dataset_key

    @cached_property
    def shown(self) -> Shown:
        return shown_report(self.report, (self.config, self.units), self.config.options.target)


def current_units(config: RunConfig) -> Units:
    """Log units only where the family is multiplicative."""
    return "log" if config.log_family and st.session_state.get("units") == "log" else "width"


def results(units: Units | None = None) -> Results | None:
    """The last successful run, explained in `units` (default: the units toggle)."""
    state = st.session_state
    config: RunConfig | None = state.get("last_run")
    dataset: Dataset | None = state.get("run_dataset")
    if config is None or dataset is None:
        return None
    shown: Units = units or current_units(config)
    handle = fitted_study(config.digest, config.options, dataset)
    report = handle.report(config.method, config.alpha, shown, config.budget)
    return Results(config, handle.study, report, shown)


def results_in_width_units(shown: Results) -> Results:
    """The same run in width units (the reading and the queue speak in widths)."""
    if shown.units == "width":
        return shown
    handle = fitted_study(shown.config.digest, shown.config.options,
                          st.session_state["run_dataset"])
    report = handle.report(shown.config.method, shown.config.alpha, "width",
                           shown.config.budget)
    return Results(shown.config, shown.study, report, "width")


def run_facts(results: Results) -> dict[str, str]:
    """What the run's numbers depend on, for the HTML case summary."""
    config = results.config
    shown = results.shown
    options = config.options
    method = METHOD_LABELS.get(config.method, config.method)
    # The user's fitted models, when the run used them (its dataset carries them).
    state = st.session_state
    dataset = state.get("run_dataset") if state.get("last_run") == config else None
    user_models = getattr(dataset, "models", None)
    if shown.budget is not None and config.method != "exact":
        method += f", budget {shown.budget}"
    return {
        "dataset": config.dataset_name,
        "target": options.target,
        "model": planning.model_name(options.model, user_models) if user_models else (
            MODELS[options.model].label if options.model in MODELS else options.model),
        "conformal family": f"{options.family} ({FAMILIES[options.family].label})",
        "α (miscoverage)": f"{shown.alpha:g} (confidence {1 - shown.alpha:.0%})",
        "calibration rows": str(shown.n_calibration),
        "background rows": str(shown.background_size),
        "attribution method": method,
        "seed": str(options.seed),
        "units": shown.units_label,
    }


@st.cache_resource(show_spinner=False)
def _review_store(location: str) -> ReviewStore:
    return ReviewStore(location)


def review_store() -> ReviewStore:
    """The review database named by $CPDECOMP_REVIEW_DB (a file path or a postgresql:// URL,
    read on every call); one store per location, shared by the sessions."""
    return _review_store(configured_location())


# Memory after users leave. Streamlit keeps a closed session for two minutes in case its tab
# reconnects, but drops it from that store only when another session comes or goes, and even
# then never frees the session's uploaded files; and fitted studies stay cached after the last
# session that used them has gone. A housekeeping thread releases all three.

HOUSEKEEPING_EVERY = 30.0
"""Seconds between two rounds of releasing what departed sessions held."""
_study_sessions: dict[tuple[str, StudyOptions], set[str]] = {}
"""Fitted study (data digest, options) -> the sessions whose last run shows it."""
_housekeeping_lock = threading.Lock()
_housekeeper: threading.Thread | None = None


def use_study(session_id: str, key: tuple[str, StudyOptions]) -> None:
    """The session now shows this study's results (and no longer another's)."""
    with _housekeeping_lock:
        for users in _study_sessions.values():
            users.discard(session_id)
        _study_sessions.setdefault(key, set()).add(session_id)


def drop_superseded_uploads(shown: list[object]) -> int:
    """Free this session's uploaded files except those the page's uploaders hold now
    (`shown`: their values, UploadedFile or None). Streamlit keeps every file a session ever
    uploaded until the session ends; the loaded tables are parsed already, so a replaced or
    abandoned upload is only weight (20 uploads of 23 MiB took the server from 70 to 960 MiB).
    Returns how many files were freed."""
    from streamlit import runtime

    context = get_script_run_ctx()
    if context is None or not runtime.exists():
        return 0
    keep = {getattr(f, "file_id", None) for f in shown if f is not None}
    manager = runtime.get_instance().uploaded_file_mgr
    remove = getattr(manager, "remove_file", None)  # Streamlit's in-memory store has it
    held = getattr(manager, "file_storage", {}).get(context.session_id, {})
    # Only files an uploader has held and holds no longer: a file whose upload has reached the
    # server but not yet the uploader's value (another widget's rerun came first) is not
    # superseded, and removing it lost the upload (seen in the model-upload browser test).
    seen: set = st.session_state.setdefault("uploads_seen", set())
    seen |= keep
    superseded = [file_id for file_id in list(held) if file_id not in keep and file_id in seen]
    if remove is None:
        return 0
    for file_id in superseded:
        remove(context.session_id, file_id)
        seen.discard(file_id)
    if superseded:
        import gc

        gc.collect()
        _return_freed_memory()
    return len(superseded)


def release_departed() -> dict[str, int]:
    """Free what sessions that left still hold: their uploads, their stored state once
    Streamlit's reconnect window has passed, and fitted studies no live session shows; then
    hand the freed memory back to the system. Returns counts of what was released."""
    import gc

    from streamlit import runtime

    released = {"sessions": 0, "uploads": 0, "studies": 0}
    if not runtime.exists():
        return released
    instance = runtime.get_instance()
    manager = instance._session_mgr
    storage = getattr(manager, "_session_storage", None)
    cache = getattr(storage, "_cache", None)
    if cache is not None and hasattr(cache, "expire"):
        with getattr(manager, "_storage_lock", None) or contextlib.nullcontext():
            expired = cache.expire()
        released["sessions"] = len(expired)
    live = {info.session.id for info in manager.list_sessions()}
    uploads = instance.uploaded_file_mgr
    for session_id in list(getattr(uploads, "file_storage", {})):
        if session_id not in live:
            uploads.remove_session_files(session_id)
            released["uploads"] += 1
    with _RUNS_LOCK:
        computing = {(job.config.digest, job.config.options) for job in _RUNS.values()}
    with _housekeeping_lock:
        unused = []
        for key, users in _study_sessions.items():
            users &= live
            if not users and key not in computing:
                unused.append(key)
        for key in unused:
            del _study_sessions[key]
    for digest, options in unused:
        fitted_study.clear(digest, options, None)
        released["studies"] += 1
    if any(released.values()):
        gc.collect()
        _return_freed_memory()
        logger.info("memory.released sessions=%d uploads=%d studies=%d",
                    released["sessions"], released["uploads"], released["studies"])
    return released


def _return_freed_memory() -> None:
    """Give memory that Python, numpy and Arrow freed back to the system: glibc keeps freed
    blocks for reuse, so a server's resident size only grows otherwise."""
    import ctypes
    import ctypes.util

    try:
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except ImportError:
        pass
    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        pass


def start_housekeeping() -> None:
    """Start the housekeeping thread, once per server process."""
    global _housekeeper
    with _housekeeping_lock:
        if _housekeeper is not None:
            return

        def loop() -> None:
            while True:
                time.sleep(HOUSEKEEPING_EVERY)
                try:
                    release_departed()
                except Exception as error:  # never let housekeeping take the server down
                    logger.error("memory.release failed with %s", type(error).__name__)

        _housekeeper = threading.Thread(target=loop, name="cpdecomp-housekeeping",
                                        daemon=True)
        _housekeeper.start()

"""Session state and caches: the loaded dataset, the chosen setup, fitted studies and reports.

Fitting is the expensive step, so a fitted study is an `st.cache_resource` shared by every
session, keyed on the data's digest and the `StudyOptions`. Reports (all patients explained
under one method, alpha, budget and units) are kept inside the study's handle: the calibration
game is cached in the study's explainer, so another alpha or the other units cost one pass over
the patients, and going back to a configuration already seen costs nothing. Pages index into a
report to switch patient.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from app import planning, sources
from app.reviews import ReviewStore, configured_location
from app.sources import Dataset
from core import FAMILIES, Report, Study, StudyOptions, prepare_study, target_values
from core.attribution import DEFAULT_PERMUTATIONS, METHOD_BUDGETS
from core.decomposition import Units
from core.errors import CpdecompError
from core.explainer import Progress
from sample_data import SAMPLES

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
    uses_quantiles = bool({"lo", "hi"} & set(FAMILIES[family].components))
    quantile_alpha = alpha if uses_quantiles else _OPTION_DEFAULTS.quantile_alpha
    options = StudyOptions(
        target=target, id_column=id_column, features=features, family=family,
        model=str(state["model"]), seed=int(state["seed"]), quantile_alpha=quantile_alpha,
        # None lets core choose: large where masking is exact and cheap, small where it is not.
        background=None if state.get("background_auto", True) else int(state["background"]),
    )
    budget = int(state["budget"]) if METHOD_BUDGETS.get(method) else None
    return RunConfig(dataset.digest, dataset.name, options, method, budget, alpha)


class StudyHandle:
    """A fitted study and the reports computed from it."""

    def __init__(self, study: Study) -> None:
        self.study = study
        self._reports: dict[tuple, Report] = {}
        # Sessions share a handle; the explainer's caches are plain dicts, and two sessions
        # asking for the same report should compute it once.
        self._lock = threading.Lock()

    def report(self, method: str, alpha: float, units: Units, budget: int | None,
               progress: Progress | None = None) -> Report:
        """Every patient explained under one configuration, computed once."""
        key = (method, alpha, units, budget)
        other = (method, alpha, "log" if units == "width" else "width", budget)
        with self._lock:
            if key not in self._reports:
                if len(self._reports) >= MAX_REPORTS:
                    self._reports.pop(next(iter(self._reports)))
                if other in self._reports:  # the other units: a rescaling, no game evaluated
                    self._reports[key] = self._reports[other].in_units(units)
                else:
                    self._reports[key] = self.study.explain(
                        method=method, alpha=alpha, units=units, budget=budget,
                        progress=progress, calibration_bootstrap=CALIBRATION_BOOTSTRAP,
                        fixed_quantile=True)
            return self._reports[key]

    def has_report(self, method: str, alpha: float, units: Units, budget: int | None) -> bool:
        return (method, alpha, units, budget) in self._reports

    def warm_calibration(self, method: str, alpha: float, budget: int | None) -> None:
        """Compute and cache the calibration game by explaining one patient."""
        with self._lock:
            self.study.explain(method=method, alpha=alpha, budget=budget, rows=[0],
                               calibration_bootstrap=CALIBRATION_BOOTSTRAP)


@st.cache_resource(max_entries=4, show_spinner=False)
def fitted_study(digest: str, options: StudyOptions, _dataset: Dataset) -> StudyHandle:
    """Split, fit and conformalize once per (data, options); `_dataset` is not hashed: the
    digest stands for its content."""
    study = prepare_study(_dataset.patients, options, train=_dataset.train,
                          calibration=_dataset.calibration, models=_dataset.models)
    return StudyHandle(study)


STAGES = ("Fitting the model components", "Computing the calibration game",
          "Explaining every patient")


def compute(config: RunConfig, dataset: Dataset,
            on_progress: Callable[[float, str], None] = lambda share, label: None
            ) -> dict[str, float]:
    """Fit (or reuse), then explain every patient; returns seconds per stage.

    on_progress(share done in [0, 1], what is being done) is called between stages and after
    each chunk of patients.
    """
    timings: dict[str, float] = {}
    start = time.perf_counter()
    on_progress(0.0, STAGES[0])
    handle = fitted_study(config.digest, config.options, dataset)
    timings[STAGES[0]] = time.perf_counter() - start
    if not handle.has_report(config.method, config.alpha, "width", config.budget):
        start = time.perf_counter()
        on_progress(1 / 3, STAGES[1])
        handle.warm_calibration(config.method, config.alpha, config.budget)
        timings[STAGES[1]] = time.perf_counter() - start
        start = time.perf_counter()
        n = len(handle.study.patients)
        on_progress(2 / 3, f"{STAGES[2]} (0 of {n})")

        def patients_done(done: int, total: int) -> None:
            on_progress(2 / 3 + done / max(total, 1) / 3, f"{STAGES[2]} ({done} of {total})")

        handle.report(config.method, config.alpha, "width", config.budget, patients_done)
        timings[STAGES[2]] = time.perf_counter() - start
    on_progress(1.0, "Done")
    return timings


def remember_run(config: RunConfig, dataset: Dataset, timings: dict[str, float]) -> None:
    state = st.session_state
    state["last_run"] = config
    used = [t for t in state.get("used_targets", []) if t != config.options.target]
    state["used_targets"] = [*used, config.options.target][-8:]
    state["run_dataset"] = dataset
    state["run_timings"] = timings


@dataclass(frozen=True, eq=False)
class Results:
    """The last run's study and its report in the units on show."""

    config: RunConfig
    study: Study
    report: Report
    units: str

    @property
    def dataset_key(self) -> str:
        return self.config.dataset_key


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


def units_label(results: Results) -> str:
    if results.units == "log":
        return "log width"
    return f"width ({results.config.options.target} units)"


@st.cache_resource(show_spinner=False)
def _review_store(location: str) -> ReviewStore:
    return ReviewStore(location)


def review_store() -> ReviewStore:
    """The review database named by $CPDECOMP_REVIEW_DB (a file path or a postgresql:// URL,
    read on every call); one store per location, shared by the sessions."""
    return _review_store(configured_location())

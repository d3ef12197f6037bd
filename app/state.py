"""Session glue: the widgets' defaults and kept values, the loaded dataset, the setup the
widgets describe, and this session's run and results (the runs themselves are app/runs.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from cpdecomp import FAMILIES, MODELS, Report, Study, StudyOptions, target_values
from cpdecomp.app import housekeeping, planning, runs, sources
from cpdecomp.app.reviews import ReviewStore, configured_location
from cpdecomp.app.runs import MAX_BACKGROUND_BOOTSTRAP as MAX_BACKGROUND_BOOTSTRAP  # for Setup
from cpdecomp.app.runs import RunConfig, RunJob
from cpdecomp.app.runs import RunSize as RunSize  # re-exported: the Setup page reads state.RunSize
from cpdecomp.app.runs import (
    run_size as run_size,  # re-exported: the Setup page reads state.run_size
)
from cpdecomp.app.shown import Shown
from cpdecomp.app.sources import Dataset, source_table
from cpdecomp.core.attribution import DEFAULT_PERMUTATIONS, METHOD_BUDGETS, METHOD_LABELS
from cpdecomp.core.decomposition import Units
from cpdecomp.core.errors import CpdecompError
from cpdecomp.sample_data import SAMPLES

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
    "background_check": False,
    "response_scale": False,
    "background_redraws": runs.BACKGROUND_BOOTSTRAP,
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
               "subgroup_feature", "recal_mode", "recal_split_by", "recal_reference", "recal_set",
               "recal_patient")
"""Widget values that must survive switching pages (Streamlit drops a widget's state when a
page without that widget runs, unless the value is re-assigned each run)."""


def init_session() -> None:
    """Defaults for every setting, and the bundled sample as the first dataset."""
    state = st.session_state
    for key, value in DEFAULTS.items():
        state.setdefault(key, value)
    if "dataset" not in state:
        set_dataset(sources.load_sample(str(state["sample"])), ("sample", str(state["sample"])))


FRAGMENT_KEYS = frozenset({"patient", "compare_patient", "compare_on", "fixed_q_on",
                           "whatif_on"})
"""The WIDGET_KEYS the Patient page's panel (a fragment) draws: a rerun of the panel alone
changes these and no other."""

_FULL_RUN = "_full_run"
_FRAGMENT_RERAN = "_fragment_reran"


def full_run_started() -> None:
    """Mark that the whole script runs (main.py), so a fragment can tell its own reruns."""
    st.session_state[_FULL_RUN] = True


def full_run_ended() -> None:
    st.session_state[_FULL_RUN] = False


def fragment_ran() -> None:
    """Called by a fragment: if it runs alone, the next full run takes the kept values."""
    if not st.session_state.get(_FULL_RUN):
        st.session_state[_FRAGMENT_RERAN] = True


def keep_widget_state() -> None:
    """Re-assign widget values so that a page without the widget does not drop them.

    A fragment's rerun (the Patient panel) ends with Streamlit dropping the state of widgets
    it did not draw, re-assigned or not; a plain copy, which is no widget's key, restores them.
    Dropped is not always gone: Streamlit may then answer with an older value of the key (seen
    with α: Next put 0.10 back where the user had set 0.20), so after a fragment's own rerun
    every key the fragment does not draw is taken from the copy, present or not.
    """
    state = st.session_state
    kept = state.setdefault("_kept_widget_values", {})
    after_fragment = bool(state.pop(_FRAGMENT_RERAN, False))
    for key in WIDGET_KEYS:
        if after_fragment and key in kept and key not in FRAGMENT_KEYS:
            state[key] = kept[key]
        elif key in state:
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
    # With model files, the columns the models read are features, not the outcome: the same
    # guess the upload made (app.targets), with the names used before.
    table = source_table(dataset)
    if dataset.model_features:
        table = table.drop(columns=list(dataset.model_features))
    target = dataset.default_target if origin[0] == "sample" else planning.choose_target(
        table, state.get("used_targets", []))
    state["target_column"] = target or columns[-1]
    state["id_column"] = dataset.default_id or NO_ID
    state["all_features"] = True
    state["features"] = []


def current_dataset() -> Dataset | None:
    return st.session_state.get("dataset")


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


def stated_outcome_range(dataset: Dataset | None, target: str) -> planning.OutcomeRange:
    """What the outcome can be as the Data page's widgets say now (inferred from the training
    target when the data or target changed)."""
    state = st.session_state
    if dataset is not None:
        ensure_outcome_range(dataset, target)
    return planning.OutcomeRange(
        low=float(state["outcome_low"]) if state.get("outcome_low_on") else None,
        high=float(state["outcome_high"]) if state.get("outcome_high_on") else None,
        unit=str(state.get("outcome_unit") or "").strip(),
    )


RUN_OUTCOME_RANGE = "run_outcome_range"
"""The session key of the last run's outcome range: (its RunConfig, the range)."""


def outcome_range(config: RunConfig) -> planning.OutcomeRange:
    """What the run's outcome can be: the range kept with the run (set as it was when Run was
    pressed, and changed only on the Data page for the run's own data and target), so a page,
    a rerun that brings widgets back at their defaults, or an export, all clip the same way."""
    state = st.session_state
    kept = state.get(RUN_OUTCOME_RANGE)
    if kept is not None and kept[0] == config:
        return kept[1]
    # A run with no kept range (none started in this session): the widgets' range, kept now.
    outcome = stated_outcome_range(state.get("run_dataset"), config.options.target)
    if state.get("last_run") == config:
        state[RUN_OUTCOME_RANGE] = (config, outcome)
    return outcome


def data_page_range_changed(dataset: Dataset, target: str) -> None:
    """The Data page drew the range's widgets: if they describe the last run's own data and
    target, the run's kept range follows them (the user edited the outcome the results are
    about); for other data the next Run takes them."""
    state = st.session_state
    config: RunConfig | None = state.get("last_run")
    if config is None or (config.digest, config.options.target) != (dataset.digest, target):
        return
    state[RUN_OUTCOME_RANGE] = (config, stated_outcome_range(dataset, target))


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
    model = str(state["model"])
    # The response scale is an option only where a model has a log link: elsewhere both
    # scales are the same function, and the option would only split the caches.
    response = bool(state.get("response_scale")) and planning.has_link(
        model, family, getattr(dataset, "models", None))
    options = StudyOptions(
        target=target, id_column=id_column, features=features, family=family,
        model=model, seed=int(state["seed"]), quantile_alpha=quantile_alpha,
        # None lets core choose: large where masking is exact and cheap, small where it is not.
        background=None if state.get("background_auto", True) else int(state["background"]),
        masking="response" if response else "auto",
    )
    budget = int(state["budget"]) if METHOD_BUDGETS.get(method) else None
    redraws = int(state["background_redraws"]) if state.get("background_check") else 0
    return RunConfig(dataset.digest, dataset.name, options, method, budget, alpha,
                     background_bootstrap=redraws)


def start_run(config: RunConfig, dataset: Dataset) -> RunJob:
    """Start the run on its worker (runs.start) and follow it from this session."""
    job = runs.start(config, dataset)
    st.session_state["run_job"] = job
    # The outcome's range as it is now goes with the run (remember_run keeps it with the
    # results): every page and export of this run clips to it.
    st.session_state["run_job_outcome"] = (
        job, stated_outcome_range(dataset, config.options.target))
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
    started = state.pop("run_job_outcome", None)
    if job.error is None and not job.cancelled:
        remember_run(job.config, job.dataset, job.timings,
                     started[1] if started is not None and started[0] is job else None)
    state["run_outcome"] = ("error", job.error) if job.error is not None else (
        ("stopped", None) if job.cancelled else ("done", None))
    return job


def remember_run(config: RunConfig, dataset: Dataset, timings: dict[str, float],
                 outcome: planning.OutcomeRange | None = None) -> None:
    """Make the run the one on show, with the outcome range it was started with (None: the
    Data page's range as it is now)."""
    state = st.session_state
    state[RUN_OUTCOME_RANGE] = (config, outcome if outcome is not None
                                else stated_outcome_range(dataset, config.options.target))
    context = get_script_run_ctx()
    if context is not None:
        housekeeping.use_study(context.session_id, (config.digest, config.options))
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
        # One record per report for every session and script run (the run's worker built it
        # as the run ended): a page never walks the whole cohort's arrays again.
        return runs.shown_record(self.config, self.report, self.units)


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
    handle = runs.fitted_study(config.digest, config.options, dataset)
    report = handle.report(config.method, config.alpha, shown, config.budget,
                           background_bootstrap=config.background_bootstrap)
    return Results(config, handle.study, report, shown)


def results_in_width_units(shown: Results) -> Results:
    """The same run in width units (the reading and the queue speak in widths)."""
    if shown.units == "width":
        return shown
    handle = runs.fitted_study(shown.config.digest, shown.config.options,
                          st.session_state["run_dataset"])
    report = handle.report(shown.config.method, shown.config.alpha, "width",
                           shown.config.budget,
                           background_bootstrap=shown.config.background_bootstrap)
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
        **({"background redraws": str(shown.background_bootstrap)}
           if shown.background_bootstrap else {}),
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



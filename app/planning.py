"""What a run will do, said before Run: the target's fitness, the families that can run, the
background size used, and whether the explanation falls to brute-force masking (and its cost).

Everything is read from the data and from core's own components: whether masking has a fast
path is asked of a small model fitted by core (`has_fast_path`), not of a table kept here.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from cpdecomp import FAMILIES, build_design, fit_system, split_rows
from cpdecomp.app import targets
from cpdecomp.app.sources import Dataset, source_table
from cpdecomp.core.attribution import METHODS
from cpdecomp.core.data import target_values
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.games.masking import MaskingPath, has_fast_path
from cpdecomp.core.models import Component, model_kind
from cpdecomp.core.system import system_from_models
from cpdecomp.core.workflow import FAST_BACKGROUND, SLOW_BACKGROUND, StudyOptions

FEW_VALUES = 10
"""A target with fewer distinct values than this is a count or a grade more than a measure."""

# --- the target ---------------------------------------------------------------------------

# One guesser for every source (a table, separate files, a table with model files): app.targets.
choose_target = targets.choose_target
looks_like_id = targets.looks_like_id


def target_note(values: np.ndarray, target: str) -> str | None:
    """A warning for a target that is a yes/no flag or has few distinct values, else None."""
    known = values[~np.isnan(values)]
    distinct = np.unique(known)
    if len(distinct) == 2:
        return (f"The target {target!r} has only two values: it is a yes/no flag, not a "
                "measured outcome. An interval for it (e.g. [−0.3, 1.2]) is hard to read; "
                "choose a measured outcome if there is one.")
    if 2 < len(distinct) < FEW_VALUES:
        return (f"The target {target!r} has only {len(distinct)} distinct values. Intervals "
                "will be coarse; check that this is the outcome you mean.")
    return None


# --- the outcome's range -----------------------------------------------------------------


def inferred_lower_bound(values: np.ndarray) -> float | None:
    """0 when the training target is never negative (a count, a length of stay), else None."""
    known = values[~np.isnan(values)]
    return 0.0 if known.size and float(known.min()) >= 0 else None


@dataclass(frozen=True)
class OutcomeRange:
    """What the outcome can be, as the user stated it (or as inferred); None: unbounded."""

    low: float | None = None
    high: float | None = None
    unit: str = ""

    def clip(self, lower: np.ndarray, upper: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Display bounds clipped to the range, and which intervals were clipped."""
        lower, upper = np.asarray(lower, float), np.asarray(upper, float)
        low = -np.inf if self.low is None else self.low
        high = np.inf if self.high is None else self.high
        shown_lower, shown_upper = np.clip(lower, low, high), np.clip(upper, low, high)
        clipped = (shown_lower != lower) | (shown_upper != upper)
        return shown_lower, shown_upper, clipped

    def describe(self) -> str:
        if self.low is not None and self.high is not None:
            return f"between {self.low:g} and {self.high:g}"
        if self.low is not None:
            return f"never below {self.low:g}"
        if self.high is not None:
            return f"never above {self.high:g}"
        return "any value"


# --- families -----------------------------------------------------------------------------


def families_that_run(values: np.ndarray) -> tuple[list[str], str | None]:
    """The families this target allows, and why any are left out (None when all run)."""
    known = values[~np.isnan(values)]
    not_positive = int((known <= 0).sum())
    if not_positive == 0:
        return list(FAMILIES), None
    offered = [name for name in FAMILIES if name != "gamma"]
    return offered, (f"The gamma family is not offered: {not_positive:,} of {known.size:,} rows "
                     "have a target of 0 or below, and it needs a positive target. "
                     f"These families work: {', '.join(offered)}.")


# --- the masking path and the background ------------------------------------------------


@dataclass(frozen=True)
class MaskingPlan:
    """How features will be removed for a (model, family) pair, measured on a small fit."""

    fast: bool
    rows_per_second: float
    """Brute-force model rows per second, measured on the probe's slow components."""
    slow_components: int
    has_link: bool = False
    """A component predicts through a log link (masked on its log scale unless 'response')."""
    slow_names: tuple[str, ...] = ()
    """The components masked by brute force (f, sigma, lo, hi), for the warning."""


PROBE_ROWS = 60


@st.cache_resource(show_spinner=False, max_entries=32)
def masking_plan(model: str, family: str, masking: MaskingPath = "auto") -> MaskingPlan:
    """Fit the pair on a small synthetic table and ask core whether masking has a fast path.

    The answer depends on the kind of each component (tree tables, a closed form) and on the
    masking (a model with a log link on its response scale is brute force), not on the data;
    the speed of a brute-force model row is measured on the same components.
    """
    rng = np.random.default_rng(0)
    x = rng.normal(size=(PROBE_ROWS, 3))
    y = np.exp(0.3 * x[:, 0]) + rng.uniform(0.5, 1.0, PROBE_ROWS)  # positive, for gamma
    table = pd.DataFrame(x, columns=["a", "b", "c"])
    system = fit_system(table, y, family=family, model=model, seed=0)
    # The point model rides along with the components (gamma's f is the point model itself).
    components = {name: c for name, c in system.components.items()}
    if all(c is not system.point for c in components.values()):
        components["f"] = system.point
    return _slow_plan(components, masking, rng.normal(size=(20_000, 3)))


USER_PROBE_ROWS = 200
"""Rows of the table the user's own models are set up on to ask for their masking path."""
USER_SPEED_ROWS = 5_000
"""Rows a user's slow model predicts to measure its speed (its real rows, repeated)."""


def _slow_plan(components: Mapping[str, Component], masking: MaskingPath,
               rows: np.ndarray) -> MaskingPlan:
    """Ask core which components have a fast path; time the others on the rows."""
    # sigma's log link is part of its definition: it offers no response scale to choose
    linked = any(c.has_response_scale for c in components.values())
    slow = {name: c for name, c in components.items() if not has_fast_path(c, masking)}
    if not slow:
        return MaskingPlan(True, float("inf"), 0, linked)
    start = time.perf_counter()
    for component in slow.values():
        component.predict(rows)
    elapsed = max(time.perf_counter() - start, 1e-6)
    return MaskingPlan(False, len(slow) * len(rows) / elapsed, len(slow), linked,
                       tuple(slow))


@st.cache_resource(show_spinner=False, max_entries=16)
def user_masking_plan(digest: str, options: StudyOptions, _dataset: Dataset) -> MaskingPlan:
    """The masking path of the user's own models, read from the models themselves: they are
    set up on a few rows of the table and core is asked whether each has a fast path (a
    Pipeline one-hot encoding integer codes has one; one with a transformer core cannot read
    does not), and a slow one's speed is measured on the table's own rows. `_dataset` is not
    hashed: the digest stands for its content."""
    models = _dataset.models or {}
    table = source_table(_dataset)
    target = options.target
    y = target_values(table, target)
    labelled = table[~np.isnan(y)].head(USER_PROBE_ROWS)
    features = options.features or _dataset.model_features or tuple(
        c for c in _dataset.columns if c not in (target, options.id_column))
    with warnings.catch_warnings():  # a fitted sigma says so; the run says it again
        warnings.simplefilter("ignore", UserWarning)
        fitted = system_from_models(options.family, models, labelled, target=target,
                                    features=list(features), seed=options.seed)
    components = {name: c for name, c in fitted.components.items()}
    components.setdefault("f", fitted.point)
    repeats = -(-USER_SPEED_ROWS // max(len(fitted.training_rows), 1))
    rows = np.tile(fitted.training_rows, (repeats, 1))[:USER_SPEED_ROWS]
    return _slow_plan(components, options.masking, rows)


def run_plan(dataset: Dataset | None, options: StudyOptions) -> MaskingPlan:
    """The plan of the run's real models: the user's own when they brought files (a small
    built-in fit says nothing about them), else the built-in model's."""
    if dataset is not None and dataset.models:
        try:
            return user_masking_plan(dataset.digest, options, dataset)
        except CpdecompError:
            pass  # the run itself refuses these models, with the message
    return masking_plan(options.model, options.family, options.masking)


def has_link(model: str, family: str, user_models: Mapping[str, object] | None) -> bool:
    """Whether a component of the run predicts through a log link (the gamma family's
    built-in models, or a Poisson, gamma or Tweedie model brought by the user), so that where
    a left-out feature is averaged (log or response scale) is a choice."""
    if user_models:
        return any(model_kind(m).link(m) is not None for m in user_models.values())
    return masking_plan(model, family).has_link


def split_sizes(n_labelled: int, options: StudyOptions) -> tuple[int, int, int]:
    """Training, calibration and held-out rows of the seeded split core will make."""
    parts = split_rows(n_labelled, options.split, options.seed)
    return len(parts[0]), len(parts[1]), len(parts[2])


def background_size(options: StudyOptions, n_train: int, fast: bool) -> int:
    """The background rows a run will use: the chosen size, or core's automatic one, at most
    the training rows (core uses them all when there are fewer)."""
    chosen = options.background
    if chosen is None:
        chosen = FAST_BACKGROUND if fast else SLOW_BACKGROUND
    return min(chosen, n_train)


DESIGN_CELLS_TO_COUNT = 20_000_000
"""Largest design (coalitions × features, a byte each) the budget check builds to count its
coalitions; above it the method's upper bound is the count. The bound is within 7 % of the
count at d ≥ 20, where such designs arise (tests/test_coalition_bounds.py)."""


def coalition_count(method: str, n_features: int, budget: int | None, seed: int) -> int:
    """Feature combinations the method will evaluate, without building a design too large to
    hold (a 100,000-permutation budget on 100 features would need about 1 GB). Raises the
    method's own refusal (exact Shapley past 16 features, a budget below its minimum)."""
    most = METHODS[method].max_players
    if most is None or n_features <= most:
        bound = METHODS[method].coalitions_at_most(n_features, budget)
        if bound * n_features > DESIGN_CELLS_TO_COUNT:
            return bound
    return len(build_design(method, n_features, budget, seed).coalitions)


def brute_force_seconds(plan: MaskingPlan, coalitions: int, n_rows: int,
                        background: int) -> float:
    """Expected seconds of brute-force masking: coalitions x explained rows x background
    model rows at the measured speed."""
    if plan.fast:
        return 0.0
    return coalitions * n_rows * background / plan.rows_per_second


REDRAW_SECONDS = 0.15
"""Seconds one redrawn background costs on a fast masking path before its game: building the
redraw's masking tables and the rest that does not grow with the game."""
REDRAW_CELL_SECONDS = 0.27e-6
"""And per feature combination x calibration row of its calibration game. Both fitted to two
runs on this project's 2-core machine (gbm, exact, 20 redraws, beside the dashboard's
calibration bootstrap): 0.18 s a redraw on diabetes (10 features, 110 calibration rows) and
0.73 s on actg175 (12 features, 535 calibration rows); the linear model took 0.11 s on
diabetes."""


def background_redraw_seconds(plan: MaskingPlan, coalitions: int, n_calibration: int,
                              background: int) -> float:
    """Expected seconds of one redrawn background: one more calibration game on it (with
    brute-force masking, coalitions x calibration rows x background model rows at the
    measured speed)."""
    cells = coalitions * n_calibration
    seconds = REDRAW_SECONDS + REDRAW_CELL_SECONDS * cells
    if plan.fast:
        return seconds
    return seconds + cells * background / plan.rows_per_second


def rounded_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"about {max(seconds, 1):.0f} s"
    if seconds < 3600:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"


def model_name(model: str, user_models: Mapping[str, object] | None = None) -> str:
    """How a run's model is named wherever the dashboard names it: the user's fitted models by
    their kind ("your model: XGBoost"; the built-in choice is then unused), else the built-in
    model's key ("gbm")."""
    if not user_models:
        return model
    from cpdecomp.core.models import model_kind

    kinds = list(dict.fromkeys(model_kind(m).label for m in user_models.values()))
    return ("your model: " if len(kinds) == 1 else "your models: ") + " + ".join(kinds)


# What each of a family's models predicts, in a clinician's words (the families name them f,
# sigma, lo and hi).
COMPONENT_WORDS = {"f": "the prediction", "sigma": "the error's size",
                   "lo": "the lower end", "hi": "the upper end"}


def user_models_label(user_models: Mapping[str, object], slow: Sequence[str]) -> str:
    """The user's slow models, named for the warning: "Your model for the prediction
    (scikit-learn Pipeline)"."""
    from cpdecomp.core.models import model_kind

    def words(name: str) -> str:
        return COMPONENT_WORDS.get(name, name)

    named = [f"{words(name)} ({model_kind(user_models[name]).label})" for name in slow
             if name in user_models]
    fitted = [words(name) for name in slow if name not in user_models]
    parts = []
    if named:
        parts.append(("Your model for " if len(named) == 1 else "Your models for ")
                     + " and ".join(named))
    if fitted:
        parts.append(("the model for " if len(fitted) == 1 else "the models for ")
                     + " and ".join(fitted) + " fitted here")
    return " and ".join(parts) if parts else "Your model"


def run_model_name() -> str:
    """model_name for the last run (its dataset carries the user's models, if any)."""
    run = st.session_state.get("last_run")
    if run is None:
        return ""
    dataset = st.session_state.get("run_dataset")
    return model_name(run.options.model, getattr(dataset, "models", None))

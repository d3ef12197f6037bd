"""Recalibration, explained: one fitted system, two or more calibration sets, feature by feature.

    comparison = compare_calibrations(fitted, {"site A": (table_a, y_a),
                                               "site B": (table_b, y_b)}, patients)
    comparison.to_frame()      # one row per (patient, feature, set)

A model trained elsewhere is recalibrated on a hospital's own patients, and its intervals get
wider or narrower: why? The fitted components, the background and the coalitions stay the
same, so only the calibration game moves (method page §4: v_C depends on the calibration set
alone, v_I on the patient alone). For every patient and feature this gives φ_C under each set,
the change Δφ_C = φ_C(set) − φ_C(reference) with a percentile interval from resampling both
sets independently (each set its own bootstrap stream), and φ_I, which a calibration set cannot
move where the family separates:

* in the separating units (log units for the log-scale families, width units for the identity
  ones) φ_I is the same array under every set, bit for bit, and Σ_j Δφ_C,j alone is the change
  of T(width) − T(base width): the whole change of the width comes through φ_C;
* in width units of a log-scale family every part is its log-unit part times the set's own
  logarithmic-mean factor L = (U − U_∅)/(ln U − ln U_∅) (method page §6). Under another set
  the width U and the featureless width U_∅ both move (by the ratios of q̂ and of the
  featureless quantile, which differ), so φ_I in width units changes by L_B(x)/L_A(x): a change
  of scale, not of the patient, and not simply q̂_B/q̂_A.

The identities Σ_j Δφ_T,j = (U_B − U_∅,B) − (U_A − U_∅,A) (chosen units) and, in the
separating units, the same for Σ_j Δφ_C,j hold for the efficient methods and are asserted;
for Banzhaf and leave-one-out the gaps are reported, not asserted. The coverage of each set's
intervals on the other sets' rows (and on the patients, where the outcome is known) is the
practical sign that a recalibration was needed.

Cost: one calibration game and one bootstrap per set; the instance game and the plain
components are evaluated once per chunk of patients, whatever the number of sets.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from cpdecomp.core.attribution import Design
from cpdecomp.core.conformal import alpha_fraction, conformal_rank, minimum_calibration_size
from cpdecomp.core.data import target_values
from cpdecomp.core.decomposition import (
    ADDITIVITY_TOLERANCE,
    AdditivityError,
    Decomposition,
    Units,
    calibration_interval,
    check_units,
    concatenate,
    in_units,
    logarithmic_mean_factor,
)
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.explainer import (
    BOOTSTRAP_LEVEL,
    CELLS_PER_CHUNK,
    Explainer,
    PatientGames,
    Progress,
)
from cpdecomp.core.games import MaskingPath
from cpdecomp.core.games.cache import GameCache
from cpdecomp.core.system import ConformalSystem, FittedSystem
from cpdecomp.core.typing import FloatArray

CALIBRATION_BOOTSTRAP = 200
"""Default replicates of each set behind the Δφ_C intervals (a re-weighting of the kept masked
scores: no model call)."""
MAX_SETS = 24
"""Most calibration sets one comparison takes: a column with more distinct values is not a
site or a period (split_calibration refuses it)."""
INSTANCE_NOTE = (
    "In width units a multiplicative family's instance-driven part is its log-unit part (the "
    "same under every calibration set) times the set's logarithmic-mean factor "
    "L = (width - base_width)/(ln width - ln base_width): between two sets it changes by "
    "L_B/L_A, which depends on both the width and the featureless width (not simply "
    "q_hat_B/q_hat_A). That is a change of scale, not of the patient.")

CalibrationRows = tuple[pd.DataFrame, ArrayLike]
"""A calibration set as a table with the feature columns and its targets."""


@dataclass(frozen=True, eq=False)
class SetResult:
    """One calibration set's intervals and attributions for the patients, and its change."""

    name: str
    reference: bool
    n_calibration: int
    q_hat: float
    rank: int
    base_width: float
    """The featureless pipeline's width under this set."""
    decomposition: Decomposition
    """In the comparison's units, with φ_C's own bootstrap interval (calibration_low/high)."""
    lower: FloatArray
    upper: FloatArray
    change: FloatArray
    """(n_patients, n_players) Δφ_C = φ_C(this set) − φ_C(reference); 0 for the reference."""
    change_low: FloatArray
    """Lower end of Δφ_C's interval; NaN for the reference (and without a bootstrap)."""
    change_high: FloatArray

    @property
    def width(self) -> FloatArray:
        return self.upper - self.lower

    @property
    def change_holds_zero(self) -> np.ndarray:
        """True where Δφ_C's interval holds 0: the change is within the two sets' noise.
        False for the reference (no interval) and without a bootstrap."""
        return (self.change_low <= 0) & (self.change_high >= 0)

    @property
    def log_mean_factor(self) -> FloatArray | None:
        """(n_patients,) L = (U − U_∅)/(ln U − ln U_∅) under this set, the factor from log to
        width units, on a log-scale family; None on an identity family."""
        d = self.decomposition
        if d.scale != "log":
            return None
        return logarithmic_mean_factor(np.exp(d.full_value), float(np.exp(d.empty_value)))


@dataclass(frozen=True, eq=False)
class CohortChange:
    """The cohort's mean Δφ_C per player and its interval, for one set against the reference.

    On the additive scale Δφ_C is one vector for every patient and this is it; in width units
    of a log family the mean over patients of L_set·φ_C(set) − L_ref·φ_C(ref), whose interval
    comes from the same replicates (the mean is linear in them)."""

    change: FloatArray
    low: FloatArray
    high: FloatArray

    @property
    def holds_zero(self) -> np.ndarray:
        return (self.low <= 0) & (self.high >= 0)


@dataclass(frozen=True, eq=False)
class Comparison:
    """Two or more calibration sets of one fitted system, compared on the same patients."""

    sets: tuple[SetResult, ...]
    reference: str
    players: tuple[str, ...]
    """The attributions' names: features, or groups of them."""
    units: Units
    separating_units: Units
    """log on the log-scale families, width on the identity ones: φ_I is the same there."""
    family: str
    method: str
    budget: int | None
    alpha: float
    level: float
    calibration_bootstrap: int
    seed: int
    background_size: int
    n_evaluations: int
    efficient: bool
    patient_ids: list
    feature_values: pd.DataFrame
    targets: np.ndarray | None
    prediction: FloatArray
    cohort: dict[str, CohortChange]
    """Per set, the cohort's mean Δφ_C and its interval."""
    coverage: pd.DataFrame
    """Per (intervals of one set, rows of another set or the patients): n, covered, rate."""
    identity: dict
    """The identities' largest gaps (see module docstring) and whether φ_I is identical."""
    warnings: tuple[str, ...] = ()
    context: Mapping[str, object] = field(default_factory=dict)
    """What the caller adds to `meta` (a study's model, target and training rows)."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.sets)

    def set(self, name: str) -> SetResult:
        """The result of the set called `name`."""
        for result in self.sets:
            if result.name == name:
                return result
        raise KeyError(name)

    @property
    def n_patients(self) -> int:
        return len(self.prediction)

    @property
    def meta(self) -> dict:
        """The run's description, the sets, the coverage table and the identity check."""
        return {
            "family": self.family, **self.context, "method": self.method, "budget": self.budget,
            "alpha": self.alpha, "scale": self.units, "separating_scale": self.separating_units,
            "seed": self.seed, "background": self.background_size,
            "n_evaluations": self.n_evaluations, "efficient": self.efficient,
            "calibration_bootstrap": self.calibration_bootstrap, "calibration_level": self.level,
            "reference": self.reference, "features": list(self.players),
            "sets": [{"name": s.name, "reference": s.reference, "n_calibration": s.n_calibration,
                      "conformal_rank": s.rank, "q_hat": s.q_hat, "base_width": s.base_width,
                      "median_width": float(np.median(s.width))} for s in self.sets],
            "coverage": self.coverage.to_dict(orient="records"),
            "identity": dict(self.identity),
            "instance_note": INSTANCE_NOTE if self.units == "width"
            and self.separating_units == "log" else None,
            "warnings": list(self.warnings),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per (patient, feature, set), patient by patient, feature by feature."""
        n_sets, (n_patients, n_players) = len(self.sets), self.sets[0].change.shape

        def per_cell(arrays: Sequence[FloatArray]) -> np.ndarray:
            # (sets, patients, players) -> patient-major, then player, then set
            return np.stack(arrays).transpose(1, 2, 0).ravel()

        def per_patient(arrays: Sequence[FloatArray]) -> np.ndarray:
            return per_cell([np.repeat(np.asarray(a)[:, None], n_players, axis=1)
                             for a in arrays])

        def nan_if_none(values: FloatArray | None, like: FloatArray) -> FloatArray:
            return np.full(like.shape, np.nan) if values is None else values

        cells = n_patients * n_players * n_sets
        d = [s.decomposition for s in self.sets]
        ids = np.empty(n_patients, dtype=object)
        ids[:] = list(self.patient_ids)
        frame = pd.DataFrame({
            "patient_id": np.repeat(ids, n_players * n_sets),
            "feature": np.tile(np.repeat(np.array(self.players, dtype=object), n_sets),
                               n_patients),
            "feature_value": np.repeat(self.feature_values.to_numpy(dtype=object).ravel(),
                                       n_sets),
            "set": np.tile(np.array(self.names, dtype=object), n_patients * n_players),
            "reference": np.tile([s.reference for s in self.sets], n_patients * n_players),
            "calibration": per_cell([x.calibration for x in d]),
            "calibration_low": per_cell([nan_if_none(x.calibration_low, x.calibration)
                                         for x in d]),
            "calibration_high": per_cell([nan_if_none(x.calibration_high, x.calibration)
                                          for x in d]),
            "calibration_change": per_cell([s.change for s in self.sets]),
            "calibration_change_low": per_cell([s.change_low for s in self.sets]),
            "calibration_change_high": per_cell([s.change_high for s in self.sets]),
            "calibration_change_holds_zero": per_cell([s.change_holds_zero for s in self.sets]),
            "instance": per_cell([x.instance for x in d]),
            "total": per_cell([x.total for x in d]),
            "prediction": per_patient([self.prediction] * n_sets),
            "lower": per_patient([s.lower for s in self.sets]),
            "upper": per_patient([s.upper for s in self.sets]),
            "width": per_patient([s.width for s in self.sets]),
            "base_width": np.tile([s.base_width for s in self.sets], n_patients * n_players),
            "q_hat": np.tile([s.q_hat for s in self.sets], n_patients * n_players),
        })
        factors = [s.log_mean_factor for s in self.sets]
        if self.units == "width" and all(f is not None for f in factors):
            frame["log_mean_factor"] = per_patient(factors)  # type: ignore[arg-type]
        if self.targets is not None:
            frame["y"] = per_patient([self.targets] * n_sets)
        assert len(frame) == cells
        return frame


def compare_calibrations(
    fitted: FittedSystem, sets: Mapping[str, CalibrationRows | ConformalSystem],
    patients: pd.DataFrame, *, reference: str | None = None, method: str = "exact",
    alpha: float = 0.1, units: Units = "width", budget: int | None = None,
    groups: Sequence[Sequence[str]] | None = None,
    calibration_bootstrap: int = CALIBRATION_BOOTSTRAP, level: float = BOOTSTRAP_LEVEL,
    background_size: int = 64, seed: int = 0, masking: MaskingPath = "auto",
    explainer: Explainer | None = None, cache: GameCache | None = None,
    patient_ids: Sequence | None = None, patient_targets: ArrayLike | None = None,
    progress: Progress | None = None, chunk_size: int | None = None,
    warnings: Sequence[str] = (),
) -> Comparison:
    """Compare calibration sets of one fitted system on the same patients, feature by feature.

    sets: name -> (table with the feature columns, targets), or a ConformalSystem of `fitted`;
    at least two, in the order they are reported. reference: the set the others are compared
    with (default: the first). explainer: an Explainer of `fitted` whose background, masking
    tables and cache the sets share (a set that is its own calibration set reuses its games);
    without one, a background of `background_size` training rows is drawn with `seed`.
    calibration_bootstrap: replicates of each set behind φ_C's and Δφ_C's intervals (0: none;
    the reference resamples on the explainer's stream, so its own interval is `explain`'s,
    the others each on their own). patient_ids / patient_targets: the patients' names and
    observed outcomes (for the coverage on the patients), when known.
    """
    names = list(sets)
    if len(names) < 2:
        raise CpdecompError(f"a comparison needs at least two calibration sets, got {len(names)}")
    if len(names) > MAX_SETS:
        raise CpdecompError(f"{len(names)} calibration sets are too many to compare at once; "
                            f"at most {MAX_SETS}")
    reference = names[0] if reference is None else str(reference)
    if reference not in names:
        raise CpdecompError(f"there is no calibration set {reference!r} to use as the "
                            f"reference{_set_hint(reference, names)}")
    check_units(fitted.family.scale, units, fitted.family.name)
    alpha = float(alpha_fraction(alpha))
    if calibration_bootstrap < 0 or calibration_bootstrap == 1:
        raise CpdecompError("the calibration bootstrap needs 0 (none) or at least 2 replicates")
    if not 0 < level < 1:
        raise CpdecompError(f"the interval level must lie strictly between 0 and 1, not {level}")
    systems = {name: _conformalized(fitted, name, value, alpha) for name, value in sets.items()}
    if explainer is None:
        explainer = Explainer(systems[reference], background_size=background_size, seed=seed,
                              masking=masking, cache=cache)
    elif explainer.system.fitted is not fitted:
        raise ValueError("the explainer belongs to another fitted system")
    explainers = {name: explainer if system is explainer.system
                  else explainer.with_calibration(system) for name, system in systems.items()}
    players = explainer.player_groups(groups)
    design = explainer.design(method, budget, players)
    separating: Units = "log" if fitted.family.scale == "log" else "width"
    order = [reference, *(n for n in names if n != reference)]
    streams = {name: stream for stream, name in enumerate(order)}
    games: dict[str, PatientGames] = {}
    replicates: dict[str, FloatArray] = {}
    for name in order:
        games[name], replicates[name] = _set_games(
            explainers[name], name, method, alpha, separating, budget, players,
            calibration_bootstrap, level, streams[name])
    rows = fitted.encode(patients)
    if len(rows) == 0:
        raise CpdecompError("there are no patients to explain")
    change_replicates = {name: _change_replicates(design, replicates[name], replicates[reference])
                         for name in names if name != reference and calibration_bootstrap}
    parts = _explain_patients(games, reference, rows, units, separating, change_replicates, level,
                              progress, chunk_size)
    results = _results(games, systems, parts, reference)
    targets = None if patient_targets is None else np.asarray(patient_targets, dtype=float)
    if targets is not None and len(targets) != len(rows):
        raise ValueError("patient_targets needs one value per patient")
    first = parts[reference]
    return Comparison(
        sets=tuple(results[name] for name in names), reference=reference,
        players=explainer.player_names(players), units=units, separating_units=separating,
        family=fitted.family.name, method=method, budget=design.budget, alpha=alpha,
        level=level, calibration_bootstrap=calibration_bootstrap, seed=explainer.seed,
        background_size=len(explainer.background), n_evaluations=len(design.coalitions),
        efficient=design.efficient,
        patient_ids=list(range(len(rows))) if patient_ids is None else list(patient_ids),
        feature_values=explainer.player_values(patients, players), targets=targets,
        prediction=first.prediction,
        cohort=_cohort_changes(games, results, change_replicates, reference, units,
                               separating, level),
        coverage=coverage_table(systems, results, alpha, targets),
        identity=_identity(parts, reference, design.efficient),
        warnings=tuple(warnings),
    )


def split_calibration(table: pd.DataFrame, by: str, target: str, name: str = "{value}"
                      ) -> tuple[dict[str, CalibrationRows], list[str]]:
    """Calibration rows split into sets by the values of one column (a site, a period).

    Sets are named by the values (`name` formats them: "{column} {value}" reads "site B"), in
    sorted order (numbers as numbers), so a monitoring job's first period comes first; rows
    without a value of `by`, or without a target, are left out (said in the warnings).
    """
    if by not in table.columns:
        raise CpdecompError(f"the calibration rows have no column {by!r} to split them by"
                            + _set_hint(by, [str(c) for c in table.columns], "column"))
    if by == target:
        raise CpdecompError(f"the calibration rows cannot be split by the target {target!r}")
    if target not in table.columns:
        raise CpdecompError(f"the calibration rows have no target column {target!r}")
    column = table[by]
    notes = []
    missing = column.isna().to_numpy()
    if missing.any():
        notes.append(f"{int(missing.sum())} calibration rows have no value of {by!r} and are "
                     "left out of the comparison")
    y = target_values(table, target)
    unlabelled = np.isnan(y) & ~missing
    if unlabelled.any():
        notes.append(f"{int(unlabelled.sum())} calibration rows have no target value and are "
                     "left out of the comparison")
    keep = ~missing & ~np.isnan(y)
    values = column[keep]
    distinct = pd.unique(values)
    if len(distinct) > MAX_SETS:
        raise CpdecompError(f"the column {by!r} has {len(distinct)} distinct values in the "
                            f"calibration rows; splitting them needs a column of a few groups "
                            f"(at most {MAX_SETS}), such as a site or a period")
    if len(distinct) < 2:
        raise CpdecompError(f"the calibration rows have {len(distinct)} value of {by!r}: "
                            "there is nothing to compare")
    labels = {name.format(column=by, value=_label(v)): v
              for v in sorted(distinct, key=_sort_key)}
    if len(labels) != len(distinct):
        raise CpdecompError(f"two values of {by!r} have the same name as text; rename them")
    out: dict[str, CalibrationRows] = {}
    for label, value in labels.items():
        chosen = keep & (column == value).to_numpy()
        out[label] = (table[chosen], y[chosen])
    return out, notes


def labelled_rows(table: pd.DataFrame, target: str, name: str
                  ) -> tuple[CalibrationRows, list[str]]:
    """A calibration set given as a table with the target column: its rows with a target
    value (the others are left out, said in the notes), refused by the set's name."""
    if target not in table.columns:
        raise CpdecompError(f"calibration set {name!r} has no target column {target!r}")
    y = target_values(table, target)
    keep = ~np.isnan(y)
    if not keep.any():
        raise CpdecompError(f"calibration set {name!r} has no target values")
    notes = [] if keep.all() else [
        f"{int((~keep).sum())} rows of calibration set {name!r} have no target value and are "
        "left out of it"]
    return (table[keep], y[keep]), notes


def coverage_table(systems: Mapping[str, ConformalSystem], results: Mapping[str, SetResult],
                   alpha: float, targets: np.ndarray | None) -> pd.DataFrame:
    """Each set's intervals on every other set's calibration rows, and on the patients whose
    outcome is known: rows with the outcome, how many the intervals hold, and the rate."""
    records = []
    for name, system in systems.items():
        for other, rows in systems.items():
            if other == name:
                continue  # a set's own rows hold ≥ 1 − α of its intervals by construction
            lower, upper = system.interval_at_rows(rows.calibration_rows, alpha)
            records.append(_coverage_record(name, other, rows.calibration_targets, lower, upper))
        if targets is not None:
            known = np.isfinite(targets)
            if known.any():
                result = results[name]
                records.append(_coverage_record(name, "patients", targets[known],
                                                result.lower[known], result.upper[known]))
    return pd.DataFrame(records, columns=["intervals", "rows", "n", "covered", "rate"])


def _coverage_record(intervals: str, rows: str, y: FloatArray, lower: FloatArray,
                     upper: FloatArray) -> dict:
    covered = int(np.sum((y >= lower) & (y <= upper)))
    return {"intervals": intervals, "rows": rows, "n": len(y), "covered": covered,
            "rate": covered / len(y) if len(y) else math.nan}


def _conformalized(fitted: FittedSystem, name: str, value: CalibrationRows | ConformalSystem,
                   alpha: float) -> ConformalSystem:
    """The set as a conformal system of `fitted`, refused by name when it cannot be one."""
    if isinstance(value, ConformalSystem):
        if value.fitted is not fitted:
            raise ValueError(f"calibration set {name!r} belongs to another fitted system")
        system = value
    else:
        table, targets = value
        for column in fitted.feature_names:
            if column not in table.columns:
                raise CpdecompError(f"calibration set {name!r} has no feature column {column!r}"
                                    " (every set needs the model's feature columns)")
        y = np.asarray(targets, dtype=float)
        if len(y) != len(table):
            raise CpdecompError(f"calibration set {name!r} has {len(table)} rows but "
                                f"{len(y)} targets")
        try:
            system = fitted.conformalize(table, y)
        except CpdecompError as error:
            raise CpdecompError(f"calibration set {name!r}: {error}", reason=error.reason
                                ) from None
    n = system.n_calibration
    try:
        conformal_rank(n, alpha)
    except CpdecompError:
        need = minimum_calibration_size(alpha)
        raise CpdecompError(
            f"calibration set {name!r} has {n} rows; alpha = {alpha:g} needs at least {need} "
            f"(n >= 1/alpha - 1): give it more rows or use a larger alpha") from None
    return system


def _set_games(explainer: Explainer, name: str, method: str, alpha: float, units: Units,
               budget: int | None, players, n_replicates: int, level: float, stream: int
               ) -> tuple[PatientGames, FloatArray]:
    """The set's patient games in the separating units, with φ_C's own interval from its
    stream of resamples, and the replicates' v_C (empty without a bootstrap)."""
    game = explainer.calibration_game(method, budget, players, keep_order=n_replicates > 0)
    games = explainer.patient_games(method, alpha, units, budget, players)
    if not n_replicates:
        return games, np.empty((0, len(game.coalitions)))
    values = game.bootstrap_values(alpha, n_replicates, seed=explainer.seed, stream=stream)
    try:
        low, high = calibration_interval(games.design, values, level)
    except ValueError:
        raise CpdecompError(f"calibration set {name!r}: too few of its resamples give a "
                            "usable calibration quantile; it needs more rows") from None
    return replace(games, calibration_interval=(low, high, level)), values


def _change_replicates(design: Design, values: FloatArray, reference: FloatArray
                       ) -> tuple[FloatArray, FloatArray]:
    """(φ_C of the set, φ_C of the reference) over paired replicates, on the family's scale.

    The sets are resampled independently, so any pairing of their replicates is a draw of
    the pair; replicates either set refused (NaN rows) are left out of both.
    """
    usable = np.isfinite(values).all(axis=1) & np.isfinite(reference).all(axis=1)
    if usable.sum() < 2:
        raise CpdecompError("too few resamples of the calibration sets give a usable quantile; "
                            "the sets need more rows")
    return design.apply(values[usable]), design.apply(reference[usable])


@dataclass(frozen=True, eq=False)
class _Part:
    """One set's results for all the patients, in the chosen and the separating units."""

    decomposition: Decomposition
    separated: Decomposition
    prediction: FloatArray
    lower: FloatArray
    upper: FloatArray
    change_low: FloatArray
    change_high: FloatArray


def _explain_patients(games: Mapping[str, PatientGames], reference: str, rows: FloatArray,
                      units: Units, separating: Units,
                      change_replicates: Mapping[str, tuple[FloatArray, FloatArray]],
                      level: float, progress: Progress | None, chunk_size: int | None
                      ) -> dict[str, _Part]:
    """Every set's decomposition of the patients, chunk by chunk: the instance game and the
    plain components once per chunk, then one decomposition per set."""
    first = games[reference]
    if chunk_size is None:
        chunk_size = max(1, CELLS_PER_CHUNK // len(first.design.coalitions))
    pieces: dict[str, list[tuple]] = {name: [] for name in games}
    for start in range(0, len(rows), chunk_size):
        shared = first.instance_part(rows[start:start + chunk_size])
        chunk: dict[str, tuple] = {}
        for name, set_games in games.items():
            separated, prediction, lower, upper = set_games.explain_part(shared)
            chunk[name] = (in_units(separated, units), separated, prediction, lower, upper)
        for name in games:
            decomposition = chunk[name][0]
            if name in change_replicates:
                low, high = _change_interval(change_replicates[name], decomposition,
                                             chunk[reference][0], units, separating, level)
            else:
                low = high = np.full(decomposition.calibration.shape, np.nan)
            pieces[name].append((*chunk[name], low, high))
        if progress is not None:
            progress(min(start + chunk_size, len(rows)), len(rows))
    return {name: _Part(concatenate([p[0] for p in parts]), concatenate([p[1] for p in parts]),
                        *(np.concatenate([p[i] for p in parts]) for i in range(2, 7)))
            for name, parts in pieces.items()}


def _factors(decomposition: Decomposition, units: Units, separating: Units) -> FloatArray | None:
    """Per patient, the factor from the separating units to the chosen ones (None: 1)."""
    if units == separating:
        return None
    return logarithmic_mean_factor(np.exp(decomposition.full_value),
                                   float(np.exp(decomposition.empty_value)))


def _change_interval(replicates: tuple[FloatArray, FloatArray], decomposition: Decomposition,
                     reference: Decomposition, units: Units, separating: Units, level: float
                     ) -> tuple[FloatArray, FloatArray]:
    """Δφ_C's percentile interval per (patient, player) of a chunk, in the chosen units.

    In the separating units Δφ_C is one vector and so is its interval; in width units of a
    log family each replicate is L_set(x)·φ*_set − L_ref(x)·φ*_ref with the run's own factors
    (as φ_C's own interval is scaled), so the interval is per patient.
    """
    phi_set, phi_ref = replicates
    tail = (1 - level) / 2
    n_patients = len(decomposition.full_value)
    factor_set = _factors(decomposition, units, separating)
    factor_ref = _factors(reference, units, separating)
    if factor_set is None or factor_ref is None:
        low, high = np.quantile(phi_set - phi_ref, [tail, 1 - tail], axis=0)
        return np.tile(low, (n_patients, 1)), np.tile(high, (n_patients, 1))
    draws = (factor_set[None, :, None] * phi_set[:, None, :]
             - factor_ref[None, :, None] * phi_ref[:, None, :])
    low, high = np.quantile(draws, [tail, 1 - tail], axis=0)
    return low, high


def _results(games: Mapping[str, PatientGames], systems: Mapping[str, ConformalSystem],
             parts: Mapping[str, _Part], reference: str) -> dict[str, SetResult]:
    base = parts[reference].decomposition
    out = {}
    for name, part in parts.items():
        d = part.decomposition
        scale = d.scale
        out[name] = SetResult(
            name=name, reference=name == reference, n_calibration=systems[name].n_calibration,
            q_hat=games[name].q_hat, rank=games[name].rank,
            base_width=float(np.exp(d.empty_value) if scale == "log" else d.empty_value),
            decomposition=d, lower=part.lower, upper=part.upper,
            change=d.calibration - base.calibration, change_low=part.change_low,
            change_high=part.change_high)
    return out


def _cohort_changes(games: Mapping[str, PatientGames], results: Mapping[str, SetResult],
                    change_replicates: Mapping[str, tuple[FloatArray, FloatArray]],
                    reference: str, units: Units, separating: Units, level: float
                    ) -> dict[str, CohortChange]:
    tail = (1 - level) / 2
    ref = results[reference].decomposition
    out = {}
    for name, result in results.items():
        mean = result.change.mean(axis=0)
        if name not in change_replicates:
            nan = np.full(mean.shape, np.nan)
            out[name] = CohortChange(mean, nan, nan.copy())
            continue
        phi_set, phi_ref = change_replicates[name]
        factor_set = _factors(result.decomposition, units, separating)
        factor_ref = _factors(ref, units, separating)
        # The mean over patients of L·φ* is mean(L)·φ*: one number per replicate and player.
        draws = ((1.0 if factor_set is None else float(factor_set.mean())) * phi_set
                 - (1.0 if factor_ref is None else float(factor_ref.mean())) * phi_ref)
        low, high = np.quantile(draws, [tail, 1 - tail], axis=0)
        out[name] = CohortChange(mean, low, high)
    return out


def _identity(parts: Mapping[str, _Part], reference: str, efficient: bool) -> dict:
    """The largest gaps of the comparison's identities over the sets and patients.

    total_change_gap: |Σ_j Δφ_T,j − Δ(width − base width)| in the chosen units;
    calibration_change_gap: |Σ_j Δφ_C,j − Δ(T(width) − T(base width))| in the separating
    units; instance_change: |φ_I(set) − φ_I(reference)| there (0: identical). The first two
    need an efficient method; for Banzhaf and leave-one-out they are reported, not asserted.
    """
    ref = parts[reference]
    total = calibration = instance = 0.0
    identical = True
    widest = 0.0
    for name, part in parts.items():
        widest = max(widest, float(np.max(np.abs(part.upper - part.lower))))
        if name == reference:
            continue
        d, r = part.decomposition, ref.decomposition
        gap = _gap_in_units(d) - _gap_in_units(r)
        total = max(total, float(np.max(np.abs((d.total - r.total).sum(axis=1) - gap))))
        s, sr = part.separated, ref.separated
        log_gap = (s.full_value - s.empty_value) - (sr.full_value - sr.empty_value)
        calibration = max(calibration, float(np.max(np.abs(
            (s.calibration - sr.calibration).sum(axis=1) - log_gap))))
        instance = max(instance, float(np.max(np.abs(s.instance - sr.instance))))
        identical = identical and bool(np.array_equal(s.instance, sr.instance))
    if not identical:  # v_I does not involve the calibration set: a difference is a bug
        raise AdditivityError(f"the instance-driven parts differ between calibration sets by "
                              f"{instance:.3g} in the separating units")
    allowed = ADDITIVITY_TOLERANCE * max(widest, np.finfo(float).tiny)
    if efficient and max(total, calibration) > allowed:
        raise AdditivityError(f"the change identity is off by {max(total, calibration):.3g}, "
                              f"more than {ADDITIVITY_TOLERANCE:g} of the width")
    return {"efficient": efficient, "total_change_gap": total,
            "calibration_change_gap": calibration, "instance_change": instance,
            "instance_identical": identical}


def _gap_in_units(d: Decomposition) -> FloatArray:
    """width − base width in width units, T(width) − T(base width) in log units."""
    if d.units == "width" and d.scale == "log":
        return np.exp(d.full_value) - float(np.exp(d.empty_value))
    return d.full_value - d.empty_value


def _label(value: object) -> str:
    """A set's name from a value of the column it is split by (2024.0 reads 2024)."""
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _sort_key(value: object) -> tuple:
    if isinstance(value, int | float | np.integer | np.floating):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def _set_hint(name: str, names: Sequence[str], what: str = "set") -> str:
    by_case = {str(n).casefold(): n for n in names}  # 'site b' is a slip for 'Site B'
    close = difflib.get_close_matches(name.casefold(), list(by_case), n=1, cutoff=0.6)
    if close:
        return f" (did you mean {by_case[close[0]]!r}?)"
    if what == "set" and len(names) <= 12:
        return "; the sets are " + ", ".join(map(repr, names))
    return ""

"""The few end-to-end calls the command line and the dashboard make.

    study = prepare_study(table, StudyOptions(target="progression", id_column="patient_id"))
    report = study.explain(method="exact", alpha=0.1)

A study is data + split + fitted components + calibration set + background: everything that
costs model fits. Explaining under another alpha, method or unit reuses all of it.
"""

from __future__ import annotations

import warnings as python_warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from cpdecomp.core.attribution.groups import Groups
from cpdecomp.core.conformal import conformal_rank
from cpdecomp.core.coverage import coverage_by_width, undercoverage_warning, width_group_records
from cpdecomp.core.data import ColumnChoice, choose_columns, split_rows, target_values
from cpdecomp.core.decomposition import Units, check_units, in_units
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.explainer import (
    BOOTSTRAP_LEVEL,
    Explainer,
    Explanation,
    Progress,
    RunEstimate,
    join_explanations,
)
from cpdecomp.core.games.masking import MaskingPath, has_fast_path
from cpdecomp.core.interactions import Interactions
from cpdecomp.core.interop import report_frame, shap_explanations
from cpdecomp.core.recalibration import (
    CALIBRATION_BOOTSTRAP,
    CalibrationRows,
    Comparison,
    compare_calibrations,
    labelled_rows,
    split_calibration,
)
from cpdecomp.core.system import (
    ConformalSystem,
    brought_features,
    fit_system,
    system_from_models,
)
from cpdecomp.core.versions import library_versions

CORRELATION_WARNING = 0.7
FAST_BACKGROUND = 1000
"""With tree tables a large background is nearly free, and it is the calibration game's main
accuracy lever (performance page: φ_C off by 10-12 % at 200 rows, 3-9 % at 1000)."""
SLOW_BACKGROUND = 64
"""Brute force costs (coalitions × rows × background) model rows: keep it small there."""
SPLIT_STREAM = 0
OWN_SET = "calibration"
"""The name Study.compare gives the study's own calibration set."""


@dataclass(frozen=True)
class StudyOptions:
    """What fixes the fitted system: columns, family, model, background, seed, split."""

    target: str
    id_column: str | None = None
    features: tuple[str, ...] | None = None
    family: str = "normalized"
    model: str = "gbm"
    background: int | None = None
    """Background rows; None: FAST_BACKGROUND when every component has an exact fast path
    (tree tables or a closed form), else SLOW_BACKGROUND."""
    seed: int = 0
    split: tuple[float, float, float] = (0.5, 0.25, 0.25)
    quantile_alpha: float = 0.1
    masking: MaskingPath = "auto"
    """'auto' (closed form, tree tables, else brute force), 'tables' or 'brute'; or
    'response': models with a link averaged on the response scale (core.games.masking)."""


@dataclass(frozen=True, eq=False)
class Report:
    """An explanation with the patients' ids, raw feature values, targets and metadata."""

    explanation: Explanation
    patient_ids: list
    feature_values: pd.DataFrame
    targets: np.ndarray | None
    meta: dict

    def in_units(self, units: Units) -> Report:
        """The same report in width or log units (log families), with no game evaluated."""
        if units == self.explanation.decomposition.units:
            return self
        check_units(self.explanation.decomposition.scale, units, self.explanation.family)
        explanation = replace(self.explanation,
                              decomposition=in_units(self.explanation.decomposition, units))
        d = explanation.decomposition
        meta = {**self.meta, "scale": units, "additivity_error": d.additivity_error,
                "efficiency_error": d.efficiency_error}
        return replace(self, explanation=explanation, meta=meta)

    def to_shap(self) -> dict:
        """One shap.Explanation per view: {'calibration', 'instance', 'total'} (needs shap)."""
        return shap_explanations(self)

    def to_frame(self, layout: str = "long") -> pd.DataFrame:
        """The CLI's tidy columns (one row per patient and feature), or 'wide' (per patient)."""
        return report_frame(self, layout)  # type: ignore[arg-type]


@dataclass(eq=False)
class Study:
    """A conformal system ready to explain its patients, with cached games."""

    options: StudyOptions
    columns: ColumnChoice
    system: ConformalSystem
    explainer: Explainer
    patients: pd.DataFrame
    patient_rows: np.ndarray
    """The patients' encoded features, encoded once."""
    patient_ids: list
    patient_targets: np.ndarray | None
    n_train: int
    warnings: list[str] = field(default_factory=list)
    calibration_table: pd.DataFrame | None = None
    """The calibration rows as given (every column, the target's included): a column that is
    no feature, such as a site, can still split them (core.recalibration.split_calibration)."""

    def explain(self, method: str = "exact", alpha: float = 0.1, units: Units = "width",
                budget: int | None = None, rows: Sequence[int] | None = None, jobs: int = 1,
                progress: Progress | None = None,
                groups: Sequence[Sequence[str]] | None = None, calibration_bootstrap: int = 0,
                fixed_quantile: bool = False, background_bootstrap: int = 0) -> Report:
        """Explain all patients (or the given positions among them).

        `groups` lists features that move together as one player (e.g. [["sbp", "dbp"]]);
        features in no group stay players of their own. `calibration_bootstrap` replicates of
        the calibration set give φ_C an interval (0: none); `fixed_quantile` adds the Shapley
        values of the width at a fixed q̂ (what shap on a fitted conformal regressor gives);
        `background_bootstrap` backgrounds drawn afresh give φ_C a second interval, the
        background draw's share (0: none; each costs one calibration game).
        """
        parts = list(self.iter_explain(method, alpha, units, budget, rows, jobs, progress, groups,
                                       calibration_bootstrap, fixed_quantile,
                                       background_bootstrap))
        return parts[0] if len(parts) == 1 else join_reports(parts)

    def iter_explain(self, method: str = "exact", alpha: float = 0.1, units: Units = "width",
                     budget: int | None = None, rows: Sequence[int] | None = None, jobs: int = 1,
                     progress: Progress | None = None,
                     groups: Sequence[Sequence[str]] | None = None,
                     calibration_bootstrap: int = 0, fixed_quantile: bool = False,
                     background_bootstrap: int = 0) -> Iterator[Report]:
        """explain, one report per chunk of patients as each is done (for streamed output:
        memory then holds a chunk's results, not the cohort's). Each chunk's meta holds its
        own errors; `join_reports` (or a streaming writer) takes their maximum."""
        positions = np.arange(len(self.patients)) if rows is None else np.asarray(rows, dtype=int)
        players = self.player_groups(groups)
        explanations = self.explainer.iter_explain_rows(
            self.patient_rows[positions], method=method, alpha=alpha, units=units, budget=budget,
            jobs=jobs, progress=progress, groups=players,
            calibration_bootstrap=calibration_bootstrap, fixed_quantile=fixed_quantile,
            background_bootstrap=background_bootstrap,
        )
        start = 0
        for explanation in explanations:
            chunk = positions[start:start + len(explanation.width)]
            start += len(chunk)
            targets = None if self.patient_targets is None else self.patient_targets[chunk]
            yield Report(
                explanation=explanation,
                patient_ids=[self.patient_ids[i] for i in chunk],
                feature_values=self._player_values(self.patients.iloc[chunk], players),
                targets=targets,
                meta={**self._meta(explanation, units),
                      **coverage_meta([explanation], None if targets is None else [targets])},
            )

    def compare(self, against: Mapping[str, pd.DataFrame | ConformalSystem] | None = None, *,
                name: str = OWN_SET, by: str | None = None, by_name: str = "{value}",
                reference: str | None = None,
                method: str = "exact", alpha: float = 0.1, units: Units = "width",
                budget: int | None = None, groups: Sequence[Sequence[str]] | None = None,
                calibration_bootstrap: int = CALIBRATION_BOOTSTRAP,
                level: float = BOOTSTRAP_LEVEL, progress: Progress | None = None
                ) -> Comparison:
        """Compare calibration sets of this study's fitted system on its patients
        (core.recalibration): the study's own calibration set, called `name`, against each
        table of `against` (with the target column; name -> table), or, with `by`, the study's
        calibration rows split by that column's values (a site, a period), each set named by
        `by_name` ("{column} {value}" reads "site B"). The reference defaults to the first set:
        the study's own, or the first value of `by`.
        """
        notes: list[str] = []
        sets: dict[str, CalibrationRows | ConformalSystem] = {}
        if by is not None:
            if against:
                raise CpdecompError("compare the study's calibration rows split by a column, "
                                    "or against other sets, not both at once")
            if self.calibration_table is None:
                raise CpdecompError("this study keeps no calibration table to split")
            split, notes = split_calibration(self.calibration_table, by, self.columns.target,
                                             by_name)
            sets.update(split)
        else:
            sets[name] = self.system
            for other, table in (against or {}).items():
                if other in sets:
                    raise CpdecompError(f"two calibration sets are called {other!r}")
                if isinstance(table, ConformalSystem):
                    sets[other] = table
                    continue
                sets[other], more = labelled_rows(table, self.columns.target, other)
                notes += more
        comparison = compare_calibrations(
            self.system.fitted, sets, self.patients, reference=reference, method=method,
            alpha=alpha, units=units, budget=budget, groups=groups,
            calibration_bootstrap=calibration_bootstrap, level=level,
            explainer=self.explainer, patient_ids=self.patient_ids,
            patient_targets=self.patient_targets, progress=progress,
            warnings=[*self.warnings, *notes])
        return replace(comparison, context={"model": self.options.model,
                                            "target": self.columns.target,
                                            "n_train": self.n_train})

    def interactions(self, alpha: float = 0.1, index: str = "SII", units: Units = "width",
                     rows: Sequence[int] | None = None,
                     groups: Sequence[Sequence[str]] | None = None) -> Interactions:
        """Pairwise interaction values of the three games for all patients (or the given
        positions): "SII" (Shapley interaction index) or "k-SII" (order 2, efficient), from the
        exact lattice, so at most 16 features or groups. See core/interactions.py."""
        positions = np.arange(len(self.patients)) if rows is None else np.asarray(rows, dtype=int)
        result = self.explainer.interactions_rows(self.patient_rows[positions], alpha, index,
                                                  units, self.player_groups(groups))
        return replace(result, patient_ids=[self.patient_ids[i] for i in positions])

    def player_groups(self, groups: Sequence[Sequence[str]] | None) -> Groups | None:
        """Column indices of each player, from groups of feature names; None without groups."""
        return self.explainer.player_groups(groups)

    def estimate(self, method: str = "exact", budget: int | None = None,
                 groups: Sequence[Sequence[str]] | None = None,
                 background_bootstrap: int = 0, fixed_quantile: bool = False) -> RunEstimate:
        """What explaining every patient will cost (Explainer.estimate), before it starts."""
        return self.explainer.estimate(len(self.patients), method, budget,
                                       self.player_groups(groups), background_bootstrap,
                                       fixed_quantile)

    def _player_values(self, table: pd.DataFrame, players: Groups | None) -> pd.DataFrame:
        return self.explainer.player_values(table, players)

    def _meta(self, explanation: Explanation, units: Units) -> dict:
        d = explanation.decomposition
        return {
            "family": explanation.family,
            "model": self.options.model,
            "method": explanation.method,
            "budget": explanation.budget,
            "alpha": explanation.alpha,
            "scale": units,
            "seed": self.options.seed,
            "n_train": self.n_train,
            "n_calibration": explanation.n_calibration,
            "conformal_rank": explanation.rank,
            "q_hat": explanation.q_hat,
            "base_width": explanation.base_width,
            "background": explanation.background_size,
            "features": list(explanation.features),
            "target": self.columns.target,
            "additivity_error": d.additivity_error,
            "efficiency_error": d.efficiency_error,
            "masking_check_error": explanation.masking_check_error,
            "masking": self.options.masking,
            "link_scale": self.explainer.link_scale(),
            "calibration_bootstrap": explanation.calibration_bootstrap,
            "calibration_level": d.calibration_level,
            "background_bootstrap": explanation.background_bootstrap,
            "background_level": d.background_level,
            "background_batches": explanation.background_batches,
            "efficient": d.efficient,
            "sampled": d.total_se is not None,
            "n_evaluations": explanation.n_evaluations,
            "warnings": list(self.warnings),
            "versions": library_versions(),
        }


ERRORS = ("additivity_error", "efficiency_error")
"""Meta fields that are a maximum over patients: over chunks, the maximum of the chunks'."""


def joined_meta(metas: Sequence[dict], cohort: dict | None = None) -> dict:
    """The meta of a cohort explained in chunks: the first chunk's, with the errors maxed and
    `cohort`'s fields (coverage_meta of every chunk) in place of the first chunk's own."""
    return {**metas[0], **{key: max(m[key] for m in metas) for key in ERRORS},
            **(cohort or {})}


def coverage_meta(explanations: Sequence[Explanation],
                  targets: Sequence[np.ndarray | None] | None) -> dict:
    """Coverage by width group over the patients of all the chunks (core.coverage): a
    cohort's tenths, so never computed chunk by chunk."""
    tally = CohortTally()
    for e, y in zip(explanations, targets or [None] * len(explanations), strict=True):
        tally.add_intervals(e, y)
    return tally.coverage()


class CohortTally:
    """What a streaming writer keeps of each chunk for the cohort's meta: the intervals and
    targets (four numbers a patient), not the parts."""

    def __init__(self) -> None:
        self.metas: list[dict] = []
        self.intervals: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.targets: list[np.ndarray] | None = []
        self.alpha = 0.1

    def add_intervals(self, e: Explanation, targets: np.ndarray | None) -> None:
        self.intervals.append((e.width, e.lower, e.upper))
        self.alpha = e.alpha
        if targets is None or self.targets is None:
            self.targets = None
        else:
            self.targets.append(targets)

    def add(self, report: Report) -> None:
        self.metas.append(report.meta)
        self.add_intervals(report.explanation, report.targets)

    def coverage(self) -> dict:
        width, lower, upper = (np.concatenate(part) for part in zip(*self.intervals, strict=True))
        y = None if self.targets is None else np.concatenate(self.targets)
        groups = coverage_by_width(width, lower, upper, y)
        return {"coverage_by_width": width_group_records(groups),
                "coverage_by_width_warning": undercoverage_warning(groups, 1 - self.alpha)}

    def meta(self) -> dict:
        if not self.metas:
            raise CpdecompError("there are no patients to explain")
        return joined_meta(self.metas, self.coverage())


def join_reports(parts: Sequence[Report]) -> Report:
    """One report from chunks of one explanation, in order."""
    return Report(
        explanation=join_explanations([p.explanation for p in parts]),
        patient_ids=[i for p in parts for i in p.patient_ids],
        feature_values=pd.concat([p.feature_values for p in parts], ignore_index=True),
        targets=None if parts[0].targets is None else np.concatenate([p.targets for p in parts]),
        meta=joined_meta([p.meta for p in parts], coverage_meta(
            [p.explanation for p in parts],
            None if parts[0].targets is None else [p.targets for p in parts])),
    )


def _with_targets(table: pd.DataFrame, target: str, role: str) -> tuple[pd.DataFrame, np.ndarray]:
    if target not in table.columns:
        raise CpdecompError(f"the {role} file has no target column {target!r}")
    y = target_values(table, target)
    keep = ~np.isnan(y)
    if not keep.any():
        raise CpdecompError(f"the {role} rows have no target values")
    return table[keep], y[keep]


def prepare_study(data: pd.DataFrame, options: StudyOptions, train: pd.DataFrame | None = None,
                  calibration: pd.DataFrame | None = None, alpha: float | None = None,
                  models: Mapping[str, object] | None = None) -> Study:
    """Split (or take the given files), fit, conformalize and set up the explainer.

    With train and calibration tables, `data` holds only the patients to explain. Otherwise
    `data` is split (seeded); rows without a target cannot train or calibrate, so they join
    the patients to explain. With `models` (fitted models per component, reading the raw
    table: see system_from_models), nothing is fitted but what they leave out, and the
    training rows are the background pool.
    """
    prepared, patients = _prepare(data, options, train, calibration, alpha, models)
    study = prepared.study(patients, prepared.warnings)
    # The study's own ids and encoded rows: the table is encoded once.
    notes, _ = patient_warnings(prepared, [(study.patient_ids, study.patient_rows)])
    study.warnings = prepared.warnings + notes
    return study


def _prepare(data: pd.DataFrame, options: StudyOptions, train: pd.DataFrame | None,
             calibration: pd.DataFrame | None, alpha: float | None,
             models: Mapping[str, object] | None) -> tuple[_Prepared, pd.DataFrame]:
    """prepare_study up to its patients: the fitted system, and the rows to explain."""
    if (train is None) != (calibration is None):
        raise CpdecompError("give both --train and --calibration, or neither")
    data = data.reset_index(drop=True)  # row numbers are the patient ids when there is no id
    if models and options.features is None:
        # The models' own columns are the features: a table may hold others (the target, an
        # id, a column the models do not read), as the dashboard allows.
        own = brought_features(models, list((train if train is not None else data).columns))
        if own is not None:
            options = replace(options, features=own)
    columns = choose_columns(train if train is not None else data, options.target,
                             options.id_column, options.features)
    warnings: list[str] = []
    if train is not None and calibration is not None:
        for name, table in (("calibration", calibration), ("patients", data)):
            for column in columns.features:
                if column not in table.columns:
                    raise CpdecompError(f"the {name} file has no feature column {column!r}")
        if columns.id_column and columns.id_column not in data.columns:
            raise CpdecompError(f"the patients file has no id column {columns.id_column!r}")
        train_table, y_train = _with_targets(train, columns.target, "training")
        cal_table, y_cal = _with_targets(calibration, columns.target, "calibration")
        patients = data
    else:
        y_all = target_values(data, columns.target)
        labelled = np.flatnonzero(~np.isnan(y_all))
        unlabelled = np.flatnonzero(np.isnan(y_all))
        train_pos, cal_pos, test_pos = split_rows(len(labelled), options.split,
                                                  options.seed + SPLIT_STREAM)
        train_table, y_train = data.iloc[labelled[train_pos]], y_all[labelled[train_pos]]
        cal_table, y_cal = data.iloc[labelled[cal_pos]], y_all[labelled[cal_pos]]
        patient_positions = np.concatenate([labelled[test_pos], unlabelled])
        patients = data.iloc[patient_positions]
        if unlabelled.size:
            warnings.append(
                f"{unlabelled.size} rows without a target are explained, not used to fit"
            )
    if len(patients) == 0:
        raise CpdecompError("there are no patients to explain")
    if alpha is not None:
        conformal_rank(len(y_cal), alpha)  # an impossible alpha is refused before any fit
    if models:
        with python_warnings.catch_warnings():  # its warnings go to the report's warnings
            python_warnings.simplefilter("ignore", UserWarning)
            fitted = system_from_models(options.family, models, train_table.assign(
                **{columns.target: y_train}), target=columns.target, features=columns.features,
                seed=options.seed)
        options = replace(options, model=fitted.model)  # the report names the models given
    else:
        fitted = fit_system(train_table, y_train, columns.features, family=options.family,
                            model=options.model, seed=options.seed,
                            quantile_alpha=options.quantile_alpha)
    warnings += list(fitted.warnings)  # sigma at its floor, crossing quantile models, ...
    system = fitted.conformalize(cal_table, y_cal)
    background = options.background
    if background is None:
        fast = all(has_fast_path(c, options.masking) for c in system.fitted.components.values())
        background = FAST_BACKGROUND if fast else SLOW_BACKGROUND
    explainer = Explainer(system, background_size=background, seed=options.seed,
                          masking=options.masking)
    warnings += correlation_warnings(system.fitted.training_rows, columns.features)
    return _Prepared(options, columns, system, explainer, warnings, len(y_train),
                     cal_table.reset_index(drop=True)), patients


@dataclass(frozen=True, eq=False)
class _Prepared:
    """What a study is before its patients: the fitted system, its explainer and warnings."""

    options: StudyOptions
    columns: ColumnChoice
    system: ConformalSystem
    explainer: Explainer
    warnings: list[str]
    n_train: int
    calibration_table: pd.DataFrame | None = None

    def ids(self, patients: pd.DataFrame) -> list:
        """The id column's values, else the rows' positions in the file (their index)."""
        if self.columns.id_column:
            return patients[self.columns.id_column].tolist()
        return [int(i) for i in patients.index]

    def study(self, patients: pd.DataFrame, warnings: list[str]) -> Study:
        ids = self.ids(patients)
        target = self.columns.target
        y_patients = target_values(patients, target) if target in patients.columns else None
        patients = patients.reset_index(drop=True)
        return Study(self.options, self.columns, self.system, self.explainer, patients,
                     self.system.fitted.encode(patients), ids, y_patients,
                     n_train=self.n_train, warnings=warnings,
                     calibration_table=self.calibration_table)


def patient_warnings(prepared: _Prepared, parts: Iterable[tuple[list, np.ndarray]]
                     ) -> tuple[list[str], int]:
    """Warnings about the patients, over every part of them, each its (ids, encoded rows):
    repeated ids and sigma at its floor; and how many patients there are.

    Parts can be dropped as they are read, so this holds one part and a hash per id.
    """
    hashes: list[np.ndarray] = []
    at_floor = total = 0
    for ids, rows in parts:
        if prepared.columns.id_column:
            hashes.append(pd.util.hash_array(np.asarray([str(i) for i in ids], dtype=object)))
        at_floor += prepared.system.fitted.rows_at_sigma_floor(rows)
        total += len(rows)
    notes = []
    if hashes:
        every = np.concatenate(hashes)
        if len(np.unique(every)) != len(every):
            notes.append(f"the id column {prepared.columns.id_column!r} has repeated values")
    if at_floor:
        notes.append(f"{at_floor} of {total} patients have the difficulty model "
                     "sigma at its floor: their intervals are set by the floor, not by them")
    return notes, total


@dataclass(eq=False)
class StreamedStudy:
    """A study whose patients are read a chunk at a time, each time it explains them.

    For cohorts too large to hold: memory holds one chunk of patients and its results. The
    reports equal a Study's on the whole table, chunk by chunk (ids are the rows' positions
    in the file, or the id column), and the warnings are those of every patient.
    """

    prepared: _Prepared
    chunks: Callable[[], Iterator[pd.DataFrame]]
    """Reads the patients afresh, in chunks whose index is the rows' positions."""
    n_patients: int
    warnings: list[str]

    @property
    def system(self) -> ConformalSystem:
        return self.prepared.system

    @property
    def n_train(self) -> int:
        return self.prepared.n_train

    def estimate(self, method: str = "exact", budget: int | None = None,
                 groups: Sequence[Sequence[str]] | None = None,
                 background_bootstrap: int = 0, fixed_quantile: bool = False) -> RunEstimate:
        """What explaining every chunk will cost (Explainer.estimate), before it starts."""
        return self.prepared.explainer.estimate(
            self.n_patients, method, budget, self.prepared.explainer.player_groups(groups),
            background_bootstrap, fixed_quantile)

    def iter_explain(self, method: str = "exact", alpha: float = 0.1, units: Units = "width",
                     budget: int | None = None, jobs: int = 1, progress: Progress | None = None,
                     groups: Sequence[Sequence[str]] | None = None,
                     calibration_bootstrap: int = 0, fixed_quantile: bool = False,
                     background_bootstrap: int = 0) -> Iterator[Report]:
        """Study.iter_explain over every chunk of patients, in the file's order."""
        done = 0
        for chunk in self.chunks():
            study = self.prepared.study(chunk, self.warnings)

            def overall(finished: int, _total: int, before: int = done) -> None:
                if progress is not None:
                    progress(before + finished, self.n_patients)

            yield from study.iter_explain(
                method=method, alpha=alpha, units=units, budget=budget, jobs=jobs,
                progress=overall, groups=groups, calibration_bootstrap=calibration_bootstrap,
                fixed_quantile=fixed_quantile, background_bootstrap=background_bootstrap)
            done += len(chunk)


def prepare_streamed_study(chunks: Callable[[], Iterator[pd.DataFrame]],
                           options: StudyOptions, train: pd.DataFrame,
                           calibration: pd.DataFrame, alpha: float | None = None,
                           models: Mapping[str, object] | None = None) -> StreamedStudy:
    """prepare_study with separate training and calibration tables and patients in chunks.

    `chunks()` reads the patients from the start each time it is called (it is called once to
    check them and gather the warnings, and once per explain).
    """
    first = next(iter(chunks()), None)
    if first is None:
        raise CpdecompError("there are no patients to explain")
    # The first chunk is checked as prepare_study checks the patients' table; the others come
    # from the same file, with the same columns.
    prepared, _ = _prepare(first, options, train, calibration, alpha, models)
    notes, total = patient_warnings(prepared, (
        (prepared.ids(chunk), prepared.system.fitted.encode(chunk)) for chunk in chunks()))
    return StreamedStudy(prepared, chunks, total, prepared.warnings + notes)


def correlation_warnings(rows: np.ndarray, features: Sequence[str]) -> list[str]:
    """Pairs with |rho| > 0.7: interventional masking then evaluates unrealistic hybrids."""
    frame = pd.DataFrame(rows, columns=list(features))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = frame.corr().to_numpy()
    notes = []
    for i in range(len(features)):
        for j in range(i + 1, len(features)):
            if np.isfinite(rho[i, j]) and abs(rho[i, j]) > CORRELATION_WARNING:
                notes.append(
                    f"features {features[i]!r} and {features[j]!r} are correlated "
                    f"(rho = {rho[i, j]:.2f}); their attributions share credit"
                )
    return notes

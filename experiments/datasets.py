"""The data sets the experiments run on, as problems: a table and the roles of its columns.

This is the one place in `core` that reads `sample_data`: the reproduction is about those
tables. Nothing outside `experiments` imports this module, so the library itself keeps
no dependency on the bundled data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from cpdecomp.core.workflow import Study, StudyOptions, prepare_study
from cpdecomp.sample_data import SAMPLES, load_sample
from cpdecomp.sample_data.synthetic import SyntheticData, make_synthetic
from experiments.config import ExperimentConfig


@dataclass(frozen=True, eq=False)
class Problem:
    """A table to split, fit and explain."""

    name: str
    table: pd.DataFrame
    target: str
    id_column: str
    kind: str
    """'real', 'synthetic' or 'semi-synthetic'."""

    @property
    def features(self) -> tuple[str, ...]:
        return tuple(c for c in self.table.columns if c not in (self.target, self.id_column))

    @property
    def n_rows(self) -> int:
        return len(self.table)


def subsample(table: pd.DataFrame, max_rows: int | None, seed: int) -> pd.DataFrame:
    """At most max_rows rows drawn without replacement (seeded), in their original order."""
    if max_rows is None or len(table) <= max_rows:
        return table.reset_index(drop=True)
    rng = np.random.default_rng((seed, 7))
    keep = np.sort(rng.choice(len(table), size=max_rows, replace=False))
    return table.iloc[keep].reset_index(drop=True)


def real_problem(name: str, max_rows: int | None = None, seed: int = 0) -> Problem:
    """A bundled real table."""
    sample = SAMPLES[name]
    table = subsample(load_sample(name), max_rows, seed)
    return Problem(name, table, sample.target, sample.id_column or "", sample.kind)


def synthetic_problem(rows: int, seed: int) -> tuple[Problem, SyntheticData]:
    """A freshly drawn synthetic cohort and its generator (for the ground truth)."""
    data = make_synthetic(rows, seed=seed)
    return Problem("synthetic", data.table, "y", "patient_id", "synthetic"), data


def positions_of(problem: Problem, patient_ids: list) -> np.ndarray:
    """Row positions in the problem's table of the explained patients (by id)."""
    index = pd.Index(problem.table[problem.id_column].astype(str))
    positions = index.get_indexer([str(i) for i in patient_ids])
    if (positions < 0).any():
        raise KeyError("an explained patient is not in the table")
    return positions


def prepare(problem: Problem, family: str, config: ExperimentConfig, seed: int,
            model: str | None = None) -> Study:
    """Split (seeded), fit the configured model for `family`, calibrate, draw the background."""
    options = StudyOptions(target=problem.target, id_column=problem.id_column, family=family,
                           model=model or config.model, background=config.background, seed=seed)
    return prepare_study(problem.table, options)

"""Feature groups as players: a design over G groups, evaluated on coalitions of columns.

A group enters or leaves a coalition as a whole (all its columns keep the patient's values, or
none does), so any design over G players becomes a design over the d columns by repeating each
group's membership for its columns. The linear map, its efficiency and its standard errors are
the group-level design's, with one attribution per group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cpdecomp.core.attribution.base import Design
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.typing import FloatArray

Groups = tuple[tuple[int, ...], ...]


def check_groups(groups: Sequence[Sequence[int]], n_columns: int) -> Groups:
    """Groups as tuples; each of the n_columns columns in exactly one non-empty group."""
    checked = tuple(tuple(int(c) for c in group) for group in groups)
    if any(len(group) == 0 for group in checked):
        raise CpdecompError("every feature group needs at least one column")
    columns = sorted(c for group in checked for c in group)
    if columns != list(range(n_columns)):
        missing = sorted(set(range(n_columns)) - set(columns))
        repeated = sorted({c for c in columns if columns.count(c) > 1})
        outside = sorted(c for c in set(columns) if not 0 <= c < n_columns)
        raise CpdecompError(
            f"feature groups must cover each of the {n_columns} columns exactly once "
            f"(missing {missing}, repeated {repeated}, out of range {outside})"
        )
    return checked


@dataclass(frozen=True, eq=False, kw_only=True)
class GroupedDesign(Design):
    """A design over groups whose coalitions are spelled out over columns."""

    inner: Design

    def apply(self, values: FloatArray) -> FloatArray:
        return self.inner.apply(values)

    def apply_offset(self, offset: FloatArray, values: FloatArray) -> tuple[FloatArray, FloatArray]:
        return self.inner.apply_offset(offset, values)

    def weight_matrix(self) -> FloatArray:
        return self.inner.weight_matrix()

    def standard_errors(self, values: FloatArray) -> FloatArray | None:
        return self.inner.standard_errors(values)


def grouped_design(inner: Design, groups: Sequence[Sequence[int]], n_columns: int) -> GroupedDesign:
    """`inner` (over len(groups) players) as a design over the columns of the groups."""
    checked = check_groups(groups, n_columns)
    if inner.n_players != len(checked):
        raise CpdecompError(f"a design over {inner.n_players} players cannot cover "
                            f"{len(checked)} groups")
    group_of_column = np.empty(n_columns, dtype=np.int64)
    for g, group in enumerate(checked):
        group_of_column[list(group)] = g
    return GroupedDesign(
        method=inner.method, coalitions=inner.coalitions[:, group_of_column],
        efficient=inner.efficient, budget=inner.budget, seed=inner.seed, sampled=inner.sampled,
        groups=checked, inner=inner,
    )

"""Tree ensembles as leaves with conditions: the records every tree reader produces and the
tree tables consume, and the helpers the readers share."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

N_CODES = 256
"""Category codes per table row (gradient boosting allows at most 255 categories)."""
LEFT, RIGHT, MISSING = 1, 0, 2


@dataclass
class Condition:
    """One split on a path, as a test on one player's encoded value."""

    player: int
    categorical: bool
    threshold: float  # numeric: value <= threshold goes left
    missing_left: bool
    codes: np.ndarray | None  # categorical: per code LEFT / RIGHT / MISSING (use missing_left)
    go_left: bool
    single_precision: bool = False  # scikit-learn's trees compare float32(value) <= threshold


@dataclass(frozen=True, eq=False)
class LeafEnsemble:
    """prediction(x) = base + Σ over leaves reached by x of value."""

    base: float
    values: np.ndarray
    conditions: list[list[Condition]]
    trees: np.ndarray
    """Tree of each leaf (leaves come tree by tree, each tree's in depth-first order)."""


def leaf_paths(is_leaf: Callable, children: Callable,
                test: Callable) -> Iterator[tuple[int, list[Condition]]]:
    """Depth-first over a tree from node 0: each leaf with the conditions on its path."""
    stack: list[tuple[int, list[Condition]]] = [(0, [])]
    while stack:
        node, conditions = stack.pop()
        if is_leaf(node):
            yield node, conditions
            continue
        left, right = children(node)
        stack.append((right, [*conditions, test(node, False)]))
        stack.append((left, [*conditions, test(node, True)]))



def mean_of(parts: list[LeafEnsemble | None]) -> LeafEnsemble | None:
    """The mean of tree sums is one tree sum: all their leaves, values divided by the count."""
    if not parts or any(p is None for p in parts):
        return None
    ensembles = [p for p in parts if p is not None]
    share = 1.0 / len(ensembles)
    offsets = np.cumsum([0] + [int(e.trees.max(initial=-1)) + 1 for e in ensembles])
    return LeafEnsemble(
        base=sum(e.base for e in ensembles) * share,
        values=np.concatenate([e.values for e in ensembles]) * share,
        conditions=[path for e in ensembles for path in e.conditions],
        trees=np.concatenate([e.trees + offset for e, offset in
                              zip(ensembles, offsets, strict=False)]),
    )



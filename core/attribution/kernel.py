"""KernelSHAP: the Shapley kernel regression on complete size classes plus paired samples.

Coalition sizes s = 1..d−1 carry the Shapley kernel's mass (d − 1)/(s(d − s)); sizes s and
d − s form one class, sampled as a coalition with its complement (paired sampling). The
schedule is the one of Lundberg & Lee's implementation (shap's KernelExplainer): classes whose
share of the remaining budget covers every coalition in them are enumerated with their exact
weights, smallest sizes first; the remaining budget is drawn from the remaining classes until
it holds that many distinct coalitions, repeats adding weight. With a budget of 2^d every class
is enumerated and the answer is exact Shapley. The map is the constrained least-squares solve of
`core.attribution.regression`.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from math import comb

import numpy as np

from cpdecomp.core.attribution.regression import Draws, RegressionDesign, regression_design
from cpdecomp.core.coalitions import coalition_keys
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.typing import Coalitions

DEFAULT_KERNEL_BUDGET = 1024
"""Coalitions evaluated by default: the smallest budget of the wide benchmark's ladder (1,024,
2,048, 4,096) whose median SE of φ_C is within TARGET_RELATIVE_SE at every d measured, 20 to
100 (core/attribution/__init__.py; shap's own default is 2d + 2048)."""

METHOD_NAME = "KernelSHAP"
DRAWS_PER_SAMPLE = 4
"""At most this many draws per coalition still to fill, as in shap: repeats cannot loop forever."""


@dataclass(frozen=True)
class SizeClass:
    """Coalition sizes s and d − s, sampled together when they differ."""

    size: int
    paired: bool
    mass: float
    """Share of the Shapley kernel's total weight held by the class."""
    n_coalitions: int


@dataclass(frozen=True)
class Schedule:
    """Which classes are enumerated for a number of coalitions, and the draws for the rest."""

    enumerated: tuple[SizeClass, ...]
    drawn: tuple[SizeClass, ...]
    n_drawn: int
    """Distinct coalitions to draw from the classes in `drawn`."""

    @property
    def drawn_mass(self) -> float:
        return float(sum(c.mass for c in self.drawn))


def minimum_kernel_budget(n_players: int) -> int:
    """2d + 2 coalitions: ∅, N, every feature alone and every feature left out (or all 2^d)."""
    return min(2 * n_players + 2, 2**n_players)


def size_classes(n_players: int) -> tuple[SizeClass, ...]:
    """Size classes 1..⌈(d−1)/2⌉ with their kernel mass, smallest first."""
    d = n_players
    n_classes = d // 2 if d % 2 == 0 else (d - 1) // 2
    raw = []
    for s in range(1, n_classes + 1):
        paired = s != d - s
        raw.append((s, paired, (d - 1) / (s * (d - s)) * (2 if paired else 1),
                    comb(d, s) * (2 if paired else 1)))
    total = sum(r[2] for r in raw)
    return tuple(SizeClass(s, paired, mass / total, n) for s, paired, mass, n in raw)


def kernel_schedule(n_players: int, n_samples: int, singletons: bool = False) -> Schedule:
    """shap's rule: enumerate a class while the budget's share of it covers all its coalitions.

    With `singletons`, the class of sizes 1 and d − 1 is enumerated whatever its share: those 2d
    coalitions alone determine the regression, so no draw can leave it singular.
    """
    classes = size_classes(n_players)
    left, remaining_mass = n_samples, 1.0
    enumerated: list[SizeClass] = []
    for size_class in classes:
        share = size_class.mass / remaining_mass
        forced = singletons and size_class.size == 1 and left >= size_class.n_coalitions
        if not forced and left * share / size_class.n_coalitions < 1.0 - 1e-8:
            break
        enumerated.append(size_class)
        left -= size_class.n_coalitions
        remaining_mass -= size_class.mass
    return Schedule(tuple(enumerated), classes[len(enumerated):], left)


def enumerated_coalitions(n_players: int, schedule: Schedule) -> tuple[Coalitions, np.ndarray]:
    """Masks and kernel weights of every coalition in the enumerated classes."""
    members: list[tuple[int, ...]] = []
    weights: list[float] = []
    rows: list[bool] = []  # whether the row is the complement of `members`
    for size_class in schedule.enumerated:
        weight = size_class.mass / size_class.n_coalitions
        for chosen in combinations(range(n_players), size_class.size):
            members.append(chosen)
            weights.append(weight)
            rows.append(False)
            if size_class.paired:
                members.append(chosen)
                weights.append(weight)
                rows.append(True)
    masks = np.zeros((len(members), n_players), dtype=bool)
    for r, chosen in enumerate(members):
        masks[r, list(chosen)] = True
    masks[rows] = ~masks[rows]
    return masks, np.array(weights)


def draw_coalitions(n_players: int, schedule: Schedule,
                    rng: np.random.Generator) -> tuple[Coalitions, np.ndarray, Draws]:
    """Paired draws until `schedule.n_drawn` distinct coalitions; masks, weights and the draws."""
    d, classes = n_players, schedule.drawn
    # A paired draw adds two coalitions, so its class is drawn half as often for the same mass.
    chance = np.array([c.mass / (2 if c.paired else 1) for c in classes])
    max_draws = DRAWS_PER_SAMPLE * schedule.n_drawn
    picked = rng.choice(len(classes), size=max_draws, p=chance / chance.sum())
    orders = np.argsort(rng.random((max_draws, d)), axis=1)
    # Draw t is the first `size` players of its random order.
    sizes = np.array([c.size for c in classes])[picked]
    position = np.empty_like(orders)
    position[np.arange(max_draws)[:, None], orders] = np.arange(d)
    drawn = position < sizes[:, None]
    keys = coalition_keys(drawn)
    rows: list[int] = []  # draw whose coalition (≥ 0) or complement (~draw) the row holds
    first: dict[bytes, int] = {}
    draws: list[list[int]] = []  # [first row, second row or -1, count]
    left = schedule.n_drawn
    for t in range(max_draws):
        if left <= 0:
            break
        size_class = classes[picked[t]]
        key = keys[t].tobytes()
        if key in first:
            draws[first[key]][2] += 1
            continue
        first[key] = len(draws)
        rows.append(t)
        left -= 1
        second = -1
        if size_class.paired and left > 0:
            second = len(rows)
            rows.append(~t)
            left -= 1
        draws.append([len(rows) - 1 - (second >= 0), second, 1])
    index = np.array(rows, dtype=np.int64)
    masks = drawn[np.where(index >= 0, index, ~index)]
    masks[index < 0] = ~masks[index < 0]
    table = np.array(draws, dtype=np.int64).reshape(-1, 3)
    appearances = table[:, 2] * (1 + (table[:, 1] >= 0))
    weights = np.zeros(len(rows))
    np.add.at(weights, table[:, 0], table[:, 2])
    paired = table[:, 1] >= 0
    np.add.at(weights, table[paired, 1], table[paired, 2])
    weights *= schedule.drawn_mass / appearances.sum()
    return (masks, weights,
            Draws(first=table[:, 0], second=table[:, 1], count=table[:, 2],
                  mass=schedule.drawn_mass))


def checked_kernel_budget(n_players: int, budget: int | None, method_name: str) -> int:
    """The budget a KernelSHAP-type method will use, refusing one too small to solve."""
    requested = DEFAULT_KERNEL_BUDGET if budget is None else int(budget)
    if requested < minimum_kernel_budget(n_players):
        raise CpdecompError(
            f"{method_name} over {n_players} features needs a budget of at least "
            f"{minimum_kernel_budget(n_players)} coalitions (∅, N, each feature alone and each "
            f"left out); raise the budget"
        )
    return requested


def kernel_shap_design(n_players: int, budget: int | None = None,
                       seed: int = 0) -> RegressionDesign:
    """KernelSHAP over `budget` coalitions (∅ and N included); exact Shapley at 2^d."""
    d = n_players
    requested = checked_kernel_budget(d, budget, METHOD_NAME)
    n_samples = min(requested, 2**d) - 2
    schedule = kernel_schedule(d, n_samples, singletons=True)
    masks, weights = enumerated_coalitions(d, schedule)
    draws = None
    if schedule.drawn and schedule.n_drawn > 0:
        rng = np.random.default_rng(seed)
        drawn_masks, drawn_weights, draws = draw_coalitions(d, schedule, rng)
        draws = Draws(first=draws.first + len(masks), second=np.where(
            draws.second >= 0, draws.second + len(masks), -1), count=draws.count, mass=draws.mass)
        masks = np.concatenate([masks, drawn_masks])
        weights = np.concatenate([weights, drawn_weights])
    return regression_design("kernel", masks, weights, draws=draws,
                             budget=len(masks) + 2, seed=seed)

"""Attribution methods as coalition designs; the registry's order is menu order.

Every method here is linear in the game, so one design serves the calibration, instance and
total games and φ_T = φ_C + φ_I holds exactly. Methods that are not linear are refused by name
(NOT_DECOMPOSABLE) with the reason, never offered and summed.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import comb

from cpdecomp.core.attribution.banzhaf import (
    DEFAULT_BANZHAF_SAMPLES,
    banzhaf_design,
    sampled_banzhaf_design,
)
from cpdecomp.core.attribution.base import Design, MatrixDesign
from cpdecomp.core.attribution.exact import MAX_EXACT_PLAYERS, exact_shapley_design
from cpdecomp.core.attribution.groups import GroupedDesign, grouped_design
from cpdecomp.core.attribution.kernel import (
    DEFAULT_KERNEL_BUDGET,
    kernel_shap_design,
    minimum_kernel_budget,
)
from cpdecomp.core.attribution.leave_one_out import leave_one_out_design
from cpdecomp.core.attribution.permutation import DEFAULT_PERMUTATIONS, permutation_design
from cpdecomp.core.attribution.refused import NOT_DECOMPOSABLE
from cpdecomp.core.attribution.shap_kernel import shap_kernel_design
from cpdecomp.core.attribution.shap_permutation import shap_permutation_design
from cpdecomp.core.attribution.terms import TermDesign
from cpdecomp.core.errors import CpdecompError

DesignBuilder = Callable[..., Design]
"""builder(n_players, budget=None, seed=0) -> Design."""

TARGET_RELATIVE_SE = 0.003
"""What the default budgets are chosen to reach: a median standard error of φ_C at most this
share of |v_C(N) − v_C(∅)| (the calibration gap the attributions split). Each sampled Shapley
estimator's default is the smallest budget of the wide benchmark's ladder (permutations 32, 64,
128; KernelSHAP coalitions 1,024, 2,048, 4,096) within it at every d from 20 to 100
(docs/benchmarks/wide.md measures it per method and d)."""


@dataclass(frozen=True)
class Budget:
    """What a method's budget counts, its default, and the smallest accepted value for d."""

    unit: str
    default: int
    minimum: Callable[[int], int]
    rule: str = ""
    """Why the default is what it is (the SE it reaches), in words for the docs."""

    def describe(self) -> str:
        """'64 permutations (rule)': the default with its unit and rule."""
        return f"{self.default} {self.unit}" + (f" ({self.rule})" if self.rule else "")


def _at_least_two(n_players: int) -> int:
    return 2


PERMUTATION_RULE = ("the smallest that keeps φ_C's SE within the target at every d: each player "
                    "gets that many marginal contributions, so the SE does not grow with d; 32 "
                    "permutations missed it")
KERNEL_RULE = ("the smallest that keeps φ_C's SE within the target at every d: the regression's "
               "SE grows slowly with d")

CoalitionBound = Callable[[int, int], int]
"""bound(n_players, budget) -> the most distinct coalitions the design can have."""


def _all_subsets(d: int, budget: int) -> int:
    return 2**d


def _order_prefixes(d: int, budget: int) -> int:
    """Permutations rounded up to pairs (antithetic, or shap's forward and backward), each
    order walking its prefixes: ∅, N and, of each size k, at most one per order and at most
    C(d, k)."""
    orders = budget + budget % 2
    return 2 + sum(min(comb(d, k), orders) for k in range(1, d)) if d else 1


def _sampled_coalitions(d: int, budget: int) -> int:
    """The budget's coalitions with ∅ and N, capped at all 2^d."""
    return min(2**d, budget + 2)


def _banzhaf_neighbours(d: int, budget: int) -> int:
    """Each sampled coalition and it with each player flipped (d + 1 a sample), ∅ and N."""
    return min(2**d, budget * (d + 1) + 2)


def _leave_one_out(d: int, budget: int) -> int:
    return d + 2


@dataclass(frozen=True)
class Method:
    """One attribution method: how the engine builds it and what it offers."""

    name: str
    label: str
    """Shown in the dashboard's method menu."""
    build: DesignBuilder
    budget: Budget | None
    """None: the method takes no budget (it ignores one)."""
    efficient: bool
    """Σφ = v(N) − v(∅) for every game (Shapley estimators; not Banzhaf or leave-one-out)."""
    most_coalitions: CoalitionBound
    """An upper bound on the design's coalitions without building it: a budget check can
    refuse a run whose design would not fit in memory before building it."""
    max_players: int | None = None
    """Players past which the builder refuses (it enumerates all 2^d coalitions); None: any."""

    def coalitions_at_most(self, n_players: int, budget: int | None = None) -> int:
        """most_coalitions at this budget (the default one when None)."""
        used = budget if budget is not None else (self.budget.default if self.budget else 0)
        return self.most_coalitions(n_players, int(used))


_PERMUTATIONS = Budget("permutations", DEFAULT_PERMUTATIONS, _at_least_two, PERMUTATION_RULE)
_KERNEL = Budget("coalitions", DEFAULT_KERNEL_BUDGET, minimum_kernel_budget, KERNEL_RULE)

METHODS: dict[str, Method] = {method.name: method for method in (
    Method("exact", "Exact Shapley (all coalitions)", exact_shapley_design, None, True,
           _all_subsets, MAX_EXACT_PLAYERS),
    Method("permutation", "Permutation sampling (antithetic)", permutation_design, _PERMUTATIONS,
           True, _order_prefixes),
    Method("kernel", "KernelSHAP (paired sampling, exact at 2^d)", kernel_shap_design, _KERNEL,
           True, _sampled_coalitions),
    Method("shap-kernel", "shap KernelExplainer (l1_reg=False)", shap_kernel_design, _KERNEL,
           True, _sampled_coalitions),
    Method("shap-permutation", "shap PermutationExplainer", shap_permutation_design,
           _PERMUTATIONS, True, _order_prefixes),
    Method("banzhaf", "Banzhaf (exact; not efficient)", banzhaf_design, None, False,
           _all_subsets, MAX_EXACT_PLAYERS),
    Method("banzhaf-sampled", "Banzhaf, sampled (not efficient)", sampled_banzhaf_design,
           Budget("sampled coalitions", DEFAULT_BANZHAF_SAMPLES, _at_least_two), False,
           _banzhaf_neighbours),
    Method("leave-one-out", "Leave-one-out / occlusion (not efficient)", leave_one_out_design,
           None, False, _leave_one_out),
)}
"""The one registry of methods, in menu order. The defaults of the Shapley estimators' budgets
are chosen by TARGET_RELATIVE_SE (see Budget.rule)."""

METHOD_LABELS: dict[str, str] = {name: method.label for name, method in METHODS.items()}
"""Views of METHODS for menus and messages."""
METHOD_BUDGETS: dict[str, Budget | None] = {name: m.budget for name, m in METHODS.items()}
"""minimum(d) is the smallest budget a method accepts for d players."""


def build_design(method: str, n_players: int, budget: int | None = None, seed: int = 0,
                 groups: Sequence[Sequence[int]] | None = None) -> Design:
    """The design of `method` for `n_players` columns, seeded; over `groups` of them if given."""
    if method in NOT_DECOMPOSABLE:
        raise CpdecompError(
            f"{method!r} cannot be decomposed: {NOT_DECOMPOSABLE[method].reason}; "
            f"choose one of {', '.join(METHODS)}"
        )
    try:
        builder = METHODS[method].build
    except KeyError:
        raise CpdecompError(
            f"unknown attribution method {method!r}; choose one of {', '.join(METHODS)}"
        ) from None
    if groups is None:
        return builder(n_players, budget=budget, seed=seed)
    return grouped_design(builder(len(groups), budget=budget, seed=seed), groups, n_players)


__all__ = [
    "DEFAULT_PERMUTATIONS",
    "MAX_EXACT_PLAYERS",
    "METHODS",
    "METHOD_BUDGETS",
    "METHOD_LABELS",
    "NOT_DECOMPOSABLE",
    "TARGET_RELATIVE_SE",
    "Budget",
    "Design",
    "GroupedDesign",
    "MatrixDesign",
    "Method",
    "TermDesign",
    "build_design",
    "exact_shapley_design",
    "permutation_design",
]

"""Attribution methods as coalition designs; the registry's order is menu order.

Every method here is linear in the game, so one design serves the calibration, instance and
total games and φ_T = φ_C + φ_I holds exactly. Methods that are not linear are refused by name
(NOT_DECOMPOSABLE) with the reason, never offered and summed.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.attribution.banzhaf import DEFAULT_BANZHAF_SAMPLES, banzhaf_design, sampled_banzhaf_design
from core.attribution.base import Design, MatrixDesign, TermDesign
from core.attribution.exact import MAX_EXACT_PLAYERS, exact_shapley_design
from core.attribution.groups import GroupedDesign, grouped_design
from core.attribution.kernel import (
    DEFAULT_KERNEL_BUDGET,
    kernel_shap_design,
    minimum_kernel_budget,
)
from core.attribution.leave_one_out import leave_one_out_design
from core.attribution.permutation import DEFAULT_PERMUTATIONS, permutation_design
from core.attribution.refused import NOT_DECOMPOSABLE
from core.attribution.shap_kernel import shap_kernel_design
from core.attribution.shap_permutation import shap_permutation_design
from core.errors import CpdecompError

DesignBuilder = Callable[..., Design]
"""builder(n_players, budget=None, seed=0) -> Design."""

METHODS: dict[str, DesignBuilder] = {
    "exact": exact_shapley_design,
    "permutation": permutation_design,
    "kernel": kernel_shap_design,
    "shap-kernel": shap_kernel_design,
    "shap-permutation": shap_permutation_design,
    "banzhaf": banzhaf_design,
    "banzhaf-sampled": sampled_banzhaf_design,
    "leave-one-out": leave_one_out_design,
}

METHOD_LABELS = {
    "exact": "Exact Shapley (all coalitions)",
    "permutation": "Permutation sampling (antithetic)",
    "kernel": "KernelSHAP (paired sampling, exact at 2^d)",
    "shap-kernel": "shap KernelExplainer (l1_reg=False)",
    "shap-permutation": "shap PermutationExplainer",
    "banzhaf": "Banzhaf (exact; not efficient)",
    "banzhaf-sampled": "Banzhaf, sampled (not efficient)",
    "leave-one-out": "Leave-one-out / occlusion (not efficient)",
}


@dataclass(frozen=True)
class Budget:
    """What a method's budget counts, its default, and the smallest accepted value for d."""

    unit: str
    default: int
    minimum: Callable[[int], int]


def _at_least_two(n_players: int) -> int:
    return 2


METHOD_BUDGETS: dict[str, Budget | None] = {
    "exact": None,
    "permutation": Budget("permutations", DEFAULT_PERMUTATIONS, _at_least_two),
    "kernel": Budget("coalitions", DEFAULT_KERNEL_BUDGET, minimum_kernel_budget),
    "shap-kernel": Budget("coalitions", DEFAULT_KERNEL_BUDGET, minimum_kernel_budget),
    "shap-permutation": Budget("permutations", DEFAULT_PERMUTATIONS, _at_least_two),
    "banzhaf": None,
    "banzhaf-sampled": Budget("sampled coalitions", DEFAULT_BANZHAF_SAMPLES, _at_least_two),
    "leave-one-out": None,
}
"""None: the method takes no budget (it ignores one); minimum(d) is the smallest it accepts."""


def build_design(method: str, n_players: int, budget: int | None = None, seed: int = 0,
                 groups: Sequence[Sequence[int]] | None = None) -> Design:
    """The design of `method` for `n_players` columns, seeded; over `groups` of them if given."""
    if method in NOT_DECOMPOSABLE:
        raise CpdecompError(
            f"{method!r} cannot be decomposed: {NOT_DECOMPOSABLE[method].reason}; "
            f"choose one of {', '.join(METHODS)}"
        )
    try:
        builder = METHODS[method]
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
    "Budget",
    "Design",
    "GroupedDesign",
    "MatrixDesign",
    "TermDesign",
    "build_design",
    "exact_shapley_design",
    "permutation_design",
]

"""Attribution methods as coalition designs; the registry's order is menu order."""

from collections.abc import Callable

from core.attribution.base import Design
from core.attribution.exact import MAX_EXACT_PLAYERS, exact_shapley_design
from core.attribution.permutation import DEFAULT_PERMUTATIONS, permutation_design
from core.errors import CpdecompError

DesignBuilder = Callable[..., Design]

METHODS: dict[str, DesignBuilder] = {
    "exact": exact_shapley_design,
    "permutation": permutation_design,
}

METHOD_LABELS = {
    "exact": "Exact Shapley (all coalitions)",
    "permutation": "Permutation sampling (antithetic)",
}


def build_design(method: str, n_players: int, budget: int | None = None, seed: int = 0) -> Design:
    """The design of `method` for `n_players`, seeded."""
    try:
        builder = METHODS[method]
    except KeyError:
        raise CpdecompError(
            f"unknown attribution method {method!r}; choose one of {', '.join(METHODS)}"
        ) from None
    return builder(n_players, budget=budget, seed=seed)


__all__ = [
    "DEFAULT_PERMUTATIONS",
    "MAX_EXACT_PLAYERS",
    "METHODS",
    "METHOD_LABELS",
    "Design",
    "build_design",
    "exact_shapley_design",
    "permutation_design",
]

"""Each method's coalition bound (the registry's most_coalitions) against the designs it
builds: never below the count, and close to it where designs are large."""

from __future__ import annotations

import pytest

from cpdecomp.core.attribution import METHODS

DS = [1, 2, 3, 4, 5, 8, 12, 16, 20, 30, 63, 70]
BUDGETS = [2, 3, 5, 16, 64, 101, 1024]


def cases():
    for name, method in METHODS.items():
        for d in DS:
            if method.max_players is not None and d > min(method.max_players, 12):
                continue
            budgets = [None] if method.budget is None else [
                b for b in BUDGETS if b >= method.budget.minimum(d)]
            for budget in budgets:
                yield name, d, budget


@pytest.mark.parametrize(("name", "d", "budget"), list(cases()))
def test_the_bound_holds_every_coalition_the_design_builds(name: str, d: int,
                                                           budget: int | None) -> None:
    method = METHODS[name]
    built = len(method.build(d, budget, 7).coalitions)
    bound = method.coalitions_at_most(d, budget)
    assert built <= bound
    if d >= 20:  # where a design can be too large to build just to count it
        assert bound <= 1.1 * built, (bound, built)


def test_the_default_budget_is_the_one_bounded() -> None:
    method = METHODS["permutation"]
    assert method.budget is not None
    assert method.coalitions_at_most(30) == method.coalitions_at_most(30, method.budget.default)

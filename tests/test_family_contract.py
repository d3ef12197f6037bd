"""The contract every registered CP family keeps (method page §2), run over FAMILIES: the
width separates on the family's scale, the interval is exactly the set of targets whose score is
at most q̂, and components or quantiles on which the family is undefined are refused."""

from __future__ import annotations

import numpy as np
import pytest

from cpdecomp.core.conformal import FAMILIES
from cpdecomp.core.errors import CpdecompError

VALID = {  # components where every family is defined, drawn per row
    "f": lambda rng, n: rng.uniform(1.0, 5.0, n),  # positive: the gamma family needs f > 0
    "sigma": lambda rng, n: rng.uniform(0.5, 2.0, n),
    "lo": lambda rng, n: rng.uniform(-2.0, 0.0, n),
}
INVALID = {  # one undefined component set per family that refuses any
    "normalized": {"sigma": 0.0},
    "gamma": {"f": -1.0},
    "cqr-r": {"hi": "lo"},  # no spread: the quantile models meet
}


def components(family, rng, n: int) -> dict[str, np.ndarray]:
    comps = {name: VALID[name](rng, n) for name in family.components if name in VALID}
    if "hi" in family.components:
        comps["hi"] = comps["lo"] + rng.uniform(0.5, 3.0, n)
    return comps


@pytest.mark.parametrize("name", list(FAMILIES))
def test_width_separates_into_calibration_and_instance_terms(name):
    family = FAMILIES[name]
    rng = np.random.default_rng(0)
    comps = components(family, rng, 200)
    for q in (0.05, 0.4, 1.7):
        lower, upper = family.interval(q, comps)
        width = upper - lower
        on_scale = np.log(width) if family.scale == "log" else width
        np.testing.assert_allclose(on_scale, family.calibration_value(q)
                                   + family.instance_value(comps), rtol=1e-12, atol=1e-12)
    if not family.instance_components:  # a family whose width ignores the patient
        np.testing.assert_array_equal(family.instance_value(comps), 0.0)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_interval_holds_exactly_the_targets_scoring_at_most_q(name):
    family = FAMILIES[name]
    rng = np.random.default_rng(1)
    comps = components(family, rng, 500)
    q = 0.7
    lower, upper = family.interval(q, comps)
    y = rng.uniform(lower - 3.0, upper + 3.0)
    inside = (lower <= y) & (y <= upper)
    scored = family.scores(y, comps) <= q
    assert inside.any() and (~inside).any()
    # Floating point can move a target that sits on an end across it: allow those only.
    edge = np.isclose(y, lower, rtol=1e-12) | np.isclose(y, upper, rtol=1e-12)
    np.testing.assert_array_equal(inside[~edge], scored[~edge])


@pytest.mark.parametrize("name", list(FAMILIES))
def test_undefined_components_and_quantiles_are_refused(name):
    family = FAMILIES[name]
    rng = np.random.default_rng(2)
    comps = components(family, rng, 5)
    family.check_components(comps, "test row")  # defined: no error
    if name in INVALID:
        broken = dict(comps)
        for component, value in INVALID[name].items():
            broken[component] = comps[value].copy() if isinstance(value, str) else \
                np.full(5, value)
        with pytest.raises(CpdecompError):
            family.check_components(broken, "test row")
    if family.scale == "log":  # A(q) takes a log: a quantile that makes it undefined is refused
        with pytest.raises(CpdecompError):
            family.check_quantile(np.array([-1.0]), "test quantile")
    family.check_quantile(np.array([0.5]), "test quantile")


@pytest.mark.parametrize("name", list(FAMILIES))
def test_targets_are_refused_where_the_scores_are_undefined(name):
    """The family says which targets it takes, and the fit and the calibration ask it."""
    import pandas as pd

    from cpdecomp import fit_system, system_from_functions

    family = FAMILIES[name]
    family.check_targets(np.array([0.5, 3.0]), "test")  # positive targets: every family
    rng = np.random.default_rng(4)
    table = pd.DataFrame({"x": rng.normal(size=40)})
    negative = table["x"] - 5.0
    if name == "gamma":
        with pytest.raises(CpdecompError, match="needs a positive target, but test has"):
            family.check_targets(np.array([1.0, -2.0]), "test")
        with pytest.raises(CpdecompError, match="but training has values <= 0"):
            fit_system(table, negative, family=name, model="linear")
        fitted = system_from_functions(name, {"f": lambda z: np.ones(len(z))}, table)
        with pytest.raises(CpdecompError, match="but calibration has values <= 0"):
            fitted.conformalize(table, negative)
    else:
        family.check_targets(np.array([-4.0, 0.0, 2.0]), "test")


def test_the_quantile_level_matters_to_the_quantile_families_only():
    """uses_quantile_level: the families whose fit reads the level are those with quantile
    models, and the fitted system's content hash ignores the level elsewhere."""
    import pandas as pd

    from cpdecomp import fit_system

    for family in FAMILIES.values():
        assert family.uses_quantile_level == bool({"lo", "hi"} & set(family.components))
    rng = np.random.default_rng(5)
    table = pd.DataFrame({"x": rng.normal(size=40), "z": rng.normal(size=40)})
    y = table["x"] * 2 + rng.normal(size=40)
    for name, differs in (("absolute", False), ("cqr", True)):
        digests = {fit_system(table, y, family=name, model="linear", quantile_alpha=level).digest
                   for level in (0.1, 0.2)}
        assert len(digests) == (2 if differs else 1), name


@pytest.mark.parametrize("name", [n for n, f in FAMILIES.items() if "hi" in f.components])
def test_a_family_refuses_crossing_quantiles_exactly_when_it_says_so(name):
    """refuses_crossing (which decides the fit's crossing warning) matches check_components."""
    family = FAMILIES[name]
    rng = np.random.default_rng(6)
    comps = components(family, rng, 5)
    crossed = {**comps, "hi": comps["lo"] - 0.5}
    if family.refuses_crossing:
        with pytest.raises(CpdecompError):
            family.check_components(crossed, "test row")
    else:
        family.check_components(crossed, "test row")


def test_log_units_are_refused_for_identity_families_on_every_surface(capsys):
    """One rule (core.decomposition.check_units), asked by the command line, the explainer,
    reports and the decomposition itself."""
    import pandas as pd
    from cli_helpers import assert_bad_input

    from cpdecomp import Explainer, system_from_functions
    from cpdecomp.core.decomposition import in_units

    rng = np.random.default_rng(3)
    train = pd.DataFrame({"x": rng.normal(size=60)})
    system = system_from_functions("absolute", {"f": lambda z: z[:, 0]}, train)
    system = system.conformalize(train, train["x"] + rng.normal(size=60))
    explainer = Explainer(system, background_size=10)
    with pytest.raises(CpdecompError, match="log units apply to the log-scale families"):
        explainer.explain(train.iloc[:3], units="log")
    width = explainer.explain(train.iloc[:3]).decomposition
    assert width.scale == "identity"
    with pytest.raises(CpdecompError, match="absolute attributions are in width units"):
        explainer.patient_games(units="log")
    with pytest.raises(CpdecompError, match="log units apply"):
        in_units(width, "log")
    message = assert_bad_input(capsys, "explain", "sample_data/diabetes.csv", "--target",
                               "progression", "--family", "cqr", "--scale", "log",
                               "--out", "unused.csv")
    assert "cqr attributions are in width units" in message

"""The split-conformal rank rule, exactly (method page §2 "Conformal rank, exactly", §7).

    k = ceil((n + 1)(1 - alpha)) = n + 1 - floor((n + 1) alpha),   q-hat = k-th smallest score,

computed in integer arithmetic with alpha read as the fraction its decimal spelling denotes.
When k > n, q-hat = +inf: the rule refuses and names the smallest calibration size that works.
"""

import math
import re
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cpdecomp.core.conformal import conformal_rank, kth_smallest, minimum_calibration_size
from cpdecomp.core.errors import CpdecompError

# (n, alpha, k), each worked out by hand as (n + 1)(1 - alpha) rounded up.
RANK_TABLE = [
    # (n + 1)(1 - alpha) is an integer: q-hat is exactly that order statistic, no more.
    (9, "0.1", 9),  # 10 * 9/10 = 9
    (19, "0.05", 19),  # 20 * 19/20 = 19
    (99, "0.01", 99),  # 100 * 99/100 = 99
    (999, "0.001", 999),  # 1000 * 999/1000 = 999
    (4, "0.2", 4),  # 5 * 4/5 = 4
    (29, "0.1", 27),  # 30 * 9/10 = 27
    (39, "0.05", 38),  # 40 * 19/20 = 38
    (99, "0.1", 90),  # 100 * 9/10 = 90
    (199, "0.05", 190),  # 200 * 19/20 = 190
    (299, "0.1", 270),  # 300 * 9/10 = 270
    (299, "0.2", 240),  # 300 * 4/5 = 240
    (7, "0.25", 6),  # 8 * 3/4 = 6
    (9, "0.3", 7),  # 10 * 7/10 = 7
    (59, "0.15", 51),  # 60 * 17/20 = 51
    (3, "0.5", 2),  # 4 * 1/2 = 2
    (1, "0.5", 1),  # 2 * 1/2 = 1
    (2, "1/3", 2),  # 3 * 2/3 = 2
    # Not an integer: round up.
    (10, "0.1", 10),  # 11 * 9/10 = 9.9
    (100, "0.1", 91),  # 101 * 9/10 = 90.9
    (110, "0.1", 100),  # 111 * 9/10 = 99.9
    (1000, "0.05", 951),  # 1001 * 19/20 = 950.95
    (5000, "0.01", 4951),  # 5001 * 99/100 = 4950.99
    (3, "0.3", 3),  # 4 * 7/10 = 2.8
    (2, "0.5", 2),  # 3 * 1/2 = 1.5
    (1, "0.9", 1),  # 2 * 1/10 = 0.2
    (12, "1/3", 9),  # 13 * 2/3 = 8.67
]

# (n, alpha, smallest n that works): here (n + 1) alpha < 1, so k = n + 1 > n and q-hat = +inf.
INFINITE_TABLE = [
    (8, "0.1", 9),  # 9 * 1/10 < 1; 10 * 1/10 = 1
    (1, "0.1", 9),
    (18, "0.05", 19),  # 20 * 1/20 = 1
    (98, "0.01", 99),
    (998, "0.001", 999),
    (3, "0.2", 4),  # 5 * 1/5 = 1
    (2, "0.3", 3),  # 3 * 3/10 = 0.9; 4 * 3/10 = 1.2
    (1, "0.25", 3),  # 2 * 1/4 = 0.5; 4 * 1/4 = 1
    (11, "1/13", 12),  # 12/13 < 1; 13/13 = 1
]

# (alpha, smallest n with a finite q-hat): the least n with (n + 1) alpha >= 1.
MINIMUM_TABLE = [
    ("0.1", 9),
    ("0.05", 19),
    ("0.01", 99),
    ("0.001", 999),
    ("0.2", 4),
    ("0.25", 3),
    ("0.3", 3),  # 1/alpha - 1 = 2.33, rounded up
    ("0.15", 6),  # 1/alpha - 1 = 5.67, rounded up
    ("1/3", 2),
    ("0.5", 1),
    ("0.9", 1),  # never below one row
]

SPELLINGS = ["float", "str", "fraction"]

OUTSIDE_UNIT_INTERVAL = [
    0, 1, 0.0, 1.0, -0.1, 1.5, "0", "1", "-0.05", "1.2",
    Fraction(0), Fraction(1), Fraction(3, 2), float("nan"), float("inf"), "abc", "",
]


def spell(alpha, spelling):
    """The same alpha as a float, as a decimal (or fraction) string, or as a Fraction."""
    if spelling == "float":
        return float(alpha)
    if spelling == "str":
        return alpha
    return Fraction(alpha)


def spelled(table, alpha_at):
    """Each row once per spelling of its alpha (no float for 1/3: a float cannot hold it)."""
    return [
        (*row, spelling)
        for row in table
        for spelling in SPELLINGS
        if not (spelling == "float" and "/" in row[alpha_at])
    ]


def exact_rank(n, alpha):
    """k = ceil((n + 1)(1 - alpha)) in rational arithmetic: the reference."""
    return math.ceil((n + 1) * (1 - Fraction(alpha)))


def test_tables_agree_with_the_rational_definition():
    # The hand-worked tables are the oracle; this guards them against typos.
    for n, alpha, k in RANK_TABLE:
        assert exact_rank(n, alpha) == k <= n
    for n, alpha, need in INFINITE_TABLE:
        assert exact_rank(n, alpha) > n
        assert exact_rank(need, alpha) <= need
    for alpha, need in MINIMUM_TABLE:
        assert exact_rank(need, alpha) <= need
        assert need == 1 or exact_rank(need - 1, alpha) > need - 1


@pytest.mark.parametrize(("n", "alpha", "k", "spelling"), spelled(RANK_TABLE, 1))
def test_rank_is_ceil_of_n_plus_one_times_confidence(n, alpha, k, spelling):
    assert conformal_rank(n, spell(alpha, spelling)) == k


@pytest.mark.parametrize(
    ("n", "alpha", "k"),
    # Naive float ceil((n + 1) * (1 - alpha)) gives k + 1 on each of these (1 - 0.7 is
    # 0.30000000000000004 in binary), i.e. one order statistic too conservative.
    [(9, 0.7, 3), (24, 0.44, 14), (99, 0.41, 59), (149, 0.18, 123)],
)
def test_rank_is_exact_where_float_arithmetic_is_not(n, alpha, k):
    assert math.ceil((n + 1) * (1 - alpha)) == k + 1  # the trap the rule must avoid
    assert conformal_rank(n, alpha) == k


def test_rank_accepts_numpy_scalars():
    assert conformal_rank(np.int64(9), np.float64(0.1)) == 9
    assert conformal_rank(np.int64(99), np.float64(0.01)) == 99


@pytest.mark.parametrize(("n", "alpha", "need", "spelling"), spelled(INFINITE_TABLE, 1))
def test_infinite_quantile_is_refused_naming_the_calibration_size_needed(
    n, alpha, need, spelling
):
    with pytest.raises(CpdecompError, match=rf"at least {need}\b"):
        conformal_rank(n, spell(alpha, spelling))


@pytest.mark.parametrize(("alpha", "need", "spelling"), spelled(MINIMUM_TABLE, 0))
def test_minimum_calibration_size_is_the_least_n_with_finite_quantile(alpha, need, spelling):
    alpha = spell(alpha, spelling)
    assert minimum_calibration_size(alpha) == need
    # At the smallest size that works, q-hat is the largest score (k = n) ...
    assert conformal_rank(need, alpha) == need
    # ... and one row fewer is refused.
    if need > 1:
        with pytest.raises(CpdecompError, match=rf"at least {need}\b"):
            conformal_rank(need - 1, alpha)


@pytest.mark.parametrize("alpha", OUTSIDE_UNIT_INTERVAL, ids=repr)
def test_alpha_outside_the_open_unit_interval_is_refused(alpha):
    with pytest.raises(CpdecompError, match="alpha"):
        conformal_rank(100, alpha)
    with pytest.raises(CpdecompError, match="alpha"):
        minimum_calibration_size(alpha)


@pytest.mark.parametrize("alpha", [1e-12, "1e-12"], ids=repr)
def test_tiny_alpha_is_refused_for_the_calibration_size_it_needs(alpha):
    # alpha = 1e-12 lies inside (0, 1) and its decimal spelling is short, so per §2 it is the
    # fraction 1/10**12: q-hat is infinite below n = 10**12 - 1, and §7 says the refusal names
    # that n. It must not claim that alpha is outside (0, 1).
    assert minimum_calibration_size(alpha) == 10**12 - 1
    with pytest.raises(CpdecompError, match=r"at least 999999999999\b"):
        conformal_rank(1000, alpha)


@pytest.mark.parametrize("n", [0, -1])
def test_empty_calibration_set_is_refused(n):
    with pytest.raises(CpdecompError, match="empty"):
        conformal_rank(n, 0.1)


@settings(max_examples=400, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=5000),
    a=st.integers(min_value=1, max_value=999),
    spelling=st.sampled_from(SPELLINGS),
)
def test_rank_matches_rational_arithmetic_and_refuses_exactly_when_k_exceeds_n(n, a, spelling):
    alpha_exact = Fraction(a, 1000)
    alpha = {"float": a / 1000, "str": f"0.{a:03d}", "fraction": alpha_exact}[spelling]
    k = math.ceil((n + 1) * (1 - alpha_exact))
    # Smallest working size, found by its defining property rather than a formula.
    need = max(1, math.ceil(1 / alpha_exact) - 1)
    assert math.ceil((need + 1) * (1 - alpha_exact)) <= need
    assert need == 1 or math.ceil(need * (1 - alpha_exact)) > need - 1
    assert minimum_calibration_size(alpha) == need
    if k <= n:
        assert n >= need
        assert conformal_rank(n, alpha) == k
    else:
        assert n < need
        with pytest.raises(CpdecompError, match=rf"at least {need}\b"):
            conformal_rank(n, alpha)


@settings(max_examples=200, deadline=None)
@given(
    scores=hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=12),
        elements=st.floats(-1e6, 1e6, allow_nan=False),
    ),
    data=st.data(),
)
def test_kth_smallest_is_the_kth_entry_of_the_sorted_scores(scores, data):
    n = scores.shape[-1]
    k = data.draw(st.integers(min_value=1, max_value=n), label="k")
    before = scores.copy()
    got = kth_smallest(scores, k)
    np.testing.assert_array_equal(got, np.sort(scores, axis=-1)[..., k - 1])
    np.testing.assert_array_equal(scores, before)  # the caller's scores are left alone


def test_kth_smallest_with_ties_and_extremes():
    scores = np.array([3.0, 1.0, 2.0, 2.0, 5.0, 1.0])
    expected = [1.0, 1.0, 2.0, 2.0, 3.0, 5.0]
    for k, value in enumerate(expected, start=1):
        assert kth_smallest(scores, k) == value
    # The conformal quantile of 9 scores at alpha = 0.1 is the largest one (k = 9).
    scores = np.arange(9.0)[::-1]
    assert kth_smallest(scores, conformal_rank(9, 0.1)) == 8.0


def test_refusal_message_reads_for_a_user():
    with pytest.raises(CpdecompError) as info:
        conformal_rank(8, 0.1)
    message = str(info.value)
    assert re.search(r"\b8\b", message), message  # says how many rows there are
    assert "at least 9" in message
    assert "\n" not in message

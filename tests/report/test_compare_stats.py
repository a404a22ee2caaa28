"""The two-sample formulas of comparisons against hand-checked and published values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trajlens.compare import _stats


def test_student_t_matches_tables():
    assert _stats.t_quantile(0.975, 10) == pytest.approx(2.228138852, abs=1e-8)
    assert _stats.t_quantile(0.975, 1) == pytest.approx(12.70620474, abs=1e-6)
    assert _stats.t_quantile(0.975, 1e6) == pytest.approx(1.959966, abs=1e-5)
    assert 2 * _stats.t_sf(2.228138852, 10) == pytest.approx(0.05, abs=1e-9)


def test_welch_matches_a_worked_example():
    # a = 1..5, b = 2, 4, ..., 10: Welch t 1.8974 on 5.882 df, p 0.10753 (as scipy's ttest_ind).
    a = _stats.Sample(3.0, math.sqrt(2.5), 5)
    b = _stats.Sample(6.0, math.sqrt(10.0), 5)
    test = _stats.welch(a, b)
    assert test.difference == 3.0
    assert test.statistic == pytest.approx(1.8973665961, abs=1e-9)
    assert test.p_value == pytest.approx(0.1075311949, abs=1e-8)
    half = 2.458823709699146 * math.sqrt(2.5 / 5 + 10 / 5)
    assert (test.low, test.high) == pytest.approx((3 - half, 3 + half), abs=1e-8)
    assert test.effect_size == pytest.approx(3 / math.sqrt((2.5 + 10) / 2))


def test_newcombe_interval_matches_the_paper():
    # Newcombe (1998), method 10, example (a): 56/70 against 48/80 gives 0.2 [0.0524, 0.3339].
    test = _stats.two_proportions(_stats.wilson(48, 80), _stats.wilson(56, 70))
    assert test.difference == pytest.approx(0.2)
    assert (test.low, test.high) == pytest.approx((0.0524, 0.3339), abs=5e-5)
    assert test.effect_size == pytest.approx(2 * math.asin(math.sqrt(0.8)) - 2 * math.asin(math.sqrt(0.6)))


def test_wilson_at_zero_successes():
    estimate = _stats.wilson(0, 10)
    assert estimate.value == 0 and estimate.low == 0
    assert estimate.high == pytest.approx(0.27753, abs=1e-5)
    assert _stats.wilson(0, 0).value is None


@given(st.integers(0, 200), st.integers(1, 200), st.integers(0, 200), st.integers(1, 200))
def test_difference_interval_holds_the_difference(x1, n1, x2, n2):
    a, b = _stats.wilson(min(x1, n1), n1), _stats.wilson(min(x2, n2), n2)
    test = _stats.two_proportions(a, b)
    assert -1 <= test.low <= test.difference <= test.high <= 1
    assert test.p_value is None or 0 <= test.p_value <= 1


def test_benjamini_hochberg_by_hand():
    # sorted p: 0.01, 0.03, 0.04, 0.5 (m = 4); q_(i) = min over j >= i of p_(j) * 4 / j
    q = _stats.benjamini_hochberg([0.01, 0.04, None, 0.03, 0.5])
    assert q[2] is None
    assert q[0] == pytest.approx(0.04) and q[1] == pytest.approx(0.16 / 3) and q[3] == pytest.approx(0.16 / 3)
    assert q[4] == pytest.approx(0.5)
    assert _stats.benjamini_hochberg([]) == []


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_benjamini_hochberg_keeps_order_and_bounds(p_values):
    q = _stats.benjamini_hochberg(p_values)
    assert all(p <= qv + 1e-12 and qv <= 1 for p, qv in zip(p_values, q))  # p * m / m may round below p
    ranked = sorted(range(len(p_values)), key=lambda i: p_values[i])
    assert all(q[a] <= q[b] + 1e-12 for a, b in zip(ranked, ranked[1:]))

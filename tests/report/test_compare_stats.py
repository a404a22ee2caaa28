"""What comparisons add to the checks' estimates (difference intervals, effect sizes, the
adjustment of p-values), against hand-checked and published values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import polars as pl

from trajlens import intervals
from trajlens.compare import _stats


def wilson(x: int, n: int) -> dict:
    """The share x / n with the Wilson interval every surface prints, as a pooled row."""
    low, high = intervals.wilson(pl.lit(x), pl.lit(n))
    bounds = pl.select(low.alias("low"), high.alias("high")).row(0, named=True)
    return {"value": x / n if n else None, "n_effective": n, **bounds}


def test_newcombe_interval_matches_the_paper():
    # Newcombe (1998), method 10, example (a): 56/70 against 48/80 gives 0.2 [0.0524, 0.3339].
    interval = intervals.newcombe(wilson(48, 80), wilson(56, 70))
    assert (interval.low, interval.high) == pytest.approx((0.0524, 0.3339), abs=5e-5)


def test_wilson_at_zero_successes():
    estimate = wilson(0, 10)
    assert estimate["value"] == 0 and estimate["low"] == 0
    assert estimate["high"] == pytest.approx(0.27753, abs=1e-5)
    assert wilson(0, 0)["low"] is None


@given(st.integers(0, 200), st.integers(1, 200), st.integers(0, 200), st.integers(1, 200))
def test_difference_interval_holds_the_difference(x1, n1, x2, n2):
    a, b = wilson(min(x1, n1), n1), wilson(min(x2, n2), n2)
    interval = intervals.newcombe(a, b)
    assert -1 <= interval.low <= b["value"] - a["value"] <= interval.high <= 1


def test_mean_difference_and_cohens_d_by_hand():
    # a = 1..5 (mean 3, s^2 2.5, var of the mean 0.5), b = 2, 4, ..., 10 (mean 6, s^2 10, var 2):
    # d = 3 +- 1.959964 sqrt(2.5); Cohen's d = 3 / sqrt((4 * 2.5 + 4 * 10) / 8) = 3 / sqrt(6.25) = 1.2.
    interval = _stats.mean_difference(3.0, 0.5, 2.0)
    assert (interval.low, interval.high) == pytest.approx((3 - 1.959964 * math.sqrt(2.5), 3 + 1.959964 * math.sqrt(2.5)))
    assert intervals.cohens_d(3.0, 0.5, 5, 2.0, 5) == pytest.approx(1.2)
    assert _stats.mean_difference(3.0, None, 2.0) == (None, None)  # one value on a side: no spread
    assert intervals.cohens_d(3.0, 0.0, 5, 0.0, 5) is None


def test_benjamini_hochberg_matches_a_hand_worked_table():
    # m = 5 tests (None is not one): sorted p 0.001, 0.008, 0.039, 0.041, 0.27 times m / rank
    # gives 0.005, 0.02, 0.065, 0.05125, 0.27; the running minimum from the top brings 0.065 to 0.05125.
    adjusted = _stats.benjamini_hochberg([0.041, 0.001, None, 0.27, 0.039, 0.008])
    assert adjusted[2] is None
    assert adjusted == pytest.approx([0.05125, 0.005, None, 0.27, 0.05125, 0.02])
    assert _stats.benjamini_hochberg([0.9, 0.95]) == pytest.approx([0.95, 0.95])
    assert _stats.benjamini_hochberg([]) == []


@given(st.lists(st.floats(0, 1), min_size=1, max_size=40))
def test_benjamini_hochberg_never_lowers_a_p_value_and_keeps_the_order(p_values):
    adjusted = _stats.benjamini_hochberg(p_values)
    assert all(p <= q <= 1 for p, q in zip(p_values, adjusted))
    pairs = sorted(zip(p_values, adjusted))
    assert all(a[1] <= b[1] for a, b in zip(pairs, pairs[1:]))


def test_a_difference_of_float_rounding_is_no_difference():
    """Two whitened batches' std is 1 up to its last bits; their spread over steps is as small, so a
    test would call 1 against 1 - 1.6e-8 significant. It is rounding: p = 1, effect 0."""
    from trajlens.compare.table import ADVANTAGE_STATISTICS, _row

    std = next(m for m in ADVANTAGE_STATISTICS if m.name == "std")
    side = {"value": 1.0, "low": 1.0, "high": 1.0, "variance": 1e-20, "n_effective": 40.0}
    row = _row(std, side, {**side, "value": 1.0 - 1.6e-8})
    assert (row["difference"], row["p_value"], row["effect_size"], row["statistic"]) == (0.0, 1.0, 0.0, None)
    real = _row(std, side, {**side, "value": 0.9, "variance": 1e-4})
    assert real["p_value"] < 1e-6 and real["effect_size"] < 0

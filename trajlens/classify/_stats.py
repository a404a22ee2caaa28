"""Interval and test formulas for stage reports, as Polars expressions over whole columns.

Notation: ``x`` successes out of ``n`` trials, ``p = x / n``; ``z = 1.959964`` for 95%.

* Wilson score interval (Wilson 1927), the one that stays inside [0, 1] and keeps its coverage
  for small ``n`` and ``p`` near 0 or 1::

      centre = (p + z^2 / 2n) / (1 + z^2 / n)
      half   = z * sqrt(p (1 - p) / n + z^2 / 4n^2) / (1 + z^2 / n)

* Two-proportion z test with pooled variance::

      p_pool = (x1 + x2) / (n1 + n2)
      z      = (p2 - p1) / sqrt(p_pool (1 - p_pool) (1 / n1 + 1 / n2))
      p      = erfc(|z| / sqrt 2)          (two-sided)

* Cohen's h, the effect size of a difference of proportions::

      h = 2 asin(sqrt p2) - 2 asin(sqrt p1)

* Shares of calls pooled over trajectories are ratio estimates whose calls are clustered in
  trajectories; treating calls as independent would give intervals far too narrow. Their
  variance is the cluster (ratio-estimator) variance over the ``m`` trajectories::

      var = m / (m - 1) * sum_i (x_i - p n_i)^2 / (sum_i n_i)^2

  and the Wilson interval and z test use the effective sample size
  ``n_eff = p (1 - p) / var`` (Kish's design effect), capped at the number of calls.
"""

from __future__ import annotations

import math

import polars as pl

from trajlens.intervals import Z95


def wilson(x: pl.Expr, n: pl.Expr, z: float = Z95) -> tuple[pl.Expr, pl.Expr]:
    """(low, high) of the Wilson score interval for ``x`` successes in ``n`` trials; null when
    ``n`` is 0 or null."""
    n = n.cast(pl.Float64)
    p = x.cast(pl.Float64) / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)).sqrt() / denominator
    valid = n > 0
    # The interval always holds p; at p = 0 or 1 rounding would otherwise leave it 1e-17 outside.
    low = pl.when(valid).then(pl.min_horizontal(centre - half, p).clip(0.0, 1.0))
    high = pl.when(valid).then(pl.max_horizontal(centre + half, p).clip(0.0, 1.0))
    return low, high


def two_proportion_z(p1: pl.Expr, n1: pl.Expr, p2: pl.Expr, n2: pl.Expr) -> pl.Expr:
    """z statistic of ``p2 - p1`` with pooled variance; null when undefined (no variance)."""
    n1 = n1.cast(pl.Float64)
    n2 = n2.cast(pl.Float64)
    pooled = (p1 * n1 + p2 * n2) / (n1 + n2)
    se = (pooled * (1 - pooled) * (1 / n1 + 1 / n2)).sqrt()
    return pl.when((n1 > 0) & (n2 > 0) & (se > 0)).then((p2 - p1) / se)


def two_sided_p(z: pl.Expr) -> pl.Expr:
    """Two-sided normal p-value of ``z``: erfc(|z| / sqrt 2)."""
    return z.abs().map_batches(_erfc_over_sqrt2, return_dtype=pl.Float64)


def two_sided_p_value(z: float) -> float:
    """:func:`two_sided_p` of one value, for the tests made one at a time (the checks' stage
    change and trend, and comparisons): erfc(|z| / sqrt 2)."""
    return math.erfc(abs(z) / math.sqrt(2))


def _erfc_over_sqrt2(values: pl.Series) -> pl.Series:
    # A handful of values per report (one per metric and stage pair); math.erfc is exact here.
    return pl.Series([None if v is None else two_sided_p_value(v) for v in values], dtype=pl.Float64)


def cohens_h(p1: pl.Expr, p2: pl.Expr) -> pl.Expr:
    """Cohen's h: 2 asin(sqrt p2) - 2 asin(sqrt p1)."""
    return 2 * p2.sqrt().arcsin() - 2 * p1.sqrt().arcsin()


def normal_mean_interval(mean: pl.Expr, sd: pl.Expr, n: pl.Expr, z: float = Z95) -> tuple[pl.Expr, pl.Expr]:
    """(low, high) of ``mean +- z sd / sqrt n``; null for fewer than two values."""
    half = z * sd / n.cast(pl.Float64).sqrt()
    valid = n >= 2
    return pl.when(valid).then(mean - half), pl.when(valid).then(mean + half)

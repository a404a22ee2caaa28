"""Two-sample formulas for comparisons: proportions and means, each with a test and an effect size.

Notation: side 1 is A, side 2 is B; differences are ``B - A``. ``z = 1.959964`` for 95%.

* Proportions (``x`` of ``n``, or a ratio estimate with effective size ``n``): Wilson interval
  per side; the difference's interval is Newcombe's hybrid score interval (Newcombe 1998,
  method 10), built from the two Wilson intervals ``(l1, u1)`` and ``(l2, u2)``::

      d    = p2 - p1
      low  = d - sqrt((p2 - l2)^2 + (u1 - p1)^2)
      high = d + sqrt((u2 - p2)^2 + (p1 - l1)^2)

  tested with the pooled two-proportion z test and sized with Cohen's h,
  ``2 asin sqrt p2 - 2 asin sqrt p1``.
* Means: Welch's t test, with the Welch-Satterthwaite degrees of freedom::

      se = sqrt(s1^2 / n1 + s2^2 / n2)
      df = se^4 / ((s1^2 / n1)^2 / (n1 - 1) + (s2^2 / n2)^2 / (n2 - 1))

  the difference's interval ``d +- t_{df, 0.975} se`` and Cohen's d on the pooled standard
  deviation ``sqrt(((n1 - 1) s1^2 + (n2 - 1) s2^2) / (n1 + n2 - 2))``.

Student's t distribution is computed here (regularised incomplete beta by Lentz's continued
fraction, Numerical Recipes 6.4) so that the comparison needs no statistics package.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

from trajlens.intervals import Z95


class Estimate(NamedTuple):
    """One side's value with its 95% interval and the sample size behind it."""

    value: float | None
    low: float | None
    high: float | None
    n: float


class Test(NamedTuple):
    """A difference ``B - A`` with its 95% interval, test statistic, p-value and effect size."""

    difference: float | None
    low: float | None
    high: float | None
    statistic: float | None
    p_value: float | None
    effect_size: float | None


EMPTY_TEST = Test(None, None, None, None, None, None)


def wilson(x: float, n: float, z: float = Z95) -> Estimate:
    """Share ``x / n`` with its Wilson score interval (no interval when ``n`` is 0)."""
    if n <= 0:
        return Estimate(None, None, None, n)
    p = x / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(max(p * (1 - p) / n + z * z / (4 * n * n), 0.0)) / denominator
    return Estimate(p, max(min(centre - half, p), 0.0), min(max(centre + half, p), 1.0), n)


def two_proportions(a: Estimate, b: Estimate) -> Test:
    """Newcombe interval, pooled z test and Cohen's h of ``b.value - a.value``."""
    if a.value is None or b.value is None:
        return EMPTY_TEST
    p1, p2 = a.value, b.value
    difference = p2 - p1
    low = difference - math.sqrt((p2 - b.low) ** 2 + (a.high - p1) ** 2)
    high = difference + math.sqrt((b.high - p2) ** 2 + (p1 - a.low) ** 2)
    pooled = (p1 * a.n + p2 * b.n) / (a.n + b.n)
    se = math.sqrt(pooled * (1 - pooled) * (1 / a.n + 1 / b.n))
    statistic = difference / se if se > 0 else None
    p_value = math.erfc(abs(statistic) / math.sqrt(2)) if statistic is not None else (1.0 if difference == 0 else None)
    h = 2 * math.asin(math.sqrt(p2)) - 2 * math.asin(math.sqrt(p1))
    return Test(difference, max(low, -1.0), min(high, 1.0), statistic, p_value, h)


class Sample(NamedTuple):
    """Mean, standard deviation and count of one side's values."""

    mean: float | None
    sd: float | None
    n: int


def mean_estimate(sample: Sample) -> Estimate:
    """The mean with its t interval (no interval below two values)."""
    if sample.mean is None or sample.n < 2 or sample.sd is None:
        return Estimate(sample.mean, None, None, sample.n)
    half = t_quantile(0.975, sample.n - 1) * sample.sd / math.sqrt(sample.n)
    return Estimate(sample.mean, sample.mean - half, sample.mean + half, sample.n)


def welch(a: Sample, b: Sample) -> Test:
    """Welch's t test, the difference's t interval and Cohen's d of ``b.mean - a.mean``."""
    if a.mean is None or b.mean is None or a.n < 2 or b.n < 2 or a.sd is None or b.sd is None:
        return EMPTY_TEST if a.mean is None or b.mean is None else Test(b.mean - a.mean, None, None, None, None, None)
    difference = b.mean - a.mean
    va, vb = a.sd ** 2 / a.n, b.sd ** 2 / b.n
    se = math.sqrt(va + vb)
    pooled = math.sqrt(((a.n - 1) * a.sd ** 2 + (b.n - 1) * b.sd ** 2) / (a.n + b.n - 2))
    effect = difference / pooled if pooled > 0 else None
    if se == 0:
        return Test(difference, difference, difference, None, 1.0 if difference == 0 else 0.0, effect)
    df = (va + vb) ** 2 / (va ** 2 / (a.n - 1) + vb ** 2 / (b.n - 1))
    statistic = difference / se
    half = t_quantile(0.975, df) * se
    return Test(difference, difference - half, difference + half, statistic, 2 * t_sf(abs(statistic), df), effect)


def t_sf(t: float, df: float) -> float:
    """Upper tail P(T > t) of Student's t with ``df`` degrees of freedom, for t >= 0."""
    x = df / (df + t * t)
    return 0.5 * _incomplete_beta(df / 2, 0.5, x)


@lru_cache(maxsize=4096)
def t_quantile(probability: float, df: float) -> float:
    """The t with P(T <= t) = probability (probability in (0.5, 1)), by bisection (remembered:
    a report asks for the same few degrees of freedom many times)."""
    low, high = 0.0, 1.0
    while 1 - t_sf(high, df) < probability:
        high *= 2
    for _ in range(80):
        middle = (low + high) / 2
        if 1 - t_sf(middle, df) < probability:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, 1 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return result


def benjamini_hochberg(p_values: list[float | None]) -> list[float | None]:
    """Benjamini-Hochberg adjusted p-values (the false discovery rate controlled at the level a
    row is called significant), over the values that are not None; None stays None.

    With ``m`` tests ranked by p ascending, ``p_adj(i) = min_{j >= i} min(1, m p(j) / j)``.
    """
    ranked = sorted((p, i) for i, p in enumerate(p_values) if p is not None and not math.isnan(p))
    m = len(ranked)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 1.0
    for rank in range(m, 0, -1):
        p, index = ranked[rank - 1]
        running = min(running, m * p / rank)  # p_adj(i) = min_{j >= i} m p(j) / j
        adjusted[index] = min(max(running, p), 1.0)  # never below p, whatever m p / rank rounds to
    return adjusted

"""What a comparison adds to the checks' estimates: the difference's interval, the effect size,
and the adjustment of a table's p-values.

Each side's value, 95% interval and effective size is the checks' pooled estimate
(:func:`trajlens.intervals.pooled` of the side's summed per-unit statistics), and the
test of ``B - A`` is the checks' stage test (:func:`trajlens.intervals.stage_p_value`:
:func:`~trajlens.intervals.stage_z` read on Student's t), so a
comparison of two stages of a run gives the numbers ``trajlens check`` gives for them. Cohen's
h is :func:`trajlens.classify._stats.cohens_h`. Notation: side 1 is A, side 2 is B;
differences are ``B - A``; ``z = 1.959964`` for 95%.

* Proportions: Newcombe's hybrid score interval of the difference
  (:func:`trajlens.intervals.newcombe`, as drift attribution tells a share that held).

* Means: the normal interval of the difference with the variance of the stage test,
  ``d +- z sqrt(var1 + var2)`` (``var = s^2 / m`` over ``m`` units: Welch's standard error),
  and Cohen's d on the pooled standard deviation
  ``sqrt(((m1 - 1) s1^2 + (m2 - 1) s2^2) / (m1 + m2 - 2))``, with ``s^2 = m var``.

"""

from __future__ import annotations

import math
from typing import NamedTuple


from trajlens.intervals import Z95, Difference


class Estimate(NamedTuple):
    """One side's value with its 95% interval and the (effective) sample size behind it."""

    value: float | None
    low: float | None
    high: float | None
    n: float


def mean_difference(difference: float, variance_a: float | None, variance_b: float | None,
                    z: float = Z95) -> Difference:
    """``d +- z sqrt(var1 + var2)``: the interval of a difference of means with the variance the
    stage test divides by; none without both variances (fewer than two units on a side)."""
    if variance_a is None or variance_b is None:
        return Difference(None, None)
    half = z * math.sqrt(variance_a + variance_b)
    return Difference(difference - half, difference + half)


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

"""The one pooled estimate, 95% interval and change test behind every number trajlens prints.

A measure over any set of units (trajectories, reward groups, or steps for a logged scalar) is
a ratio estimate. For units ``i`` with numerator ``x_i`` and denominator ``n_i``::

    value p = sum x_i / sum n_i
    var(p)  = m / (m - 1) * sum (x_i - p n_i)^2 / (sum n_i)^2          (m units)
            = m / (m - 1) * (Sxx - 2 p Sxn + p^2 Snn) / N^2

so the sums :data:`SUMS` (``x = sum x_i``, ``n = N``, ``units = m``, ``sxx``, ``sxn``, ``snn``)
are all a set of units needs, and sets pool by adding their sums: a window of steps, a stage,
a quarter, a whole run, one side of a comparison. A call share pooled over trajectories is
therefore never treated as independent calls; a mean is the case ``n_i = 1`` (``var = s^2 / m``);
a share of units (``x_i`` 0 or 1, ``n_i = 1``) gets ``var = p (1 - p) / (m - 1)``.

Intervals (``z = 1.959964``, :data:`Z95`):

* proportions: the Wilson score interval (Wilson 1927) on the effective sample size
  ``n_eff = p (1 - p) / var`` (Kish's design effect), capped at ``N``; ``N`` itself when the
  variance is zero or cannot be told (one unit)::

      centre = (p + z^2 / 2n) / (1 + z^2 / n)
      half   = z * sqrt(p (1 - p) / n + z^2 / 4n^2) / (1 + z^2 / n)

* means: ``p +- z sqrt(var)``, none below two units, cut to the measure's support where the
  caller declares one (``support``): a mean of shares lies in [0, 1], a mean of counts at 0 or
  more, so its interval does too.

The change from one set to another (:func:`stage_z`): for proportions the two-proportion
statistic with pooled variance on the effective sizes, ``t = (p2 - p1) / sqrt(q (1 - q) (1 / n1 + 1 / n2))``
with ``q = (p1 n1 + p2 n2) / (n1 + n2)``; for means ``t = (p2 - p1) / sqrt(var1 + var2)`` (Welch's
statistic). Its two-sided p-value (:func:`stage_p_value`) reads the statistic on Student's t
with Welch-Satterthwaite's degrees of freedom ``(v1 + v2)^2 / (v1^2 / d1 + v2^2 / d2)``: for a
mean, whose variances come from the sets' ``m`` units, ``d = m - 1``; for a proportion, ``v =
1 / n_eff`` and ``d = m - 1`` where the design effect was estimated from the units (``N`` draws
from fewer units, calls from trajectories, as clustered inference counts its clusters), else
``n_eff - 1``. Two stages of a few trajectories each
(2 against 2) so get the wide p-value they warrant rather than the normal one; over hundreds of
draws the two agree. So the tests are t tests, :data:`PROPORTION_TEST` and :data:`MEAN_TEST` by
name. The interval of a proportion's change is Newcombe's (:func:`newcombe`).

The checks, the stage report, the report's overview and run summary, comparisons and drift
attribution all compute their estimates here, so one fact has one value and one interval on
every surface.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from functools import lru_cache
from typing import NamedTuple

import polars as pl

Z95 = 1.959963984540054
"""Two-sided 95% standard-normal quantile: the 0.975 quantile of N(0, 1)."""

PROPORTION_TEST = "two-proportion t"
"""The name of :func:`stage_p_value`'s test of a proportion, wherever a report names it: the
two-proportion statistic is read on Student's t, not on the normal, so it is no z test."""
MEAN_TEST = "Welch t"
"""The name of :func:`stage_p_value`'s test of a mean: Welch's statistic on Student's t."""

Bounds = tuple[float | None, float | None]
Support = Callable[[str], "Bounds | None"]
"""The (lowest, highest) value a measure, by name, can take (None: no bound that side), or None
for a measure without a declared support; ``MEAN_SUPPORT.get`` is one."""

SUMS: tuple[str, ...] = ("x", "n", "units", "sxx", "sxn", "snn")
"""The sums of a set of units from which :func:`pooled` computes its estimate."""

Spec = tuple[str, pl.Expr, pl.Expr]
"""A measure of units: (name, numerator ``x_i``, denominator ``n_i``); a unit whose numerator or
denominator is null is left out of it."""


def sums(frame: pl.DataFrame, specs: Sequence[Spec], by: Sequence[str] = ()) -> pl.DataFrame:
    """The :data:`SUMS` of each measure of ``specs`` over the rows (units) of ``frame``, per
    group of the ``by`` columns: columns ``*by, measure, *SUMS``."""
    columns = frame.select(*by, *(
        expr.cast(pl.Float64).alias(f"{part}{i}") for i, (_, x, n) in enumerate(specs) for part, expr in (("x", x), ("n", n))))
    rows = pl.concat([columns.select(*by, pl.lit(name).alias("measure"), pl.col(f"x{i}").alias("x"),
                                     pl.col(f"n{i}").alias("n")) for i, (name, _, _) in enumerate(specs)]).drop_nulls(["x", "n"])
    return rows.group_by(*by, "measure", maintain_order=True).agg(
        pl.col("x").sum(), pl.col("n").sum(), pl.len().cast(pl.Int64).alias("units"),
        (pl.col("x") ** 2).sum().alias("sxx"), (pl.col("x") * pl.col("n")).sum().alias("sxn"),
        (pl.col("n") ** 2).sum().alias("snn"),
    )


def added(frame: pl.DataFrame, by: Sequence[str] = ("measure",)) -> pl.DataFrame:
    """The :data:`SUMS` of ``frame``'s rows added up per group of ``by`` (all rows into one
    without ``by``): sets pooled into one."""
    total = [pl.col(c).cast(pl.Float64).sum() for c in SUMS]
    return frame.group_by(*by, maintain_order=True).agg(total) if by else frame.select(total)


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


def pooled(frame: pl.DataFrame, proportion: bool, support: Support | None = None) -> pl.DataFrame:
    """Add ``value``, ``variance``, ``n_effective``, ``low`` and ``high`` computed from the
    :data:`SUMS` of each row (see the module docstring); a mean's interval is cut to the
    ``support`` of its ``measure``, where given."""
    for columns in _pooled_columns(proportion):
        frame = frame.with_columns(columns)
    if support and not proportion and "measure" in frame.columns:
        frame = _within_support(frame, support)
    return frame


def _within_support(frame: pl.DataFrame, support: Support) -> pl.DataFrame:
    """``low`` and ``high`` of each row cut to the support of its ``measure`` (a measure without
    one keeps its interval)."""
    declared = {name: limits for name in frame["measure"].unique().to_list() if (limits := support(name)) is not None}
    if not declared:
        return frame
    bounds = []
    for column, side, clip in (("low", 0, pl.max_horizontal), ("high", 1, pl.min_horizontal)):
        bound = pl.col("measure").replace_strict({name: limits[side] for name, limits in declared.items()},
                                                 default=None, return_dtype=pl.Float64)
        bounds.append(pl.when(pl.col(column).is_not_null() & bound.is_not_null())
                      .then(clip(pl.col(column), bound)).otherwise(pl.col(column)).alias(column))
    return frame.with_columns(bounds)


@lru_cache(maxsize=2)
def _pooled_columns(proportion: bool) -> tuple[tuple[pl.Expr, ...], ...]:
    """The expressions :func:`pooled` adds, in three rounds (each reads the columns of the one
    before); built once, as checks and reports pool thousands of small frames."""
    p = pl.col("x") / pl.col("n")
    ss = pl.col("sxx") - 2 * p * pl.col("sxn") + p * p * pl.col("snn")
    variance = pl.when(pl.col("units") >= 2).then(
        pl.col("units") / (pl.col("units") - 1) * ss.clip(lower_bound=0.0) / pl.col("n") ** 2)
    first = (pl.when(pl.col("n") > 0).then(p).alias("value"), variance.alias("variance"))
    if proportion:
        n_effective = pl.when(pl.col("variance") > 0).then(
            pl.min_horizontal(pl.col("value") * (1 - pl.col("value")) / pl.col("variance"), pl.col("n"))
        ).otherwise(pl.col("n"))
        second = n_effective.cast(pl.Float64).alias("n_effective")
        low, high = wilson(pl.col("value") * pl.col("n_effective"), pl.col("n_effective"))
    else:
        half = Z95 * pl.col("variance").sqrt()
        second = pl.col("units").cast(pl.Float64).alias("n_effective")
        low, high = pl.col("value") - half, pl.col("value") + half
    return first, (second,), (low.alias("low"), high.alias("high"))


def pooled_rows(stats: pl.DataFrame, proportions: Collection[str], support: Support | None = None) -> dict[str, dict]:
    """Each measure's :func:`pooled` row (value, variance, n_effective, low, high) by name, from
    one row of :data:`SUMS` per measure: those named in ``proportions`` as proportions, the
    others as means (within their ``support``, where given)."""
    rows: dict[str, dict] = {}
    for proportion in (True, False):
        part = stats.filter(pl.col("measure").is_in(list(proportions)) == proportion)
        if part.height:
            rows.update((row["measure"], row) for row in pooled(part, proportion, support).iter_rows(named=True))
    return rows


def stage_z(first: dict, second: dict, proportion: bool) -> float | None:
    """Statistic of the change from one :func:`pooled` row to another, which
    :func:`stage_p_value` reads on Student's t: for a proportion, a two-proportion statistic on
    each side's effective count (its calls or trajectories shrunk by
    how much they cluster in units); else the difference over the root of the summed
    variances. None when it cannot be told."""
    if first["value"] is None or second["value"] is None:
        return None
    if proportion:
        n1, n2 = first["n_effective"], second["n_effective"]
        if not n1 or not n2:
            return None
        pooled_p = (first["value"] * n1 + second["value"] * n2) / (n1 + n2)
        se = math.sqrt(max(pooled_p * (1 - pooled_p), 0.0) * (1 / n1 + 1 / n2))
    else:
        if first["variance"] is None or second["variance"] is None:
            return None
        se = math.sqrt(first["variance"] + second["variance"])
    return (second["value"] - first["value"]) / se if se > 0 else None


class Difference(NamedTuple):
    """The 95% interval of a difference ``second - first`` (None where it cannot be told)."""

    low: float | None
    high: float | None


def newcombe(first: dict, second: dict) -> Difference:
    """Newcombe's hybrid score interval (Newcombe 1998, method 10) of the change of a proportion
    from one :func:`pooled` row to another, built from their Wilson intervals ``(l1, u1)`` and
    ``(l2, u2)``::

        d    = p2 - p1
        low  = d - sqrt((p2 - l2)^2 + (u1 - p1)^2)
        high = d + sqrt((u2 - p2)^2 + (p1 - l1)^2)

    Unlike the normal interval it holds a share of 0 or 1 and does not cross +-1."""
    values = (first["value"], first["low"], first["high"], second["value"], second["low"], second["high"])
    if any(value is None for value in values):
        return Difference(None, None)
    p1, l1, u1, p2, l2, u2 = values
    difference = p2 - p1
    low = difference - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2)
    high = difference + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2)
    return Difference(max(low, -1.0), min(high, 1.0))


def two_sided_p_value(z: float) -> float:
    """Two-sided normal p-value of ``z``: erfc(|z| / sqrt 2)."""
    return math.erfc(abs(z) / math.sqrt(2))


def cohens_d(difference: float, variance_a: float | None, units_a: float,
             variance_b: float | None, units_b: float) -> float | None:
    """Cohen's d on the pooled standard deviation, each side's ``s^2 = m var`` (``var`` the
    variance of its mean over ``m`` units); None without a spread."""
    if variance_a is None or variance_b is None or units_a + units_b <= 2:
        return None
    pooled_variance = ((units_a - 1) * units_a * variance_a + (units_b - 1) * units_b * variance_b) \
        / (units_a + units_b - 2)
    return difference / math.sqrt(pooled_variance) if pooled_variance > 0 else None


def stage_p_value(first: dict, second: dict, proportion: bool) -> float | None:
    """Two-sided p-value of the change from one :func:`pooled` row to another: :func:`stage_z`
    on Student's t (module docstring); a mean on the normal where a row does not say its
    ``units``. None when it cannot be told (:func:`stage_z` cannot, or a proportion of fewer
    than two effective draws in all)."""
    z = stage_z(first, second, proportion)
    if z is None:
        return None
    df = _degrees_of_freedom(first, second, proportion)
    if df is not None and df < 1:
        return None
    return two_sided_p_value(z) if df is None else student_t_p_value(z, df)


def _degrees_of_freedom(first: dict, second: dict, proportion: bool) -> float | None:
    if proportion:
        return _proportion_degrees_of_freedom(first, second)
    m1, m2 = first.get("units"), second.get("units")
    if m1 is None or m2 is None:
        return None
    v1, v2 = first.get("variance"), second.get("variance")
    if v1 is None or v2 is None or m1 < 2 or m2 < 2:
        return None
    spread = v1 * v1 / (m1 - 1) + v2 * v2 / (m2 - 1)
    return (v1 + v2) ** 2 / spread if spread > 0 else None


def _proportion_degrees_of_freedom(first: dict, second: dict) -> float:
    """Welch-Satterthwaite's degrees of freedom of a two-proportion statistic: a side's variance
    ``q (1 - q) / n_eff`` has ``units - 1`` of its own where its design effect was estimated from
    its units (calls drawn from fewer trajectories: six trajectories give 5 whatever their calls,
    also where the estimate came out at 1), else ``n_eff - 1``."""
    parts = []
    for row in (first, second):
        n_effective, n, units = row["n_effective"], row.get("n"), row.get("units")
        clustered = n is not None and units is not None and units < n
        parts.append((1.0 / n_effective, (units - 1) if clustered else n_effective - 1))
    if any(own <= 0 for _, own in parts):
        return 0.0
    return sum(v for v, _ in parts) ** 2 / sum(v * v / own for v, own in parts)


def student_t_p_value(t: float, df: float) -> float:
    """Two-sided p-value of ``t`` on Student's t with ``df`` degrees of freedom (``df`` may be
    fractional): the regularized incomplete beta ``I_x(df / 2, 1 / 2)`` at ``x = df / (df + t^2)``;
    within 1e-9 relative of SciPy's up to 1e7 degrees of freedom, in a few microseconds."""
    return min(1.0, _regularized_beta(df / (df + t * t), df / 2, 0.5))


def _regularized_beta(x: float, a: float, b: float) -> float:
    """``I_x(a, b)`` by its continued fraction (Numerical Recipes' ``betai``), on the side of
    ``x`` where the fraction converges fast."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(x, a, b) / a
    return 1.0 - front * _beta_fraction(1.0 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300

    def kept(value: float) -> float:
        return tiny if abs(value) < tiny else value

    c, d = 1.0, 1.0 / kept(1.0 - (a + b) * x / (a + 1))
    fraction = d
    for m in range(1, 100_000):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 / kept(1.0 + numerator * d)
            c = kept(1.0 + numerator / c)
            fraction *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return fraction


def repeat_key(values: Sequence[float | None], numbers: Sequence[float | int | None]) -> tuple | None:
    """The key under which a table shows a measure as the same as an earlier one (one count
    under two names: ``mean:n_calls`` and ``mean:num_turns`` when every turn makes one call):
    ``numbers``, the row's estimates and sizes, to 12 decimals. None when its ``values`` (the
    point estimates) are all missing or zero: zeros coincide without meaning, and such a
    measure is shown on its own."""
    if all(value is None or value == 0 for value in values):
        return None
    return tuple(None if number is None else round(float(number), 12) for number in numbers)

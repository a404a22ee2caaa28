"""The stage report's test columns, as Polars expressions over whole columns.

Values, intervals and the change test come from :mod:`trajlens.intervals`, as they do on every
surface; what is left here is their column forms:

* the two-sided p-value of a column of z statistics, ``p = erfc(|z| / sqrt 2)``;
* Cohen's h, the effect size of a difference of proportions::

      h = 2 asin(sqrt p2) - 2 asin(sqrt p1)
"""

from __future__ import annotations

import polars as pl

from trajlens.intervals import two_sided_p_value


def two_sided_p(z: pl.Expr) -> pl.Expr:
    """Two-sided normal p-value of ``z``: erfc(|z| / sqrt 2)."""
    return z.abs().map_batches(_erfc_over_sqrt2, return_dtype=pl.Float64)


def _erfc_over_sqrt2(values: pl.Series) -> pl.Series:
    # A handful of values per report (one per metric and stage pair); math.erfc is exact here.
    return pl.Series([None if v is None else two_sided_p_value(v) for v in values], dtype=pl.Float64)


def cohens_h(p1: pl.Expr, p2: pl.Expr) -> pl.Expr:
    """Cohen's h: 2 asin(sqrt p2) - 2 asin(sqrt p1)."""
    return 2 * p2.sqrt().arcsin() - 2 * p1.sqrt().arcsin()

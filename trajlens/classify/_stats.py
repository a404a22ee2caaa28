"""The stage report's effect-size column, as a Polars expression over whole columns.

Values, intervals and the change test come from :mod:`trajlens.intervals`, as they do on every
surface; what is left here is Cohen's h, the effect size of a difference of proportions::

      h = 2 asin(sqrt p2) - 2 asin(sqrt p1)
"""

from __future__ import annotations

import polars as pl


def cohens_h(p1: pl.Expr, p2: pl.Expr) -> pl.Expr:
    """Cohen's h: 2 asin(sqrt p2) - 2 asin(sqrt p1)."""
    return 2 * p2.sqrt().arcsin() - 2 * p1.sqrt().arcsin()

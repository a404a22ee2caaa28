"""The first and the last quarter of a run's steps: the one definition behind every early-vs-late comparison.

A quarter is counted in *distinct* steps, in order, whatever the gaps between them: the first
and the last ``max(1, n // 4)`` of the ``n`` distinct steps. So 7 steps give one step each, 9
give two, and steps 0, 10, 20, ..., 70 give 0 and 10 against 60 and 70. A run of fewer than
eight steps compares its first step with its last (one step: that step with itself).

The report (channel findings, the overview's trends and their hover text) and attribution
(length and channel changes, the projection's final shares) take their quarters from
:func:`quarters`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike


class QuarterMeans(NamedTuple):
    """Means of a quantity over the first and the last quarter of the steps (NaN: no value there)."""

    first: float
    last: float


class Quarters(NamedTuple):
    """The distinct steps of the first and of the last quarter, ascending."""

    first: np.ndarray
    last: np.ndarray

    def masks(self, steps: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Boolean masks of the rows of ``steps`` (one step per row, any order) in the first and the last quarter."""
        steps = np.asarray(steps)
        return np.isin(steps, self.first), np.isin(steps, self.last)

    def means(self, steps: ArrayLike, values: ArrayLike) -> QuarterMeans:
        """Mean of ``values`` over the rows of each quarter (``steps`` and ``values`` row by row);
        NaN values are left out, and a quarter without a value is NaN."""
        values = np.asarray(values, dtype=float)
        first, last = self.masks(steps)
        return QuarterMeans(_mean(values[first]), _mean(values[last]))


def quarters(steps: ArrayLike) -> Quarters:
    """The first and the last quarter of the distinct values of ``steps`` (module docstring)."""
    distinct = np.unique(np.asarray(steps))
    size = max(1, distinct.size // 4)
    return Quarters(distinct[:size], distinct[-size:])


def _mean(values: np.ndarray) -> float:
    finite = values[~np.isnan(values)]
    return float(finite.mean()) if finite.size else float("nan")


__all__ = ["QuarterMeans", "Quarters", "quarters"]

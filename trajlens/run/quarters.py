"""The first and the last quarter of a run's steps: the one definition behind every early-vs-late comparison.

A quarter is the first or the last of the four stages the quartile staging cuts a run's
*distinct* steps into, in order, whatever the gaps between them (:func:`trajlens.steps.stage_index`,
the cut of the stage reports' Q1..Q4 and of the checks' stage comparisons): so the "first
quarter" of a finding is the Q1 of the stage table beside it. 8 steps give two each; 9 give
three (Q1) and two (Q4); steps 0, 10, ..., 70 give 0 and 10 against 60 and 70. A run of fewer
than four steps compares the first stage it has with the last (one step: that step with itself).

The report (channel findings, the overview's trends and their hover text) and attribution
(length and channel changes, the projection's final shares) take their quarters from
:func:`quarters`; what change between them counts is :mod:`trajlens.run.change`'s.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from trajlens.steps import stage_index

QUARTERS = 4
"""Stages of the quartile staging (Q1..Q4)."""

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
    stage = stage_index(np.arange(distinct.size), max(distinct.size, 1), QUARTERS)
    return Quarters(distinct[stage == stage.min(initial=0)], distinct[stage == stage.max(initial=0)])


def _mean(values: np.ndarray) -> float:
    finite = values[~np.isnan(values)]
    return float(finite.mean()) if finite.size else float("nan")


__all__ = ["QuarterMeans", "Quarters", "quarters"]

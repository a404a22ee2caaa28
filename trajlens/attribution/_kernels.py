"""Compiled sums over call spans and trajectories: one pass over a step's tokens per estimator.

Call credit needs, per estimator, the sum of the advantages over each call's span and over each
trajectory's model tokens, and their largest and smallest values; the NumPy route
(:func:`trajlens.attribution._spans.masked_prefix`) builds an (N,) masked copy and an (N + 1,)
float64 prefix sum for that, three passes over memory. Compiled (numba, as
:mod:`trajlens.estimators.flat`), it is one read of the values and the mask, accumulated
in float64. Without numba the plain functions run (correct, slow) and callers use the NumPy
route instead (:data:`AVAILABLE`).

Shapes: N tokens of the step, B trajectories (``offsets`` (B + 1,)), C calls (spans
``low``/``high``, flat indices, ``low <= high``, within their trajectory).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

try:
    import numba
except ImportError:  # callers use the NumPy prefix sums instead
    numba = None  # type: ignore[assignment]

AVAILABLE: bool = numba is not None


def _masked_sums(  # pragma: no cover - compiled
    values: Any, mask: Any, offsets: Any, call_row: Any, low: Any, high: Any, span_sums: Any, row_sums: Any,
) -> tuple[float, float]:
    """Fill ``span_sums`` (C,) and ``row_sums`` (B,) with sums of ``values`` over model tokens, in
    one pass: a span's sum is the running total of its row at ``high`` minus that at ``low``.
    Calls are sorted by ``call_row``, and within a row ``low`` and ``high`` do not decrease.
    Returns the largest and the smallest value at a model token (-inf and inf when there is none)."""
    largest = -math.inf
    smallest = math.inf
    calls = low.shape[0]
    opened = 0  # next call whose low is still to be passed
    closed = 0  # next call whose high is still to be passed
    for row in range(offsets.shape[0] - 1):
        total = 0.0
        for t in range(offsets[row], offsets[row + 1]):
            while opened < calls and call_row[opened] == row and low[opened] == t:
                span_sums[opened] = -total
                opened += 1
            while closed < calls and call_row[closed] == row and high[closed] == t:
                span_sums[closed] += total
                closed += 1
            if mask[t]:
                value = float(values[t])
                total += value
                if value > largest:
                    largest = value
                if value < smallest:
                    smallest = value
        while opened < calls and call_row[opened] == row:  # spans that start at the row's end
            span_sums[opened] = -total
            opened += 1
        while closed < calls and call_row[closed] == row:
            span_sums[closed] += total
            closed += 1
        row_sums[row] = total
    return largest, smallest


masked_sums = numba.njit(nogil=True, cache=True)(_masked_sums) if AVAILABLE else _masked_sums


def span_and_row_sums(
    values: np.ndarray, mask: np.ndarray, offsets: np.ndarray, call_row: np.ndarray, low: np.ndarray,
    high: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(C,) span sums, (B,) trajectory sums over model tokens, and the largest and the smallest
    model-token value.

    ``call_row`` is each call's trajectory (sorted); ``low``/``high`` its flat span, as
    :func:`trajlens.attribution._spans.span_bounds` gives them (ordered within a trajectory)."""
    span = np.zeros(low.shape[0], dtype=np.float64)
    rows = np.empty(offsets.shape[0] - 1, dtype=np.float64)
    as_int = [np.ascontiguousarray(a, dtype=np.int64) for a in (offsets, call_row, low, high)]
    largest, smallest = masked_sums(values, mask, as_int[0], as_int[1], as_int[2], as_int[3], span, rows)
    return span, rows, float(largest), float(smallest)

"""Compiled sums over call spans and trajectories: one pass over a step's tokens per estimator.

Call credit needs, per estimator, the sum of the advantages over each call's span and over each
trajectory's model tokens, and their largest value; the NumPy route
(:func:`trajlens.attribution._spans.masked_prefix`) builds an (N,) masked copy and an (N + 1,)
float64 prefix sum for that, three passes over memory. Compiled (numba, as
:mod:`trajlens.estimators._compiled`), it is one read of the values and the mask, accumulated
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
    values: Any, mask: Any, offsets: Any, low: Any, high: Any, span_sums: Any, row_sums: Any,
) -> float:
    """Fill ``span_sums`` (C,) and ``row_sums`` (B,) with sums of ``values`` over model tokens;
    return the largest value at a model token (-inf when there is none)."""
    largest = -math.inf
    for row in range(offsets.shape[0] - 1):
        total = 0.0
        for t in range(offsets[row], offsets[row + 1]):
            if mask[t]:
                value = float(values[t])
                total += value
                if value > largest:
                    largest = value
        row_sums[row] = total
    for call in range(low.shape[0]):
        total = 0.0
        for t in range(low[call], high[call]):
            if mask[t]:
                total += float(values[t])
        span_sums[call] = total
    return largest


masked_sums = numba.njit(nogil=True, cache=True)(_masked_sums) if AVAILABLE else _masked_sums


def span_and_row_sums(
    values: np.ndarray, mask: np.ndarray, offsets: np.ndarray, low: np.ndarray, high: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """(C,) span sums, (B,) trajectory sums over model tokens, and the largest model-token value."""
    span = np.empty(low.shape[0], dtype=np.float64)
    rows = np.empty(offsets.shape[0] - 1, dtype=np.float64)
    largest = masked_sums(values, mask, offsets, low.astype(np.int64, copy=False), high.astype(np.int64, copy=False),
                          span, rows)
    return span, rows, float(largest)

"""Compiled CPU kernels for the masked reverse scan: one pass over each row, back to front.

verl's loop over time is slow in Python because every token costs a round of interpreter and
tensor-op overhead for the whole batch; the same loop compiled (numba, LLVM) costs about one
fused multiply-add per token and reads each input once, which puts it near the memory floor.
The loop is verl's ``compute_gae_advantage_return`` recurrence, row by row, over flat arrays
with row offsets (a (B, T) tensor is the flat case with ``offsets = [0, T, 2T, ...]``; an
Arrow list column is the ragged one, see :mod:`._arrays`)::

    at a model token:        delta = r_t + gamma * V_next - V_t
                             A_t = delta + c * A_next;  V_next = V_t
    at an observation token: A_t = A_next (carried);    V_next unchanged

with ``c = gamma * lambda`` (``V`` absent and ``delta = r_t`` for discounted returns). It
departs from verl only in accumulating in float64 whatever the input dtype (float32 results are
rounded once, at the store), so its float32 error does not grow with the row length.

numba is a dependency, but the package runs without it: :data:`AVAILABLE` says whether it
imported, and :mod:`trajlens.estimators._scan` falls back to its torch kernel otherwise. The
kernels release the GIL, so :mod:`._scan` runs row chunks on several threads at once.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

try:
    import numba
except ImportError:  # the torch kernel is used instead
    numba = None  # type: ignore[assignment]

AVAILABLE: bool = numba is not None
DTYPES: tuple[type, ...] = (np.float32, np.float64)


def _masked_gae_rows(  # pragma: no cover - compiled
    rewards: NDArray[Any], values: NDArray[Any], mask: NDArray[Any], offsets: NDArray[Any], gamma: float, c: float,
    advantages: NDArray[Any], returns: NDArray[Any],
) -> tuple[bool, bool]:
    """GAE over rows ``offsets[i]:offsets[i + 1]`` of the flat arrays: fills ``advantages`` and
    ``returns`` (A + V) there; returns (some row without a model token?, a non-finite TD error?)."""
    empty = False
    nonfinite = False
    for row in range(offsets.shape[0] - 1):
        running = 0.0
        next_value = 0.0
        seen = False
        for t in range(offsets[row + 1] - 1, offsets[row] - 1, -1):
            value = float(values[t])
            if mask[t]:
                delta = float(rewards[t]) + gamma * next_value - value  # delta_t = r_t + gamma V_next - V_t
                if not math.isfinite(delta):
                    nonfinite = True
                running = delta + c * running  # A_t = delta_t + c A_next
                next_value = value
                seen = True
            advantages[t] = running
            returns[t] = running + value  # R_t = A_t + V_t
        if not seen:
            empty = True
    return empty, nonfinite


def _masked_returns_rows(  # pragma: no cover - compiled
    rewards: NDArray[Any], mask: NDArray[Any], offsets: NDArray[Any], c: float, out: NDArray[Any],
) -> tuple[bool, bool]:
    """Discounted returns (``G_t = r_t + c G_next`` over model tokens) over the rows of the flat
    arrays; returns the same two flags."""
    empty = False
    nonfinite = False
    for row in range(offsets.shape[0] - 1):
        running = 0.0
        seen = False
        for t in range(offsets[row + 1] - 1, offsets[row] - 1, -1):
            if mask[t]:
                reward = float(rewards[t])
                if not math.isfinite(reward):
                    nonfinite = True
                running = reward + c * running
                seen = True
            out[t] = running
        if not seen:
            empty = True
    return empty, nonfinite


def _row_summaries(  # pragma: no cover - compiled
    advantages: NDArray[Any], mask: NDArray[Any], offsets: NDArray[Any], mean: NDArray[Any], first: NDArray[Any],
    last: NDArray[Any],
) -> None:
    """Per row: mean advantage over model tokens, and the advantage at the first and last model
    token (NaN for a row without one)."""
    for row in range(offsets.shape[0] - 1):
        total = 0.0
        count = 0
        first[row] = math.nan
        last[row] = math.nan
        for t in range(offsets[row], offsets[row + 1]):
            if mask[t]:
                value = float(advantages[t])
                if count == 0:
                    first[row] = value
                last[row] = value
                total += value
                count += 1
        mean[row] = total / count if count else math.nan


def _last_model_token(mask: NDArray[Any], offsets: NDArray[Any], out: NDArray[Any]) -> None:  # pragma: no cover - compiled
    """Flat index of each row's last model token (-1 for a row without one)."""
    for row in range(offsets.shape[0] - 1):
        out[row] = -1
        for t in range(offsets[row + 1] - 1, offsets[row] - 1, -1):
            if mask[t]:
                out[row] = t
                break


def _masked_moments(values: NDArray[Any], mask: NDArray[Any], out: NDArray[Any]) -> None:  # pragma: no cover - compiled
    """Moments of ``values`` over model tokens, in float64, in two passes.

    ``out`` (9,) float64 receives: count, mean, m2, m3, m4 (central, population), the number
    of values > 0 and < 0, and the number above and below verl's whitening mean
    ``sum / (count + 1e-8)`` (the signs of the whitened values).
    """
    count = 0
    total = 0.0
    for t in range(values.shape[0]):
        if mask[t]:
            total += float(values[t])
            count += 1
    mean = total / count if count else math.nan
    threshold = total / (count + 1e-8)
    m2 = 0.0
    m3 = 0.0
    m4 = 0.0
    positive = 0
    negative = 0
    above = 0
    below = 0
    for t in range(values.shape[0]):
        if mask[t]:
            value = float(values[t])
            centred = value - mean
            squared = centred * centred
            m2 += squared
            m3 += squared * centred
            m4 += squared * squared
            positive += value > 0
            negative += value < 0
            above += value > threshold
            below += value < threshold
    out[0] = count
    out[1] = mean
    out[2] = m2 / count if count else math.nan
    out[3] = m3 / count if count else math.nan
    out[4] = m4 / count if count else math.nan
    out[5] = positive
    out[6] = negative
    out[7] = above
    out[8] = below


if AVAILABLE:
    _jit = numba.njit(nogil=True, cache=True)
    masked_moments = _jit(_masked_moments)
    masked_gae_rows = _jit(_masked_gae_rows)
    masked_returns_rows = _jit(_masked_returns_rows)
    row_summaries = _jit(_row_summaries)
    last_model_token = _jit(_last_model_token)
else:
    masked_moments = _masked_moments  # type: ignore[assignment]
    masked_gae_rows = _masked_gae_rows  # type: ignore[assignment]
    masked_returns_rows = _masked_returns_rows  # type: ignore[assignment]
    row_summaries = _row_summaries  # type: ignore[assignment]
    last_model_token = _last_model_token  # type: ignore[assignment]

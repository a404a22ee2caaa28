"""Compiled CPU kernels for the masked reverse scan: one pass over each row, back to front.

verl's loop over time is slow in Python because every token costs a round of interpreter and
tensor-op overhead for the whole batch; the same loop compiled (numba, LLVM) costs about one
fused multiply-add per token and reads each input once, which puts it near the memory floor.
The loop is verl's ``compute_gae_advantage_return`` recurrence, row by row::

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

import numpy as np

try:
    import numba
except ImportError:  # the torch kernel is used instead
    numba = None

AVAILABLE: bool = numba is not None
DTYPES: tuple[type, ...] = (np.float32, np.float64)


def _masked_gae_rows(rewards, values, mask, gamma, c, advantages, returns):  # pragma: no cover - compiled
    """GAE rows: fills ``advantages`` and ``returns`` (A + V); returns (empty row?, non-finite?)."""
    empty = False
    nonfinite = False
    for row in range(rewards.shape[0]):
        running = 0.0
        next_value = 0.0
        seen = False
        for t in range(rewards.shape[1] - 1, -1, -1):
            value = float(values[row, t])
            if mask[row, t]:
                delta = float(rewards[row, t]) + gamma * next_value - value  # delta_t = r_t + gamma V_next - V_t
                if not math.isfinite(delta):
                    nonfinite = True
                running = delta + c * running  # A_t = delta_t + c A_next
                next_value = value
                seen = True
            advantages[row, t] = running
            returns[row, t] = running + value  # R_t = A_t + V_t
        if not seen:
            empty = True
    return empty, nonfinite


def _masked_returns_rows(rewards, mask, c, out):  # pragma: no cover - compiled
    """Discounted returns rows (``G_t = r_t + c G_next`` over model tokens); returns the two flags."""
    empty = False
    nonfinite = False
    for row in range(rewards.shape[0]):
        running = 0.0
        seen = False
        for t in range(rewards.shape[1] - 1, -1, -1):
            if mask[row, t]:
                reward = float(rewards[row, t])
                if not math.isfinite(reward):
                    nonfinite = True
                running = reward + c * running
                seen = True
            out[row, t] = running
        if not seen:
            empty = True
    return empty, nonfinite


if AVAILABLE:
    _jit = numba.njit(nogil=True, cache=True, fastmath=False)
    masked_gae_rows = _jit(_masked_gae_rows)
    masked_returns_rows = _jit(_masked_returns_rows)
else:
    masked_gae_rows = _masked_gae_rows
    masked_returns_rows = _masked_returns_rows

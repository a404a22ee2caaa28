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

Speed. Token by token, the loop is bound by the latency of its carried chain (a multiply, then
an add, per token: about eight cycles), not by memory. The kernels take two tokens a step and
carry the chain across both at once: with ``d_t = delta_t, k_t = c`` at a model token and
``d_t = 0, k_t = 1`` at an observation token, ``A_t = d_t + k_t A_{t+1}`` gives::

    A_t = (d_t + k_t d_{t+1}) + (k_t k_{t+1}) A_{t+2}

whose first bracket and product do not wait for the chain, which thus costs one multiply and
one add per two tokens. This regroups float64 sums only where both tokens are model tokens
(about one float64 rounding, far below float32's), and halves the time per token. A non-finite
TD error at a model token makes every earlier ``A`` of its row non-finite (``k * nan``,
``k * inf`` with ``k = 0`` are NaN), so one test of the row's first ``A`` finds it.

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


def _masked_gae_rows(  # pragma: no cover - compiled
    rewards: NDArray[Any], values: NDArray[Any], mask: NDArray[Any], offsets: NDArray[Any], gamma: float, c: float,
    advantages: NDArray[Any], returns: NDArray[Any],
) -> tuple[bool, bool]:
    """GAE over rows ``offsets[i]:offsets[i + 1]`` of the flat arrays: fills ``advantages`` and
    ``returns`` (A + V) there; returns (some row without a model token?, a non-finite TD error?).

    Two tokens a step (see the module docstring): the running advantage crosses the pair in one
    multiply and one add, ``A_t = (d_t + k_t d_{t+1}) + k_t k_{t+1} A_{t+2}``, with ``d = delta,
    k = c`` at a model token and ``d = 0, k = 1`` at an observation token.
    """
    empty = False
    nonfinite = False
    for row in range(offsets.shape[0] - 1):
        start = offsets[row]
        stop = offsets[row + 1]
        running = 0.0
        next_value = 0.0
        seen = False
        for pair in range((stop - start) // 2):
            later = np.uintp(stop - 1 - 2 * pair)  # unsigned: no negative-index wraparound test
            earlier = np.uintp(stop - 2 - 2 * pair)
            later_value = float(values[later])
            earlier_value = float(values[earlier])
            later_model = mask[later]
            earlier_model = mask[earlier]
            later_delta = float(rewards[later]) + gamma * next_value - later_value  # r_t + gamma V_next - V_t
            next_value = later_value if later_model else next_value
            earlier_delta = float(rewards[earlier]) + gamma * next_value - earlier_value
            next_value = earlier_value if earlier_model else next_value
            later_running = later_delta + c * running if later_model else running  # A_t = delta_t + c A_next
            later_d = later_delta if later_model else 0.0
            later_k = c if later_model else 1.0
            earlier_d = earlier_delta if earlier_model else 0.0
            earlier_k = c if earlier_model else 1.0
            running = (earlier_d + earlier_k * later_d) + (earlier_k * later_k) * running
            seen |= later_model | earlier_model
            advantages[later] = later_running
            returns[later] = later_running + later_value  # R_t = A_t + V_t
            advantages[earlier] = running
            returns[earlier] = running + earlier_value
        if (stop - start) % 2:
            first = np.uintp(start)
            value = float(values[first])
            if mask[first]:
                running = float(rewards[first]) + gamma * next_value - value + c * running
                seen = True
            advantages[first] = running
            returns[first] = running + value
        empty |= not seen
        nonfinite |= not math.isfinite(running)  # a non-finite delta reaches the row's first token
    return empty, nonfinite


def _masked_returns_rows(  # pragma: no cover - compiled
    rewards: NDArray[Any], mask: NDArray[Any], offsets: NDArray[Any], c: float, out: NDArray[Any],
) -> tuple[bool, bool]:
    """Discounted returns (``G_t = r_t + c G_next`` over model tokens) over the rows of the flat
    arrays, two tokens a step as in :func:`_masked_gae_rows`; returns the same two flags."""
    empty = False
    nonfinite = False
    for row in range(offsets.shape[0] - 1):
        start = offsets[row]
        stop = offsets[row + 1]
        running = 0.0
        seen = False
        for pair in range((stop - start) // 2):
            later = np.uintp(stop - 1 - 2 * pair)
            earlier = np.uintp(stop - 2 - 2 * pair)
            later_model = mask[later]
            earlier_model = mask[earlier]
            later_reward = float(rewards[later])
            later_running = later_reward + c * running if later_model else running  # G_t = r_t + c G_next
            later_d = later_reward if later_model else 0.0
            later_k = c if later_model else 1.0
            earlier_d = float(rewards[earlier]) if earlier_model else 0.0
            earlier_k = c if earlier_model else 1.0
            running = (earlier_d + earlier_k * later_d) + (earlier_k * later_k) * running
            seen |= later_model | earlier_model
            out[later] = later_running
            out[earlier] = running
        if (stop - start) % 2:
            first = np.uintp(start)
            if mask[first]:
                running = float(rewards[first]) + c * running
                seen = True
            out[first] = running
        empty |= not seen
        nonfinite |= not math.isfinite(running)
    return empty, nonfinite


def _reset_returns_rows(  # pragma: no cover - compiled
    rewards: NDArray[Any], mask: NDArray[Any], offsets: NDArray[Any], gamma: float, out: NDArray[Any],
) -> None:
    """verl <= 0.8's discounted returns over the rows of the flat arrays: ``G_t = r_t + gamma
    G_{t+1}`` at every token, the running sum multiplied by the mask after each token (reset
    after every token outside it), as verl's loop does; accumulated in float64."""
    for row in range(offsets.shape[0] - 1):
        running = 0.0
        for t in range(offsets[row + 1] - 1, offsets[row] - 1, -1):
            running = float(rewards[t]) + gamma * running
            out[t] = running
            running = running * (1.0 if mask[t] else 0.0)  # as verl: inf * 0 is NaN


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

    ``out`` (11,) float64 receives: count, mean, m2, m3, m4 (central, population), the number
    of values > 0 and < 0, the number above and below verl's whitening mean
    ``sum / (count + 1e-8)`` (the signs of the whitened values), and the smallest and largest
    value (NaN without a model token).
    """
    count = 0
    total = 0.0
    low = math.inf
    high = -math.inf
    for t in range(values.shape[0]):
        if mask[t]:
            value = float(values[t])
            total += value
            count += 1
            low = min(low, value)
            high = max(high, value)
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
    out[9] = low if count else math.nan
    out[10] = high if count else math.nan


def _abs_diff_at(logged: NDArray[Any], base: NDArray[Any], index: NDArray[Any], shift: NDArray[Any],
                 scale: NDArray[Any], out: NDArray[Any]) -> None:  # pragma: no cover - compiled
    """``|logged_i - (base[index_i] - shift) * scale|`` in one pass, infinite where it is not a
    number; ``shift`` and ``scale`` are one-element arrays of ``base``'s dtype, so the recomputed
    value is rounded as NumPy rounds ``(base[index] - shift) * scale``, and the difference is float64."""
    for i in range(logged.shape[0]):
        value = (base[index[i]] - shift[0]) * scale[0]
        diff = abs(float(logged[i]) - float(value))
        out[i] = diff if diff == diff else math.inf


def _abs_diff_rows(logged: NDArray[Any], counts: NDArray[Any], per_row: NDArray[Any],
                   out: NDArray[Any]) -> None:  # pragma: no cover - compiled
    """``|logged_i - per_row[r]|`` for the ``counts[r]`` values of each row r laid out row by row,
    in one pass, infinite where it is not a number (float64)."""
    i = 0
    for r in range(counts.shape[0]):
        value = float(per_row[r])
        for _ in range(counts[r]):
            diff = abs(float(logged[i]) - value)
            out[i] = diff if diff == diff else math.inf
            i += 1


def _largest_and_histogram(diff: NDArray[Any], bits: NDArray[Any], shift: int,
                           histogram: NDArray[Any]) -> int:  # pragma: no cover - compiled
    """Index of the first largest of ``diff`` (>= 0, no NaN), and each value counted in
    ``histogram`` at its float64 bits (``bits``, the same buffer as int64) shifted right by ``shift``."""
    at = 0
    for i in range(diff.shape[0]):
        if diff[i] > diff[at]:
            at = i
        histogram[bits[i] >> shift] += 1
    return at


if AVAILABLE:
    _jit = numba.njit(nogil=True, cache=True)
    abs_diff_at = _jit(_abs_diff_at)
    abs_diff_rows = _jit(_abs_diff_rows)
    largest_and_histogram = _jit(_largest_and_histogram)
    masked_moments = _jit(_masked_moments)
    masked_gae_rows = _jit(_masked_gae_rows)
    masked_returns_rows = _jit(_masked_returns_rows)
    reset_returns_rows = _jit(_reset_returns_rows)
    row_summaries = _jit(_row_summaries)
    last_model_token = _jit(_last_model_token)
else:
    abs_diff_at = None  # type: ignore[assignment]  # NumPy's expressions instead: no Python loop per value
    abs_diff_rows = None  # type: ignore[assignment]
    largest_and_histogram = None  # type: ignore[assignment]
    masked_moments = _masked_moments  # type: ignore[assignment]
    masked_gae_rows = _masked_gae_rows  # type: ignore[assignment]
    masked_returns_rows = _masked_returns_rows  # type: ignore[assignment]
    reset_returns_rows = _reset_returns_rows  # type: ignore[assignment]
    row_summaries = _row_summaries  # type: ignore[assignment]
    last_model_token = _last_model_token  # type: ignore[assignment]

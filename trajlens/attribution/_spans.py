"""The token rule of call credit, in NumPy: which model tokens belong to which tool call.

A call is credited with the model tokens from the end of the previous call of its trajectory
(or the trajectory's start) to its own ``token_end``: its own tokens and the model tokens of
its turn before it (the reasoning that led to it). Observation tokens in that span are not
model tokens and carry no weight. Model tokens after the last call (a closing message) belong
to no call.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class CallSpans(NamedTuple):
    """Per call: the credited token span within its trajectory, and its model tokens."""

    start: np.ndarray
    """(C,) first token of the span (the previous call's token_end, or 0)."""
    end: np.ndarray
    """(C,) one past the span's last token (the call's token_end)."""


def credited_spans(call_trajectory: np.ndarray, token_end: np.ndarray) -> CallSpans:
    """Spans of calls listed in trajectory order (``call_trajectory`` non-decreasing, calls in order)."""
    start = np.zeros_like(token_end)
    if token_end.size > 1:
        same = call_trajectory[1:] == call_trajectory[:-1]
        start[1:] = np.where(same, token_end[:-1], 0)
    return CallSpans(start, np.maximum(token_end, start))


class SpanBounds(NamedTuple):
    """Flat positions of each call's span and of each trajectory, for reading prefix sums."""

    low: np.ndarray
    """(C,) flat index of the span's first token."""
    high: np.ndarray
    """(C,) flat index one past the span's last token."""


def span_bounds(trajectory_offsets: np.ndarray, call_trajectory: np.ndarray, spans: CallSpans) -> SpanBounds:
    """Flat bounds of each span, clipped to its trajectory."""
    base = trajectory_offsets[call_trajectory]
    length = trajectory_offsets[call_trajectory + 1] - base
    return SpanBounds(base + np.clip(spans.start, 0, length), base + np.clip(spans.end, 0, length))


def masked_prefix(values: np.ndarray, model_mask: np.ndarray) -> np.ndarray:
    """(N + 1,) float64 prefix sums of ``values`` over model tokens (0 elsewhere)."""
    prefix = np.empty(values.size + 1, dtype=np.float64)
    prefix[0] = 0.0
    np.cumsum(np.where(model_mask, values, 0), dtype=np.float64, out=prefix[1:])
    return prefix


def span_sums(
    values: np.ndarray,
    model_mask: np.ndarray,
    trajectory_offsets: np.ndarray,
    call_trajectory: np.ndarray,
    spans: CallSpans,
) -> tuple[np.ndarray, np.ndarray]:
    """Sum of ``values`` and count of model tokens over each call's span.

    ``values`` and ``model_mask`` are flat over the step's trajectories, trajectory ``b``
    occupying ``[trajectory_offsets[b], trajectory_offsets[b + 1])``; spans are clipped to
    the trajectory. Uses prefix sums: O(tokens + calls), no loop.
    """
    bounds = span_bounds(trajectory_offsets, call_trajectory, spans)
    prefix = masked_prefix(values, model_mask)
    counts = masked_prefix(np.ones(model_mask.size), model_mask)
    return prefix[bounds.high] - prefix[bounds.low], (counts[bounds.high] - counts[bounds.low]).astype(np.int64)

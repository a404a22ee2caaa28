"""Credit per tool call for one step: each call's advantage and its push under each aggregation.

The token rule (:mod:`trajlens.attribution._spans`): a call owns the model tokens from the end of
the previous call of its trajectory to its own ``token_end``, i.e. the call's tokens and the
reasoning of its turn before it. Its *advantage* is the mean advantage over those tokens, and
its *push* under an aggregation mode is ``sum over its tokens of w_t * A_t``, with ``w`` the
per-token loss weight of :func:`trajlens.estimators.aggregation_weights` (constant within a
trajectory in every mode): how hard that update moved the call's log-probability.

Fallback. Where a trajectory has no token arrays (or a call no ``token_end``), the trajectory's
advantage is spread over its calls by turn: its model tokens (``model_tokens``, else one per
call) are split equally over its turns with calls, and a turn's share equally over its calls;
the call's push is ``w * A * tokens``. Every such row has ``fallback`` set. Token-level
estimators (GAE, REINFORCE) need the token arrays and are not computed for those trajectories.

Notation: B trajectories of the step, C calls, R recomputations, M aggregation modes.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import polars as pl
import pyarrow as pa

from trajlens.run.step_advantages import Shifted
from trajlens.attribution._spans import credited_spans, masked_prefix, span_bounds


CREDITED_CALLS = pl.col("primary_class").is_not_null()
"""The calls given credit: those the harness ran (they have a class). A call it rejected
(``format_error``) owns no tokens; its tokens go to the next credited call of its trajectory."""


class StepCredit(NamedTuple):
    """Credit of every call of one step under every recomputation and aggregation."""

    push: np.ndarray
    """(R, M, C) push of each call."""
    advantage: np.ndarray
    """(R, C) mean advantage over the call's credited tokens (NaN where not computable)."""
    tokens: np.ndarray
    """(C,) model tokens credited to the call (estimated under the fallback)."""
    token_start: np.ndarray
    """(C,) start of the credited span (-1 under the fallback)."""
    token_end: np.ndarray
    fallback: np.ndarray
    """(C,) bool: credited by the fallback rule."""
    call_trajectory: np.ndarray
    """(C,) index of the call's trajectory in the step's trajectory order."""
    lengths: np.ndarray
    """(B,) model tokens per trajectory (its calls when the log counts none: the fallback's unit)."""
    measured: np.ndarray
    """(B,) bool: ``lengths`` counts the trajectory's model tokens (its response mask, or its
    logged ``model_tokens``), not its calls."""
    response_lengths: np.ndarray
    """(B,) the trajectory's response length as every other surface reads it (the report's and
    the checks' ``mean:model_tokens``): its logged ``model_tokens``, else its response mask's
    count; NaN where it has neither. ``lengths`` weighs tokens, so it counts the mask first."""
    trajectory_advantage: np.ndarray
    """(R, B) mean advantage over the trajectory's model tokens."""
    trajectory_push: np.ndarray
    """(R, M, B) total push over the trajectory's model tokens."""
    all_negative: np.ndarray
    """(R,) bool: every model-token advantage of the step is negative."""
    all_positive: np.ndarray
    """(R,) bool: every model-token advantage of the step is positive (the batch statistics'
    ``all_positive``, :func:`trajlens.estimators.advantage_stats`)."""
    computed: np.ndarray
    """(R,) bool: the recomputation gave this step advantages."""


def _flat_tokens(trajectory_ids: list[str], tokens: pl.DataFrame | pa.Table | None, mask: Any = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat model mask of the step in trajectory order, trajectory offsets, and which have tokens
    (``mask``: the ``flat_list`` of ``tokens``'s response mask, when the caller read it)."""
    batch = len(trajectory_ids)
    if tokens is None or len(tokens) == 0:
        return np.zeros(0, dtype=bool), np.zeros(batch + 1, dtype=np.int64), np.zeros(batch, dtype=bool)
    if isinstance(tokens, pa.Table):
        ids = tokens.column("trajectory_id").combine_chunks()
        if len(ids) == batch and ids.to_pylist() == trajectory_ids:
            from trajlens.estimators.flat import flat_list

            if mask is None:
                mask = flat_list(tokens.column("response_mask"), np.bool_, False)
            return mask.values, mask.offsets, mask.present
        tokens = pl.from_arrow(tokens.select(["trajectory_id", "response_mask"]))
    order = pl.DataFrame({"trajectory_id": trajectory_ids}).with_row_index("__b")
    joined = order.join(tokens.select("trajectory_id", "response_mask"), on="trajectory_id", how="left").sort("__b")
    mask_arrow = joined["response_mask"].to_arrow()
    if isinstance(mask_arrow, pa.ChunkedArray):
        mask_arrow = mask_arrow.combine_chunks()
    lengths = mask_arrow.value_lengths().fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    flat = mask_arrow.flatten().fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return flat, offsets, joined["response_mask"].is_not_null().to_numpy()


def _base_sums(values: np.ndarray, mask: np.ndarray, offsets: np.ndarray, call_trajectory: np.ndarray,
               bounds) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Span sums, trajectory sums, and the largest and the smallest value of ``values`` over
    model tokens."""
    from trajlens.attribution import _kernels

    if _kernels.AVAILABLE:
        return _kernels.span_and_row_sums(values, mask, offsets, call_trajectory, bounds.low, bounds.high)
    prefix = masked_prefix(values, mask)
    return (prefix[bounds.high] - prefix[bounds.low], prefix[offsets[1:]] - prefix[offsets[:-1]],
            float(np.max(values, where=mask, initial=-np.inf)), float(np.min(values, where=mask, initial=np.inf)))


def per_token_weights(lengths: np.ndarray, max_length: int, modes: tuple[str, ...]) -> np.ndarray:
    """(M, B) per-token loss weight of each trajectory under each mode, from model-token counts.

    The closed forms of :func:`trajlens.estimators.aggregation_weights` (its module docstring
    lists them; a test holds the two equal), one number per trajectory instead of a (B, T)
    tensor per mode: B trajectories of L_i >= 1 model tokens, L_max = ``max_length``.
    """
    counts = np.maximum(lengths, 1).astype(np.float64)
    batch = counts.size
    formulas = {
        "token-mean": np.full(batch, 1.0 / counts.sum()),  # w = 1 / sum(L)
        "token-sum": np.ones(batch),  # w = 1
        "seq-mean-token-mean": 1.0 / (batch * counts),  # w = 1 / (B L_i)
        "seq-mean-token-sum": np.full(batch, 1.0 / batch),  # w = 1 / B
        "luspo": np.full(batch, 1.0 / batch),  # w = 1 / B
        "seq-mean-token-sum-norm": np.full(batch, 1.0 / (batch * max_length)),  # w = 1 / (B L_max)
        "dr-grpo": np.full(batch, 1.0 / (batch * max_length)),  # w = 1 / (B L_max)
    }
    return np.stack([formulas[mode] for mode in modes]) if modes else np.zeros((0, batch))


def step_call_credit(
    trajectories: pl.DataFrame,
    calls: pl.DataFrame,
    tokens: pl.DataFrame | None,
    advantages: list[pl.DataFrame | np.ndarray | Shifted | None],
    modes: tuple[str, ...],
    mask: Any = None,
) -> StepCredit:
    """Credit every call of one step.

    Args:
        trajectories: the step's trajectories (``trajectory_id``, ``model_tokens``), in the order
            the outputs use.
        calls: the step's tool calls, sorted by trajectory (in ``trajectories`` order) and
            ``call_index``, with ``trajectory_id``, ``turn``, ``token_end``.
        tokens: the step's token arrays (``trajectory_id``, ``response_mask``; a Polars frame
            or an Arrow table) or None.
        advantages: per recomputation, the output of :func:`trajlens.estimators.adapters` for
            this step (``token_advantages`` for token estimators, else ``advantage``), with
            ``trajectory_id``; or the flat (N,) token advantages of the step, trajectory after
            trajectory in ``trajectories`` order (``tokens`` then an Arrow table in that order),
            or such an array with its whitening to apply (:class:`trajlens.run.step_advantages.Shifted`);
            None where the recomputation has nothing for this step.
        modes: aggregation modes.
        mask: the ``flat_list`` of ``tokens``'s response mask (an Arrow table), when the caller read it.
    """
    ids = trajectories["trajectory_id"].to_list()
    index = {t: i for i, t in enumerate(ids)}
    batch = len(ids)
    flat_mask, offsets, has_tokens = _flat_tokens(ids, tokens, mask)
    model_positions = np.flatnonzero(flat_mask)

    def model_count(at: np.ndarray) -> np.ndarray:
        """Model tokens before each flat position of ``at`` (a prefix count, read where needed)."""
        return np.searchsorted(model_positions, at)

    token_lengths = model_count(offsets[1:]) - model_count(offsets[:-1])
    call_trajectory = calls["trajectory_id"].replace_strict(index, return_dtype=pl.Int64).to_numpy().astype(np.int64)
    count = call_trajectory.size
    token_end_raw = np.full(count, -1)
    if "token_end" in calls.columns:
        token_end = calls["token_end"]
        token_end_raw = (token_end if token_end.null_count() == 0 else token_end.fill_null(-1)).to_numpy().astype(np.int64)
    exact = has_tokens[call_trajectory] & (token_end_raw >= 0) if count else np.zeros(0, dtype=bool)
    calls_per_trajectory = np.bincount(call_trajectory, minlength=batch)
    model_tokens = trajectories["model_tokens"].to_numpy() if "model_tokens" in trajectories.columns else np.full(batch, np.nan)
    measured = has_tokens | ~np.isnan(model_tokens.astype(float))
    response_lengths = np.where(np.isnan(model_tokens.astype(float)), np.where(has_tokens, token_lengths, np.nan),
                                model_tokens).astype(float)
    model_tokens = np.where(np.isnan(model_tokens.astype(float)), calls_per_trajectory, model_tokens).astype(float)
    lengths = np.where(has_tokens, token_lengths, model_tokens).astype(np.int64)

    # Fallback share of each call: the trajectory's model tokens / turns with calls / calls in the turn.
    turn = calls["turn"].to_numpy().astype(np.int64) if count else np.zeros(0, np.int64)
    key = call_trajectory * (turn.max() + 1 if count else 1) + turn
    _, turn_of_call, calls_in_turn = np.unique(key, return_inverse=True, return_counts=True)
    turns_with_calls = np.bincount(call_trajectory[np.unique(turn_of_call, return_index=True)[1]], minlength=batch) if count else np.zeros(batch)
    fallback_tokens = model_tokens[call_trajectory] / np.maximum(turns_with_calls[call_trajectory], 1) / calls_in_turn[turn_of_call] if count else np.zeros(0)

    spans = credited_spans(call_trajectory, np.where(exact, token_end_raw, 0))
    bounds = span_bounds(offsets, call_trajectory, spans)
    exact_tokens = model_count(bounds.high) - model_count(bounds.low)
    tokens_per_call = np.where(exact, exact_tokens, fallback_tokens).astype(float)
    full_length = max(int(np.diff(offsets).max()) if flat_mask.size else 1, int(np.maximum(lengths, 1).max(initial=1)))
    weights = per_token_weights(lengths, full_length, modes)  # (M, B)

    recs = len(advantages)
    push = np.full((recs, len(modes), count), np.nan)
    advantage = np.full((recs, count), np.nan)
    trajectory_advantage = np.full((recs, batch), np.nan)
    trajectory_push = np.full((recs, len(modes), batch), np.nan)
    all_negative = np.zeros(recs, dtype=bool)
    all_positive = np.zeros(recs, dtype=bool)
    computed = np.zeros(recs, dtype=bool)
    prefixes: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}  # id of a flat array -> its span and row sums, max
    call_weights = weights[:, call_trajectory]  # (M, C) each call's loss weight under each mode
    for r, frame in enumerate(advantages):
        if frame is None or len(frame) == 0:
            continue
        computed[r] = True
        flat = isinstance(frame, (np.ndarray, Shifted))
        aligned = None if flat else frame if frame["trajectory_id"].equals(trajectories["trajectory_id"]) else \
            pl.DataFrame({"trajectory_id": ids}).join(frame, on="trajectory_id", how="left", maintain_order="left")
        if flat or "token_advantages" in aligned.columns:
            if flat:
                base, shift, scale = frame if isinstance(frame, Shifted) else (frame, 0.0, 1.0)
            else:
                values = aligned["token_advantages"].to_arrow()
                if isinstance(values, pa.ChunkedArray):
                    values = values.combine_chunks()
                base = values.flatten().fill_null(0.0).to_numpy(zero_copy_only=False).astype(np.float64)
                shift, scale = 0.0, 1.0
            if base.size != flat_mask.size:
                raise ValueError("token advantages do not line up with the response masks")
            if id(base) not in prefixes:
                prefixes[id(base)] = _base_sums(base, flat_mask, offsets, call_trajectory, bounds)
            span_sum, row_sum, largest, smallest = prefixes[id(base)]
            # sum over a span of (A - shift) * scale = scale * (sum of A - shift * model tokens)
            span = scale * (span_sum - shift * exact_tokens)
            sums = np.where(exact, span, np.nan)  # token estimators have nothing for fallback calls
            whole = scale * (row_sum - shift * token_lengths)
            trajectory_sum = np.where(has_tokens, whole, np.nan)
            all_negative[r] = bool(flat_mask.any() and (largest - shift) * scale < 0)
            all_positive[r] = bool(flat_mask.any() and (smallest - shift) * scale > 0)
        else:
            a = aligned["advantage"].cast(pl.Float64).to_numpy()  # a null is NaN
            sums = a[call_trajectory] * tokens_per_call
            trajectory_sum = a * lengths
            finite = a[np.isfinite(a)]
            all_negative[r] = bool(finite.size and (finite < 0).all())
            all_positive[r] = bool(finite.size and (finite > 0).all())
        advantage[r] = sums / np.maximum(tokens_per_call, 1e-12)
        trajectory_advantage[r] = trajectory_sum / np.maximum(lengths, 1)
        push[r] = call_weights * sums[None, :]
        trajectory_push[r] = weights * trajectory_sum[None, :]
    start = np.where(exact, spans.start, -1)
    end = np.where(exact, spans.end, -1)
    return StepCredit(push, advantage, tokens_per_call, start, end, ~exact, call_trajectory, lengths, measured,
                      response_lengths, trajectory_advantage, trajectory_push, all_negative, all_positive, computed)

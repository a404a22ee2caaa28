"""Recompute an estimator's advantages from trajlens tables (Polars frames).

A thin bridge from the ``trajectories`` and ``tokens`` tables (see :mod:`trajlens.schema`) to the
tensor functions of this package. Statistics follow the trainers' batching: group statistics per
``(run_id, step, group_id)``, batch statistics (whitening, batch std, GDPO's final
normalisation) per ``(run_id, step)``. Token arrays are padded into tensors through numpy, with
no loop over rows; the only Python loop is over steps. A step's tensor ops run on one torch
thread unless the step is large (:func:`trajlens.estimators._scan.intra_op_threads_for`): beside
a busy trainer, parallel ops on small tensors spend more time waiting for each other than
computing.

Which estimators exist, which inputs each reads and which options it takes is the estimator
registry (:mod:`trajlens.estimators.registry`, ``docs/estimators.md``); this module turns its
entries into tensor calls through the adapter each names (:data:`ADAPTERS`: which columns become
which tensors), with every option at the registry's default unless given. Columns added besides ``advantage`` (one float per
trajectory):

Token-level estimators (``gae``, ``reinforce``, ``reinforce_plus_plus``, ``remax``, the optimal
token baselines)
    ``advantage`` is the mean over model tokens; also ``advantage_first``, ``advantage_last``
    (first and last model token), ``token_advantages`` and ``token_returns`` (list<float32>,
    every position, as the tensor functions return them). ``token_rewards`` null in a row means
    the trajectory's ``reward`` on its last model token (how verl places an outcome reward).
    ``remax`` reads the greedy baseline's reward from a ``reward_baseline`` column of
    ``trajectories``; the optimal token baselines read ``log_probs`` and a ``sum_pi_squared``
    list column of ``tokens``. Without them the error says so.
Outcome estimators (``grpo``, ``dr_grpo``, ``grpo_batch_std``, ``rloo``, ``grpo_passk``, ``opo``,
``gpg``, ``reinforce_plus_plus_baseline``)
    Score from ``reward`` (``score="reward"``, default) or the sum of ``token_rewards``
    (``score="token_rewards"``). Those that need model-token counts (``opo``, the
    REINFORCE++-baseline whitening) read them from ``tokens`` or ``model_tokens`` and add
    ``model_tokens``.
Channel estimators (``gdpo_verl``, ``gdpo_trl``, ``sum_then_normalize``, ``gdpo_dynamic``)
    Channels from ``reward_channels`` (``channels=[names]`` to choose and order them; a missing
    channel is NaN), ``weights`` as a list or a {name: weight} dict. ``gdpo_verl`` and
    ``gdpo_dynamic`` whiten over model tokens and add ``model_tokens``; ``gdpo_dynamic``
    carries its EMA from step to step (``config=DynamicWeightConfig(...)`` or a dict of its
    fields) and adds ``channel_weights``.

Every output row keeps ``run_id``, ``step``, ``trajectory_id``, ``group_id``, in the input order,
with ``estimator`` and ``normalisation``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import polars as pl
import pyarrow as pa
import torch

from trajlens.estimators import _validate as check
from trajlens.estimators._groups import found_groups, group_index
from trajlens.estimators._scan import intra_op_threads_for
from trajlens.estimators.dynamic import weight_config
from trajlens.estimators.registry import (
    ESTIMATOR_NAMES, EstimatorSpec, Input, Kind, estimator_spec, reads_counts_alone, reads_tokens,
)
from trajlens.estimators.spec import KEY_COLUMNS
from trajlens.estimators.whiten import masked_whiten
from trajlens.frames import as_frame
from trajlens.limits import FLOAT32_MAX

ESTIMATORS: tuple[str, ...] = ESTIMATOR_NAMES

_ROW = "__row"


def recompute(
    trajectories: pl.DataFrame, tokens: pl.DataFrame | None = None, estimator: str = "grpo", *,
    carry: dict[str, Any] | None = None, **options: Any
) -> pl.DataFrame:
    """Advantages ``estimator`` would have given each trajectory, one row per trajectory.

    Args:
        trajectories: frame with at least the key columns and ``reward`` / ``reward_channels``
            (and ``model_tokens`` for estimators that need token counts without ``tokens``).
        tokens: the ``tokens`` frame, needed by the token-level estimators.
        estimator: a name of :data:`~trajlens.estimators.registry.ESTIMATOR_REGISTRY`.
        carry: what an estimator with memory across steps (gdpo_dynamic's moving averages)
            keeps from one step to the next; pass the same dict to calls over consecutive
            batches of steps to get what one call over all of them gives.
        **options: the estimator's options (its registry entry lists them); problems with
            several options are reported together.

    Several estimators on the same frames: :class:`Recomputer`, which prepares them once.
    """
    return Recomputer(trajectories, tokens).recompute(estimator, carry=carry, **options)


class _Prepared(NamedTuple):
    """The frames of a batch as the estimators reading the same columns take them."""

    steps: list[pl.DataFrame]
    """Each step's rows, in their order."""
    keys: pl.DataFrame
    """The row index, key columns and whether each response is untrained, in the input order."""
    channels: list[str]
    """The reward channels pivoted into ``__channel_<i>`` columns, in order (none for other estimators)."""


class Recomputer:
    """``trajectories`` (and their ``tokens``) checked once, for several estimators recomputed on
    them (:meth:`recompute`, which :func:`recompute` calls for one): the estimators that read
    the same columns share the join of the token columns, the pivot of the reward channels and
    the cut into steps. ``readers_only``: the tokens go to the estimators whose registry entry
    reads them (token arrays or counts) alone, as if the others had been given none.
    ``mask_counts``: each response's model-token count by its response mask (``run_id``,
    ``trajectory_id``, ``count``), given without ``tokens``: what the estimators that read the
    counts alone read of the tokens (scored by the trajectory's reward)."""

    def __init__(self, trajectories: pl.DataFrame, tokens: pl.DataFrame | None = None, *,
                 readers_only: bool = False, mask_counts: pl.DataFrame | None = None) -> None:
        fn = "recompute"
        trajectories = as_frame(trajectories, f"{fn}: trajectories")
        missing = [c for c in KEY_COLUMNS if c not in trajectories.columns]
        if missing:
            raise check.EstimatorInputError(f"{fn}: trajectories lacks column(s) {', '.join(missing)}")
        if trajectories.height == 0:
            raise check.EstimatorInputError(f"{fn}: empty batch: trajectories has no rows")
        _one_row_each(fn, trajectories, "trajectories")  # a second row would count twice in its group's statistics
        self.trajectories = trajectories
        self.tokens = None if tokens is None else as_frame(tokens, f"{fn}: tokens")
        self.readers_only = readers_only
        if mask_counts is not None:
            _one_row_each(fn, mask_counts, "tokens")  # counted from the token rows: as _join_tokens says it
        self.mask_counts = mask_counts
        self._prepared: dict[tuple[Any, ...], _Prepared] = {}
        self._steps = _StepInputs()

    def recompute(self, estimator: str, *, carry: dict[str, Any] | None = None, **options: Any) -> pl.DataFrame:
        """:func:`recompute` of ``estimator`` on these frames."""
        fn = "recompute"
        spec = estimator_spec(estimator)
        problems = spec.option_problems(options)
        if problems:
            raise check.EstimatorInputError(f"{fn}: " + "; ".join(problems))
        adapter = _adapter(fn, spec)
        settings = spec.settings(options)  # the registry's defaults, then the caller's options
        needs_tokens = bool(spec.inputs & Input.TOKEN_ARRAYS)
        rewards = settings.get("score") == "token_rewards"
        chosen = settings.pop("channels", None) if spec.kind is Kind.CHANNEL else None
        tokens = None if self.readers_only and not reads_tokens(estimator) else self.tokens
        counted = tokens is None and self.mask_counts is not None and reads_counts_alone(estimator, settings)
        key = (tokens is not None, needs_tokens, rewards, spec.kind is Kind.CHANNEL,
               None if chosen is None else tuple(chosen), counted)
        if key not in self._prepared:
            self._prepared[key] = self._prepare(fn, tokens, needs_tokens, rewards, spec.kind is Kind.CHANNEL, chosen,
                                                counted)
        prepared = self._prepared[key]
        if spec.kind is Kind.CHANNEL:
            settings["channels"] = prepared.channels
            weights = settings.get("weights")
            unknown = [name for name in weights if name not in prepared.channels] if isinstance(weights, dict) else []
            if unknown:
                raise check.EstimatorInputError(f"{fn}: weights name channel(s) {', '.join(map(repr, unknown))}, "
                                                f"not among the channels used: {prepared.channels}")
        state: dict[str, torch.Tensor | None] = carry if carry is not None else {}
        call = _Call(fn, spec, settings, state, self._steps)
        parts = []
        with found_groups(self._steps.groups_found):
            for batch in prepared.steps:
                with intra_op_threads_for(_padded_size(batch)):
                    parts.append(adapter(call, batch))
        out = parts[0] if len(parts) == 1 else pl.concat(parts, how="diagonal_relaxed")
        keys = prepared.keys
        if not out[_ROW].equals(keys[_ROW]):  # the steps not in the input's order
            out = keys.select(_ROW).join(out, on=_ROW, how="left", maintain_order="left")
        # assembled from its columns: each eager frame operation costs a query of its own
        result = _untrained_at_zero(keys[_UNTRAINED], [out[name] for name in out.columns if name != _ROW])
        return pl.DataFrame([*(keys[name] for name in KEY_COLUMNS), *result,
                             pl.Series("estimator", [estimator] * keys.height, dtype=pl.String)])

    def _prepare(self, fn: str, tokens: pl.DataFrame | None, needs_tokens: bool, rewards: bool, channels: bool,
                 chosen: Any, counted: bool = False) -> _Prepared:
        frame = self.trajectories.with_row_index(_ROW)
        if needs_tokens or tokens is not None:
            frame = _join_tokens(fn, frame, tokens, required=needs_tokens, rewards=rewards)
        elif counted:
            assert self.mask_counts is not None
            counts = self.mask_counts.select("run_id", "trajectory_id", pl.col("count").cast(pl.Int64).alias(_MASK_TOKENS))
            frame = frame.join(counts, on=["run_id", "trajectory_id"], how="left")
        names: list[str] = []
        if channels:
            frame, names = _channel_columns(fn, frame, chosen)
        # Sorted once, the run's steps are cut from it as they lie; each step's rows are then in
        # their order already (the row index ascends within a step).
        steps = frame.sort(["step", _ROW]).partition_by(["run_id", "step"], maintain_order=True)
        return _Prepared(steps, frame.select(_ROW, *KEY_COLUMNS, _untrained(frame)), names)


_UNTRAINED = "__untrained"
_MASK_TOKENS = "__mask_tokens"
"""Each response's model tokens by its response mask, for the estimators that read only the counts."""


def _untrained(frame: pl.DataFrame) -> pl.Expr:
    """Whether each response has no model token (by its ``model_tokens`` count, else its
    ``response_mask``), as the column ``__untrained``; False where neither tells."""
    known = [
        *([pl.col("model_tokens") == 0] if "model_tokens" in frame.columns else []),
        *([~pl.col("response_mask").list.any()] if "response_mask" in frame.columns else []),
        *([pl.col(_MASK_TOKENS) == 0] if _MASK_TOKENS in frame.columns else []),
    ]
    if len(known) > 1 and frame["model_tokens"].null_count() == 0:
        known = known[:1]  # the count alone: no pass over the token arrays
    return (pl.coalesce(known).fill_null(False) if known else pl.lit(False)).alias(_UNTRAINED)


def _untrained_at_zero(untrained: pl.Series, columns: list[pl.Series]) -> list[pl.Series]:
    """``columns`` with ``advantage`` 0 for each response without a model token (``untrained``),
    as the trainer's token arrays hold it: such a response counts in its group's statistics,
    but no token of it carries an advantage."""
    if not untrained.any():
        return columns
    return [c.zip_with(~untrained, pl.Series([0.0], dtype=c.dtype).extend_constant(0.0, len(c) - 1))
            if c.name == "advantage" else c for c in columns]


def _padded_size(batch: pl.DataFrame) -> int:
    """Values in the largest (B, T) tensor a step's batch becomes: rows times the longest token array."""
    if "response_mask" not in batch.columns:
        return batch.height
    longest = batch.select(pl.col("response_mask").list.len().max()).item()
    return batch.height * max(1, longest or 0)


def _join_tokens(fn: str, frame: pl.DataFrame, tokens: pl.DataFrame | None, required: bool,
                 rewards: bool = False) -> pl.DataFrame:
    """``frame`` with the columns of ``tokens`` its estimator reads: every array when it is
    ``required`` (a token-level estimator); else each response's model-token count, and its
    token rewards when the estimator scores by them (``rewards``)."""
    if tokens is None:
        raise check.EstimatorInputError(f"{fn}: this estimator needs the tokens frame (response_mask, values, token_rewards)")
    need = ["run_id", "trajectory_id", "response_mask"]
    absent = [c for c in need if c not in tokens.columns]
    if absent:
        raise check.EstimatorInputError(f"{fn}: tokens lacks column(s) {', '.join(absent)}")
    _one_row_each(fn, tokens, "tokens")  # each copy would be a trajectory of its own in the batch
    if required:
        keep = [pl.col(c) for c in ("run_id", "trajectory_id", "response_mask", "values", "token_rewards", "log_probs",
                                    "sum_pi_squared") if c in tokens.columns]
    else:  # an estimator of whole responses reads each one's model-token count, not its mask
        keep = [pl.col("run_id"), pl.col("trajectory_id"),
                pl.col("response_mask").list.sum().cast(pl.Int64).alias(_MASK_TOKENS),
                *([pl.col("token_rewards")] if rewards and "token_rewards" in tokens.columns else [])]
    joined = frame.join(tokens.select(keep), on=["run_id", "trajectory_id"], how="left")
    if required:
        lacking = joined.filter(pl.col("response_mask").is_null())
        if lacking.height:
            raise check.EstimatorInputError(
                f"{fn}: trajectory {lacking['trajectory_id'][0]!r} (run {lacking['run_id'][0]!r}) has no row in tokens"
            )
    return joined


def _one_row_each(fn: str, frame: pl.DataFrame, table: str) -> None:
    """A one-line error naming the first trajectory with more than one row in ``frame`` (rows of ``table``)."""
    repeated = frame.filter(pl.struct("run_id", "trajectory_id").is_duplicated()).head(1)
    if repeated.height:
        raise check.EstimatorInputError(f"{fn}: trajectory {repeated['trajectory_id'][0]!r} of run "
                                        f"{repeated['run_id'][0]!r} has more than one row in {table}")


def _padded(series: pl.Series, dtype: Any, fill: Any, width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A list column as a (B, width) array padded with ``fill`` (width L_max by default), and each row's length.

    A null list counts as empty; entries past ``width`` are cut (callers compare the lengths).
    """
    array = series.to_arrow()
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    lengths = array.value_lengths().fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    flat = array.flatten()
    if flat.null_count:
        flat = flat.fill_null(fill)
    values = flat.to_numpy(zero_copy_only=False).astype(dtype, copy=False)
    if width is None:
        width = max(int(lengths.max()) if lengths.size else 0, 1)
    out = np.full((len(lengths), width), fill, dtype=dtype)
    if not lengths.size or int(lengths.max()) <= width:
        out[np.arange(width) < lengths[:, None]] = values  # row-major: each row's entries in order
        return out, lengths
    rows = np.repeat(np.arange(len(lengths)), lengths)
    position = np.arange(values.shape[0]) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    keep = position < width
    out[rows[keep], position[keep]] = values[keep]
    return out, lengths


def _list_column(name: str, padded: np.ndarray, lengths: np.ndarray) -> pl.Series:
    """Rows of ``padded`` cut to ``lengths``, as a list<float32> column."""
    keep = np.arange(padded.shape[1])[None, :] < lengths[:, None]
    flat = pa.array(padded[keep].astype(np.float32))
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    return pl.Series(name, pa.ListArray.from_arrays(offsets, flat))


class _Call(NamedTuple):
    """What every adapter reads besides the step's rows."""

    fn: str
    """The public function's name, for errors."""
    spec: EstimatorSpec
    settings: dict[str, Any]
    """Every option: the registry's defaults, then the caller's (``channels``: the names, in order)."""
    state: dict[str, torch.Tensor | None]
    """What a stateful estimator carries from one step to the next, per run."""
    steps: _StepInputs
    """What every estimator reads alike of a prepared step, found once for them all."""

    def groups(self, batch: pl.DataFrame) -> pl.Series:
        """The step's group ids, as the tensor functions take ``group_ids`` (their groups found once)."""
        return self.steps.groups(batch)


class _StepInputs:
    """What the estimators recomputed on the same prepared steps read alike, found once per step
    for them all: its group ids, with their :class:`~trajlens.estimators._groups.GroupIndex`
    (:attr:`groups_found`, which :func:`~trajlens.estimators._groups.group_index` reads within
    :func:`~trajlens.estimators._groups.found_groups`), and its scores. Kept by the step frame's
    identity, with the frame (so the identity stays its own)."""

    def __init__(self) -> None:
        self._found: dict[tuple[Any, ...], tuple[pl.DataFrame, Any]] = {}
        self.groups_found: dict[int, tuple[Any, Any]] = {}

    def _get(self, batch: pl.DataFrame, what: tuple[Any, ...], find: Callable[[], Any]) -> Any:
        key = (id(batch), *what)
        found = self._found.get(key)
        if found is None or found[0] is not batch:
            found = self._found[key] = (batch, find())
        return found[1]

    def groups(self, batch: pl.DataFrame) -> pl.Series:
        """The step's ``group_id`` column, the same object for every estimator, its groups found
        once (where they cannot be found, each estimator says why)."""
        ids: pl.Series = self._get(batch, ("group ids",), lambda: batch["group_id"])
        if id(ids) not in self.groups_found:
            with contextlib.suppress(check.EstimatorInputError):
                self.groups_found[id(ids)] = (ids, group_index("recompute", ids, batch.height, torch.device("cpu")))
        return ids

    def scores(self, fn: str, batch: pl.DataFrame, source: str, unscorable: bool) -> torch.Tensor:
        """:func:`_scores` of the step, a copy of each estimator's own."""
        found: torch.Tensor = self._get(batch, ("scores", fn, source, unscorable),
                                        lambda: _scores(fn, batch, source, unscorable))
        return found.clone()


class _TokenInputs(NamedTuple):
    """A step's token arrays, padded: (B, T) ``mask`` and ``rewards``, and each row's length."""

    mask: torch.Tensor
    rewards: torch.Tensor
    lengths: np.ndarray


def _token_inputs(fn: str, batch: pl.DataFrame, keep_empty: bool = False) -> _TokenInputs:
    ids = batch["trajectory_id"]
    mask_np, lengths = _padded(batch["response_mask"], np.bool_, False)
    width = mask_np.shape[1]
    empty = np.nonzero(~mask_np.any(axis=1))[0]
    if empty.size and not keep_empty:
        raise check.EstimatorInputError(
            f"{fn}: trajectory {ids[int(empty[0])]!r} has no model tokens in its response_mask "
            f"(step {batch['step'][0]}); drop it first"
        )
    if "token_rewards" in batch.columns:
        rewards_np, reward_lengths = _padded(batch["token_rewards"], np.float32, 0.0, width)
        has_token_rewards = batch["token_rewards"].is_not_null().to_numpy()
    else:
        rewards_np, reward_lengths = np.zeros_like(mask_np, dtype=np.float32), lengths
        has_token_rewards = np.zeros(batch.height, dtype=bool)
    _same_lengths(fn, ids, "token_rewards", lengths, reward_lengths, has_token_rewards)
    mask = torch.from_numpy(mask_np)
    rewards = torch.from_numpy(rewards_np)
    if not has_token_rewards.all():
        rewards = _outcome_on_last_token(fn, batch, rewards, mask, torch.from_numpy(~has_token_rewards))
    return _TokenInputs(mask, rewards, lengths)


def _critic(call: _Call, batch: pl.DataFrame, inputs: _TokenInputs) -> Any:
    """GAE: the rewards, the critic's ``values`` and the mask."""
    values = _token_array(call.fn, batch, "values", "critic values", inputs.mask.shape[1], inputs.lengths)
    return call.spec.tensor_function()(inputs.rewards, values, inputs.mask, gamma=call.settings["gamma"],
                                       lam=call.settings["lam"])


def _returns(call: _Call, batch: pl.DataFrame, inputs: _TokenInputs) -> Any:
    """The discounted returns (REINFORCE, REINFORCE++): the rewards and the mask."""
    return call.spec.tensor_function()(inputs.rewards, inputs.mask, gamma=call.settings["gamma"],
                                       convention=call.settings["convention"])


def _baseline_rewards(call: _Call, batch: pl.DataFrame, inputs: _TokenInputs) -> Any:
    """ReMax: the rewards, the mask and the greedy baseline's reward (``reward_baseline``)."""
    if "reward_baseline" not in batch.columns or batch["reward_baseline"].null_count():
        raise check.EstimatorInputError(
            f"{call.fn}: {call.spec.name} needs the greedy baseline's reward (column reward_baseline of "
            "trajectories); this log does not carry it, so ReMax cannot be recomputed")
    baselines = torch.tensor(batch["reward_baseline"].to_numpy(), dtype=inputs.rewards.dtype)
    return call.spec.tensor_function()(inputs.rewards, inputs.mask, baselines)


def _token_baseline(call: _Call, batch: pl.DataFrame, inputs: _TokenInputs) -> Any:
    """The optimal token baselines: rewards, mask, groups, behaviour log-probs and sum_pi_squared."""
    width = inputs.mask.shape[1]
    log_probs = _token_array(call.fn, batch, "log_probs", "behaviour log-probs", width, inputs.lengths)
    sum_pi_squared = _token_array(call.fn, batch, "sum_pi_squared", "per-token sum_pi_squared (verl "
                                  "actor.calculate_sum_pi_squared)", width, inputs.lengths)
    return call.spec.tensor_function()(inputs.rewards, inputs.mask, call.groups(batch), log_probs, sum_pi_squared,
                                       handle_zero_tail=call.settings["handle_zero_tail"],
                                       epsilon=call.settings["epsilon"])


def _token_estimator(
    tensors: Callable[[_Call, pl.DataFrame, _TokenInputs], Any], keep_empty: bool = False
) -> Callable[[_Call, pl.DataFrame], pl.DataFrame]:
    """A token-level adapter: ``tensors`` calls the tensor function on the step's token arrays;
    the result is whitened when the ``whiten`` option says so, and summarised per trajectory.
    ``keep_empty``: a response with no model tokens stays in the batch (verl keeps it in its
    group's statistics; its advantages are 0), else it is refused."""

    def adapter(call: _Call, batch: pl.DataFrame) -> pl.DataFrame:
        inputs = _token_inputs(call.fn, batch, keep_empty)
        mask = inputs.mask
        result = tensors(call, batch, inputs)
        advantages, returns, label = result.advantages, result.returns, result.normalisation
        if call.settings.get("whiten"):  # the entries with a whiten option
            whitened = masked_whiten(advantages, mask)
            advantages, label = whitened.advantages, whitened.normalisation
        masked = torch.where(mask, advantages, 0.0)
        counts = mask.sum(dim=1)
        first = mask.int().argmax(dim=1)
        last = mask.shape[1] - 1 - mask.flip(1).int().argmax(dim=1)
        mean = masked.double().sum(dim=1) / counts.clamp_min(1)  # an empty response: 0
        return pl.DataFrame(
            {
                _ROW: batch[_ROW],
                "advantage": mean.numpy(),
                "advantage_first": advantages.gather(1, first[:, None]).squeeze(1).double().numpy(),
                "advantage_last": advantages.gather(1, last[:, None]).squeeze(1).double().numpy(),
                "normalisation": [label] * batch.height,
            }
        ).with_columns(
            _list_column("token_advantages", advantages.numpy(), inputs.lengths),
            _list_column("token_returns", returns.numpy(), inputs.lengths),
        )

    return adapter


def _token_array(fn: str, batch: pl.DataFrame, column: str, what: str, width: int, lengths: np.ndarray) -> torch.Tensor:
    """The list column ``column`` of the tokens frame as a (B, T) float32 tensor; every row needs one."""
    if column not in batch.columns or batch[column].null_count():
        row = batch.filter(pl.col(column).is_null()) if column in batch.columns else batch
        estimator = fn if fn != "recompute" else "this estimator"
        raise check.EstimatorInputError(
            f"{fn}: {estimator} needs {what} (tokens column {column}); trajectory {row['trajectory_id'][0]!r} has none")
    padded, found = _padded(batch[column], np.float32, 0.0, width)
    _same_lengths(fn, batch["trajectory_id"], column, lengths, found, np.ones(batch.height, dtype=bool))
    _no_gap_on_model_tokens(fn, batch, column, what)
    return torch.from_numpy(padded)


def _no_gap_on_model_tokens(fn: str, batch: pl.DataFrame, column: str, what: str) -> None:
    """A one-line error where an item of ``column`` is null on a model token (a log-prob the log
    did not hold); a null on an observation or prompt token is never read, and stays allowed."""
    array = batch[column].to_arrow()
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    if not any(chunk.flatten().null_count for chunk in chunks):  # the items' validity bitmap, no copy
        return
    items = batch.select("trajectory_id", pl.col(column).list.eval(pl.element().is_null()).alias("__null"),
                         "response_mask").explode("__null", "response_mask")
    gap = items.with_columns(pl.int_range(pl.len()).over("trajectory_id").alias("__at")).filter(
        pl.col("__null") & pl.col("response_mask")).head(1)
    if gap.height:
        trajectory, position = gap["trajectory_id"][0], gap["__at"][0]
        raise check.EstimatorInputError(f"{fn}: {what} (tokens column {column}) of trajectory {trajectory!r} has no value "
                                        f"at token {position}, a model token")


def _same_lengths(fn: str, ids: pl.Series, name: str, lengths: np.ndarray, other: np.ndarray, present: np.ndarray) -> None:
    bad = np.nonzero(present & (other != lengths))[0]
    if bad.size:
        i = int(bad[0])
        raise check.EstimatorInputError(
            f"{fn}: trajectory {ids[i]!r}: {name} has {int(other[i])} entries but response_mask has {int(lengths[i])}"
        )


def _outcome_on_last_token(
    fn: str, batch: pl.DataFrame, rewards: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor
) -> torch.Tensor:
    """Put the trajectory ``reward`` on the last model token of rows without token rewards."""
    reward = torch.tensor(batch["reward"].fill_null(float("nan")).to_numpy(), dtype=rewards.dtype)
    missing = rows & torch.isnan(reward)
    if bool(missing.any()):
        i = int(missing.nonzero()[0])
        raise check.EstimatorInputError(
            f"{fn}: trajectory {batch['trajectory_id'][i]!r} has neither token_rewards nor a reward"
        )
    last = mask.shape[1] - 1 - mask.flip(1).int().argmax(dim=1)
    rewards = rewards.clone()
    target = rows.nonzero().flatten()
    rewards[target, last[target]] = reward[target]
    return rewards


def _scores(fn: str, batch: pl.DataFrame, source: str, unscorable: bool = False) -> torch.Tensor:
    """(B, L) rewards whose row sums are the scores: ``reward`` (L = 1), or ``token_rewards``.

    With ``score="token_rewards"`` a row whose token rewards are null falls back to its ``reward``.
    A trajectory with no reward is an error unless ``unscorable`` (TRL's conventions): then its
    score is NaN, TRL's unscorable completion.
    """
    check.choice(fn, "score", source, ("reward", "token_rewards"))
    reward = batch["reward"] if "reward" in batch.columns else pl.Series([None] * batch.height, dtype=pl.Float64)
    if source == "token_rewards":
        if "token_rewards" not in batch.columns:
            raise check.EstimatorInputError(f"{fn}: score='token_rewards' needs the tokens frame")
        rewards_np, _ = _padded(batch["token_rewards"], np.float32, 0.0)
        has_tokens = batch["token_rewards"].is_not_null().to_numpy()
        if has_tokens.all():
            return torch.from_numpy(rewards_np)
        rewards_np[~has_tokens] = 0.0
        rewards_np[~has_tokens, 0] = reward.fill_null(float("nan")).to_numpy()[~has_tokens]
        missing = ~has_tokens & np.isnan(rewards_np[:, 0])
    else:
        rewards_np = reward.fill_null(float("nan")).to_numpy().astype(np.float32)[:, None]
        missing = np.isnan(rewards_np[:, 0])
    if missing.any() and not unscorable:
        first = int(np.nonzero(missing)[0][0])
        raise check.EstimatorInputError(f"{fn}: trajectory {batch['trajectory_id'][first]!r} has no reward")
    unfit = np.isinf(rewards_np).any(axis=1)  # infinite, or past float32 (which the estimators compute in)
    if unfit.any():
        first = int(np.nonzero(unfit)[0][0])
        raise check.EstimatorInputError(
            f"{fn}: trajectory {batch['trajectory_id'][first]!r}: "
            f"{'reward must be a finite number' if source == 'reward' else 'token_rewards must be finite numbers'} "
            "within float32's range")
    return torch.from_numpy(np.ascontiguousarray(rewards_np))


def _outcome_estimator(call: _Call, batch: pl.DataFrame) -> pl.DataFrame:
    """One score per trajectory and its group (with each trajectory's model-token count where the
    entry needs it) into the tensor function."""
    fn, spec = call.fn, call.spec
    opts = dict(call.settings)
    scores = call.steps.scores(fn, batch, opts.pop("score"), str(opts.get("convention", "")).startswith("trl"))
    extra: dict[str, Any] = {}
    if spec.inputs & Input.TOKEN_COUNTS:
        # each trajectory's score and model-token count: the estimator reads no more of its tokens
        mask = _model_token_counts(fn, batch)
        scores = scores.sum(dim=1, keepdim=True)
        extra["model_tokens"] = mask.numpy()
    else:
        mask = torch.ones_like(scores, dtype=torch.bool)
    result = spec.tensor_function()(scores, mask, call.groups(batch), **opts)
    return pl.DataFrame(
        {
            _ROW: batch[_ROW],
            "advantage": result.sequence_advantages.double().numpy(),
            "normalisation": [result.normalisation] * batch.height,
            **extra,
        }
    )


def _channel_columns(fn: str, frame: pl.DataFrame, channels: list[str] | None) -> tuple[pl.DataFrame, list[str]]:
    """Pivot ``reward_channels`` to one float column per channel (NaN where missing)."""
    if "reward_channels" not in frame.columns:
        raise check.EstimatorInputError(f"{fn}: trajectories lacks column reward_channels")
    long = (
        frame.select(_ROW, "reward_channels")
        .explode("reward_channels")
        .filter(pl.col("reward_channels").is_not_null())
        .select(
            _ROW,
            pl.col("reward_channels").struct.field("name").alias("name"),
            pl.col("reward_channels").struct.field("value").cast(pl.Float64).alias("value"),
        )
    )
    value = pl.col("value")
    unfit = long.filter(~value.is_finite() | (value.abs() > FLOAT32_MAX)).head(1)
    if unfit.height:
        row, name, found = unfit.row(0)
        raise check.EstimatorInputError(
            f"{fn}: trajectory {frame['trajectory_id'][row]!r}: reward channel {name!r} must be a finite number "
            f"within float32's range, got {found}")
    seen = long["name"].unique(maintain_order=True).to_list()
    names = list(channels) if channels is not None else seen
    if not names:
        raise check.EstimatorInputError(f"{fn}: no reward channels found; pass channels=[...] or fill reward_channels")
    unknown = [n for n in names if n not in seen]
    if unknown:
        raise check.EstimatorInputError(f"{fn}: channel(s) {', '.join(unknown)} appear in no trajectory; known: {seen}")
    wide = long.filter(pl.col("name").is_in(names)).pivot(on="name", index=_ROW, values="value", aggregate_function="first")
    columns = [f"__channel_{i}" for i in range(len(names))]
    wide = wide.select(_ROW, *[pl.col(n).alias(c) for n, c in zip(names, columns)])
    frame = frame.join(wide, on=_ROW, how="left").with_columns(
        [pl.col(c).fill_null(float("nan")) for c in columns]
    )
    return frame, names


def _channel_inputs(call: _Call, batch: pl.DataFrame) -> tuple[torch.Tensor, dict[str, Any]]:
    """(B, K) channel values, and the options with ``weights`` in channel order and ``channels`` dropped."""
    names = call.settings["channels"]
    columns = [f"__channel_{i}" for i in range(len(names))]
    channels = torch.tensor(batch.select(columns).to_numpy(), dtype=torch.float32)
    opts = {k: v for k, v in call.settings.items() if k != "channels"}
    if isinstance(opts.get("weights"), dict):
        opts["weights"] = [float(opts["weights"].get(n, 1.0)) for n in names]
    return channels, opts


def _channel_frame(batch: pl.DataFrame, sequence: torch.Tensor, label: str, **extra: Any) -> pl.DataFrame:
    return pl.DataFrame(
        {_ROW: batch[_ROW], "advantage": sequence.double().numpy(), "normalisation": [label] * batch.height, **extra}
    )


def _channel_estimator(call: _Call, batch: pl.DataFrame) -> pl.DataFrame:
    """Channel values and groups into the tensor function (GDPO as TRL, the summed channels)."""
    channels, opts = _channel_inputs(call, batch)
    result = call.spec.tensor_function()(channels, call.groups(batch), **opts)
    return _channel_frame(batch, result.sequence_advantages, result.normalisation)


def _channel_tokens(call: _Call, batch: pl.DataFrame) -> pl.DataFrame:
    """Channel values, each trajectory's model-token count and groups (GDPO as verl, whitened over tokens)."""
    channels, opts = _channel_inputs(call, batch)
    counts = _model_token_counts(call.fn, batch)
    result = call.spec.tensor_function()(channels, counts, call.groups(batch), **opts)
    return _channel_frame(batch, result.sequence_advantages, result.normalisation, model_tokens=counts.numpy())


def _channel_dynamic(call: _Call, batch: pl.DataFrame) -> pl.DataFrame:
    """Dynamic GDPO: channel values and groups, with the moving averages carried from the run's
    previous step in ``call.state``."""
    channels, opts = _channel_inputs(call, batch)
    config = weight_config(call.fn, opts.pop("config") or None)
    key = str(batch["run_id"][0])
    extra: dict[str, Any] = {}
    mask = _model_token_counts(call.fn, batch) if config.batch_normalisation == "token" else None
    if mask is not None:
        extra["model_tokens"] = mask.numpy()
    step = call.spec.tensor_function()(channels, call.groups(batch), mask, previous_ema=call.state.get(key),
                                       config=config, **opts)
    call.state[key] = step.weights.ema_std
    # the step's weights on every row, built as one array: a Python list per row costs 15 ms a step
    weights = step.weights.weights.double().numpy()
    extra["channel_weights"] = pl.Series(np.tile(weights, (batch.height, 1))).cast(pl.List(pl.Float64))
    return _channel_frame(batch, step.sequence_advantages, step.normalisation, **extra)


ADAPTERS: dict[str, Callable[[_Call, pl.DataFrame], pl.DataFrame]] = {
    "critic": _token_estimator(_critic),
    "returns": _token_estimator(_returns),
    "baseline_rewards": _token_estimator(_baseline_rewards),
    "token_baseline": _token_estimator(_token_baseline, keep_empty=True),
    "outcome": _outcome_estimator,
    "channel": _channel_estimator,
    "channel_tokens": _channel_tokens,
    "channel_dynamic": _channel_dynamic,
}
"""How a step's rows become an estimator's tensor inputs, by the name a registry entry gives
(:meth:`~trajlens.estimators.registry.EstimatorSpec.frame_adapter`)."""


def _adapter(fn: str, spec: EstimatorSpec) -> Callable[[_Call, pl.DataFrame], pl.DataFrame]:
    adapter = ADAPTERS.get(spec.frame_adapter())
    if adapter is None:
        raise check.EstimatorInputError(
            f"{fn}: estimator {spec.name} names input adapter {spec.frame_adapter()!r}, not one of {', '.join(ADAPTERS)}")
    return adapter


def _model_token_counts(fn: str, batch: pl.DataFrame) -> torch.Tensor:
    """(B,) each trajectory's model-token count, from its response mask (else ``model_tokens``):
    the estimators that whiten over tokens need only the counts, never the padded mask."""
    if _MASK_TOKENS in batch.columns and batch[_MASK_TOKENS].null_count() == 0:
        return torch.tensor(batch[_MASK_TOKENS].to_numpy())
    if "model_tokens" not in batch.columns or batch["model_tokens"].null_count():
        raise check.EstimatorInputError(
            f"{fn}: token-level whitening needs each trajectory's model-token count: pass tokens or fill model_tokens"
        )
    return torch.tensor(batch["model_tokens"].cast(pl.Int64).to_numpy())

"""A stored run read a batch of steps at a time: :func:`step_batches`.

Reading a run step by step costs a file open, a schema and a frame per step: nothing on a run
of 200 large steps, most of the time on a run of 100,000 tiny ones. Here a run's partitions
are listed once (:mod:`trajlens.run.partitions`), and consecutive steps are read together in
batches of at most :data:`BATCH_TOKENS` tokens (estimated from the trajectories' token counts)
and :data:`BATCH_STEPS` steps (:func:`plan_batches`), so memory stays that of a batch whatever
the number of steps, and the fixed cost of a read is shared by the steps of a batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import polars as pl
import pyarrow as pa

from trajlens.errors import ConfigError
from trajlens.run.partitions import Partitions, partition_files, read_arrow_partitions, read_partitions, scan_run_table
from trajlens.run.splits import TRAIN_SPLIT
from trajlens.store.ahead import read_ahead

BATCH_TOKENS = 1_000_000
"""Tokens (model and observation, as the trajectories count them) read together at most; a
single step larger than that is read alone (its arrays then come as one chunk each, used in
place without a copy)."""
BATCH_STEPS = 2_048
"""Steps read together at most (bounds the batch when the trajectories carry no token counts)."""
LIST_ALL_ABOVE = 64
"""Steps above which the run's partitions are listed once rather than step by step."""


class StepBatch(NamedTuple):
    """Consecutive steps of a run, read together."""

    steps: list[int]
    trajectories: pl.DataFrame
    """The steps' training trajectories, in step order (file order within a step)."""
    tokens: pa.Table | None
    """Every token row of those steps (all splits), or None when no token column was asked."""




def train_trajectories(store: Any, run_id: str, steps: Sequence[int] | None = None) -> pl.DataFrame:
    """The training trajectories of ``run_id`` (of ``steps``, when given), in step order.

    Raises :class:`ConfigError` when there are none: nothing to recompute.
    """
    store.require_runs([run_id])
    if steps is not None:
        frame = read_partitions(store, run_id, "trajectories", steps, None)
    else:
        frame = scan_run_table(store, run_id, "trajectories").collect()
    frame = frame.filter((pl.col("run_id") == run_id) & (pl.col("split") == TRAIN_SPLIT)).sort("step", maintain_order=True)
    if frame.is_empty():
        raise ConfigError([f"run {run_id!r} has no trajectories of split 'train' to recompute"])
    return frame


def step_bounds(steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, stops) of the runs of equal values in ``steps`` (a sorted column)."""
    if steps.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    change = np.flatnonzero(steps[1:] != steps[:-1]) + 1
    return np.concatenate([[0], change]), np.concatenate([change, [steps.size]])


def token_sizes(trajectories: pl.DataFrame) -> np.ndarray:
    """Each trajectory's size in a batch's budget: its model and observation tokens, plus one (a
    trajectory without token counts counts one)."""
    counts = [c for c in ("model_tokens", "observation_tokens") if c in trajectories.columns]
    if not counts:
        return np.ones(trajectories.height, dtype=np.int64)
    return trajectories.select(pl.sum_horizontal([pl.col(c).fill_null(0) for c in counts]) + 1).to_series().to_numpy()


def plan_batches(trajectories: pl.DataFrame, *, max_tokens: int = BATCH_TOKENS,
                 max_steps: int = BATCH_STEPS) -> list[tuple[int, int]]:
    """Row ranges ``[start, stop)`` of ``trajectories`` (in step order) that make the batches:
    whole steps, at most ``max_steps`` of them and ``max_tokens`` tokens unless one step is larger."""
    sizes = token_sizes(trajectories)
    starts, stops = step_bounds(trajectories["step"].to_numpy())
    per_step = np.add.reduceat(sizes, starts) if starts.size else sizes[:0]
    batches: list[tuple[int, int]] = []
    first, tokens, steps = 0, 0, 0
    for index in range(starts.size):
        if steps and (tokens + per_step[index] > max_tokens or steps == max_steps):
            batches.append((int(starts[first]), int(starts[index])))
            first, tokens, steps = index, 0, 0
        tokens += int(per_step[index])
        steps += 1
    if starts.size:
        batches.append((int(starts[first]), int(stops[-1])))
    return batches


def step_batches(store: Any, run_id: str, trajectories: pl.DataFrame, token_columns: Sequence[str] | None, *,
                 max_tokens: int = BATCH_TOKENS, max_steps: int = BATCH_STEPS) -> Iterator[StepBatch]:
    """``trajectories`` (training rows in step order) cut into batches, each with its steps'
    token rows (``token_columns``, with ``run_id``; None reads no tokens). The next batch is read
    on a background thread while the caller works on this one (two batches in memory at most)."""
    plan = plan_batches(trajectories, max_tokens=max_tokens, max_steps=max_steps)
    # a few steps: list only theirs; many: list the run's partitions once
    files: Partitions | None | bool = True
    if token_columns is not None and trajectories["step"].n_unique() > LIST_ALL_ABOVE:
        files = partition_files(store, run_id, "tokens")

    def read(bounds: tuple[int, int]) -> StepBatch:
        part = trajectories.slice(bounds[0], bounds[1] - bounds[0])
        steps = part["step"].unique(maintain_order=True).to_list()
        tokens = None
        if token_columns is not None:
            columns = ["run_id", *(c for c in token_columns if c != "run_id")]
            tokens = read_arrow_partitions(store, run_id, "tokens", steps, columns, files)
        return StepBatch(steps, part, tokens)

    yield from read_ahead(read, plan)

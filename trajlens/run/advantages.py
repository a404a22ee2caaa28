"""Recomputed advantages of a stored run, and their per-step batch diagnostics.

:func:`recompute_run` reads a run's trajectories (and token arrays, for the token-level
estimators) from a store and returns what :func:`trajlens.estimators.adapters` gives;
:func:`diagnostics_of` summarises each step's batch the way the trainer saw it: over model
tokens or over trajectories, as the estimator's registry entry says its loss sees them
(:func:`batch_diagnostics` summarises a frame over whatever it is given).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import polars as pl

from trajlens.errors import ConfigError
from trajlens.run.splits import TRAIN_SPLIT

if TYPE_CHECKING:
    from trajlens.estimators.registry import RunFacts

DIAGNOSTIC_COLUMNS: tuple[str, ...] = (
    "count", "mean", "std", "skew", "kurtosis", "bimodality", "positive_share", "all_negative", "all_positive",
)


@dataclass(frozen=True)
class RunFrames:
    """A run's training trajectories and token arrays, read once and shared by estimators."""

    run_id: str
    trajectories: pl.DataFrame
    tokens: pl.DataFrame | None

    @cached_property
    def facts(self) -> RunFacts:
        """What the frames hold that estimators need (:func:`~trajlens.estimators.registry.run_facts`),
        read once however many estimators ask."""
        from trajlens.estimators.registry import run_facts

        return run_facts(self.trajectories, self.tokens)


def read_run(store: Any, run_id: str, *, tokens: bool = True) -> RunFrames:
    """Read ``run_id``'s training trajectories (and, with ``tokens``, its token arrays)."""
    store.require_runs([run_id])
    trajectories = store.trajectories.filter((pl.col("run_id") == run_id) & (pl.col("split") == TRAIN_SPLIT)).collect()
    if trajectories.is_empty():
        raise ConfigError([f"run {run_id!r} has no trajectories of split 'train' to recompute"])
    token_frame = store.tokens.filter(pl.col("run_id") == run_id).collect() if tokens else None
    return RunFrames(run_id, trajectories, None if token_frame is None or token_frame.is_empty() else token_frame)


def recompute_run(store: Any, run_id: str, estimator: str, *, frames: RunFrames | None = None,
                  **options: Any) -> pl.DataFrame:
    """Advantages ``estimator`` would have given the training trajectories of ``run_id``.

    The inputs joined are those the estimator's registry entry names; a run that lacks one is a
    one-line :class:`ConfigError` saying what is missing.
    """
    from trajlens.estimators import recompute
    from trajlens.estimators.registry import reads_tokens

    if frames is None:
        frames = read_run(store, run_id, tokens=reads_tokens(estimator))
    require_inputs(run_id, estimator, frames, options)
    tokens = frames.tokens if reads_tokens(estimator) else None
    return recompute(frames.trajectories, tokens, estimator, **options)


def require_inputs(run_id: str, estimator: str, frames: RunFrames, options: Mapping[str, Any] | None = None) -> None:
    """A one-line :class:`ConfigError` when the run lacks an input the estimator's registry entry
    names, with ``options`` (:meth:`~trajlens.estimators.spec.EstimatorSpec.missing`: TRL's
    conventions score a trajectory without a reward). Groups of one are allowed: a group
    estimator gives them its documented advantage (0, or the score)."""
    from trajlens.estimators.registry import Input
    from trajlens.estimators.spec import GROUPS_OF_TWO, EstimatorChoice

    choice = EstimatorChoice(estimator, estimator, dict(options or {}))
    spec = choice.spec()
    lacking = [what for what in choice.missing(frames.facts) if what != GROUPS_OF_TWO]
    if lacking:
        hint = "; use an outcome estimator (grpo, rloo, ...)" if spec.inputs & Input.TOKEN_ARRAYS else ""
        raise ConfigError([f"run {run_id!r}: {estimator} needs {' and '.join(lacking)}{hint}"])


def diagnostics_of(estimator: str, recomputed: pl.DataFrame, tokens: pl.DataFrame | None, *,
                   extremes: bool = False) -> pl.DataFrame:
    """:func:`batch_diagnostics` of ``recomputed`` over what ``estimator``'s loss sees: model
    tokens (its token advantages, or each trajectory's advantage once per model token) or
    trajectories, as its registry entry says. ``extremes``: with ``min`` and ``max`` columns."""
    from trajlens.estimators.registry import Statistics, estimator_spec

    spec = estimator_spec(estimator)
    if spec.statistics is Statistics.MODEL_TOKENS and "token_advantages" in recomputed.columns:
        return batch_diagnostics(recomputed, tokens, extremes=extremes)
    if spec.statistics is Statistics.MODEL_TOKENS and "model_tokens" in recomputed.columns:
        return batch_diagnostics(recomputed, extremes=extremes, repeats="model_tokens")
    return batch_diagnostics(recomputed, extremes=extremes)


def save_advantage_batches(store: Any, run_id: str, diagnostics: pl.DataFrame, *, keep_other_labels: bool) -> None:
    """Write a run's part of ``advantage_batches``; optionally keep the rows of other labels."""
    if keep_other_labels and "advantage_batches" in store.tables():
        labels = diagnostics["estimator"].unique().implode()
        earlier = store.table("advantage_batches").filter(
            (pl.col("run_id") == run_id) & ~pl.col("estimator").is_in(labels)).collect()
        diagnostics = pl.concat([earlier, diagnostics], how="diagonal_relaxed")
    store.write_derived("advantage_batches", run_id, diagnostics)


def batch_diagnostics(recomputed: pl.DataFrame, tokens: pl.DataFrame | None = None, *,
                      extremes: bool = False, repeats: str | None = None) -> pl.DataFrame:
    """One row per (run_id, step): the shape of that step's advantage batch.

    With ``token_advantages`` in ``recomputed`` and the run's ``tokens`` frame given, the
    statistics run over model tokens (as the actor loss sees them); otherwise over the
    per-trajectory ``advantage``, each counted as many times as its ``repeats`` column says
    (``model_tokens``: over model tokens, as a trajectory's advantage reaches the loss). Token
    values are read from the Arrow buffers of the two list columns, step by step, never expanded
    to one row per token. ``extremes``: with the ``min`` and ``max`` of the values described
    (NaN for none).
    """
    from trajlens.estimators import advantage_stats

    token_level = tokens is not None and "token_advantages" in recomputed.columns
    rows = []
    steps = _token_values(recomputed, tokens) if token_level else _trajectory_values(recomputed, repeats)
    for (run_id, step), values, counts in steps:
        # Arrow hands out read-only buffers; torch wants to own what it wraps.
        stats = advantage_stats(_tensor(values), repeats=None if counts is None else _tensor(counts))
        described = values if counts is None else values[counts > 0]
        rows.append({"run_id": run_id, "step": step, **{name: getattr(stats, name) for name in DIAGNOSTIC_COLUMNS},
                     **(_extremes(described) if extremes else {})})
    return pl.DataFrame(rows).sort("run_id", "step")


def _tensor(values: Any) -> Any:
    """``values`` as a torch tensor, copied when they are read-only (as Arrow hands them out)."""
    import torch

    return torch.from_numpy(values if values.flags.writeable else values.copy())


def _extremes(values: Any) -> dict[str, float]:
    """``min`` and ``max`` of ``values`` (NaN when empty)."""
    if not len(values):
        return {"min": float("nan"), "max": float("nan")}
    return {"min": float(values.min()), "max": float(values.max())}


def _trajectory_values(recomputed: pl.DataFrame, repeats: str | None = None):
    """(run_id, step), that step's per-trajectory advantages (float64) and their ``repeats``
    column (int64; None without one), step by step."""
    counts = [pl.col(repeats).cast(pl.Int64).alias("__repeats")] if repeats else []
    values = recomputed.select("run_id", "step", pl.col("advantage").cast(pl.Float64), *counts)
    for key, part in values.partition_by(["run_id", "step"], as_dict=True, maintain_order=True).items():
        yield key, part["advantage"].to_numpy(), part["__repeats"].to_numpy() if repeats else None


def _token_values(recomputed: pl.DataFrame, tokens: pl.DataFrame):
    """(run_id, step) and the advantages at that step's model tokens (float64), step by step.

    The two frames are matched on (run_id, trajectory_id); rows are put in step order and both
    list columns taken in that order, so each step's tokens are one contiguous slice of the flat
    buffers (:mod:`trajlens.estimators.flat`).
    """
    import numpy as np

    from trajlens.estimators.flat import flat_list

    order = (
        recomputed.select("run_id", "step", "trajectory_id").with_row_index("__row")
        .join(tokens.select("run_id", "trajectory_id").with_row_index("__token"), on=["run_id", "trajectory_id"],
              how="inner", maintain_order="left")
        .sort("run_id", "step", maintain_order=True)
    )
    if order.is_empty():
        return
    advantages = flat_list(recomputed["token_advantages"].to_arrow().take(order["__row"].to_arrow()), np.float64,
                           float("nan"))
    mask = flat_list(tokens["response_mask"].to_arrow().take(order["__token"].to_arrow()), np.bool_, False)
    if not np.array_equal(advantages.lengths, mask.lengths):
        bad = int(np.nonzero(advantages.lengths != mask.lengths)[0][0])
        raise ValueError(f"trajectory {order['trajectory_id'][bad]!r}: token_advantages has "
                         f"{int(advantages.lengths[bad])} entries but response_mask has {int(mask.lengths[bad])}")
    bounds = order.with_row_index("__position").group_by("run_id", "step", maintain_order=True).agg(
        pl.col("__position").first().alias("first"), pl.col("__position").last().alias("last"))
    for run_id, step, first, last in bounds.iter_rows():
        start, stop = int(advantages.offsets[first]), int(advantages.offsets[last + 1])
        yield (run_id, step), advantages.values[start:stop][mask.values[start:stop]], None

"""Recomputed advantages of a stored run, and their per-step batch diagnostics.

:func:`recompute_run` reads a run's trajectories (and token arrays, for the token-level
estimators) from a store and returns what :func:`trajlens.estimators.recompute` gives;
:func:`batch_diagnostics` summarises each step's batch the way the trainer saw it: over model
tokens or over trajectories, as the estimator's registry entry says its loss sees them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from trajlens.errors import ConfigError

DIAGNOSTIC_COLUMNS: tuple[str, ...] = (
    "count", "mean", "std", "skew", "kurtosis", "bimodality", "positive_share", "all_negative", "all_positive",
)


@dataclass(frozen=True)
class RunFrames:
    """A run's training trajectories and token arrays, read once and shared by estimators."""

    run_id: str
    trajectories: pl.DataFrame
    tokens: pl.DataFrame | None


def read_run(store: Any, run_id: str, *, tokens: bool = True) -> RunFrames:
    """Read ``run_id``'s training trajectories (and, with ``tokens``, its token arrays)."""
    store.require_runs([run_id])
    trajectories = store.trajectories.filter((pl.col("run_id") == run_id) & (pl.col("split") == "train")).collect()
    if trajectories.is_empty():
        raise ConfigError([f"run {run_id!r} has no trajectories of split 'train' to recompute"])
    token_frame = store.tokens.filter(pl.col("run_id") == run_id).collect() if tokens else None
    return RunFrames(run_id, trajectories, None if token_frame is None or token_frame.is_empty() else token_frame)


def _reads_tokens(estimator: str) -> bool:
    from trajlens.estimators.registry import Input, estimator_spec

    return bool(estimator_spec(estimator).inputs & (Input.TOKEN_ARRAYS | Input.TOKEN_COUNTS))


def recompute_run(store: Any, run_id: str, estimator: str, *, frames: RunFrames | None = None,
                  **options: Any) -> pl.DataFrame:
    """Advantages ``estimator`` would have given the training trajectories of ``run_id``.

    The inputs joined are those the estimator's registry entry names; a run that lacks one is a
    one-line :class:`ConfigError` saying what is missing.
    """
    from trajlens.estimators import recompute
    from trajlens.estimators.registry import Input, estimator_spec, run_facts

    spec = estimator_spec(estimator)
    if frames is None:
        frames = read_run(store, run_id, tokens=_reads_tokens(estimator))
    facts = run_facts(frames.trajectories, frames.tokens)
    lacking = [what for what in spec.missing(facts)
               if what not in ("groups of two or more", "a reward for every trajectory")]
    if lacking:
        hint = "; use an outcome estimator (grpo, rloo, ...)" if spec.inputs & Input.TOKEN_ARRAYS else ""
        raise ConfigError([f"{estimator} needs {' and '.join(lacking)}; run {run_id!r} has none{hint}"])
    tokens = frames.tokens if _reads_tokens(estimator) else None
    return recompute(frames.trajectories, tokens, estimator, **options)


def labelled_diagnostics(store: Any, run_id: str, estimator: str, label: str, *,
                         frames: RunFrames | None = None, **options: Any) -> pl.DataFrame:
    """Per-step batch diagnostics of one recomputation, with ``estimator`` set to ``label``.

    The statistics run over what the estimator's registry entry says its loss sees: model
    tokens (token advantages, or each trajectory's advantage once per model token) or
    trajectories.
    """
    from trajlens.estimators.registry import Statistics, estimator_spec

    spec = estimator_spec(estimator)
    if frames is None:
        frames = read_run(store, run_id, tokens=_reads_tokens(estimator))
    recomputed = recompute_run(store, run_id, estimator, frames=frames, **options)
    if spec.statistics is Statistics.MODEL_TOKENS and "token_advantages" in recomputed.columns:
        diagnostics = batch_diagnostics(recomputed, frames.tokens)
    elif spec.statistics is Statistics.MODEL_TOKENS and "model_tokens" in recomputed.columns:
        per_token = recomputed.select("run_id", "step", pl.col("advantage").repeat_by("model_tokens")).explode("advantage")
        diagnostics = batch_diagnostics(per_token)
    else:
        diagnostics = batch_diagnostics(recomputed)
    return diagnostics.with_columns(pl.lit(label).alias("estimator"))


def save_advantage_batches(store: Any, run_id: str, diagnostics: pl.DataFrame, *, keep_other_labels: bool) -> None:
    """Write a run's part of ``advantage_batches``; optionally keep the rows of other labels."""
    if keep_other_labels and "advantage_batches" in store.tables():
        labels = diagnostics["estimator"].unique().implode()
        earlier = store.table("advantage_batches").filter(
            (pl.col("run_id") == run_id) & ~pl.col("estimator").is_in(labels)).collect()
        diagnostics = pl.concat([earlier, diagnostics], how="diagonal_relaxed")
    store.write_derived("advantage_batches", run_id, diagnostics)


def batch_diagnostics(recomputed: pl.DataFrame, tokens: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per (run_id, step): the shape of that step's advantage batch.

    With ``token_advantages`` in ``recomputed`` and the run's ``tokens`` frame given, the
    statistics run over model tokens (as the actor loss sees them); otherwise over the
    per-trajectory ``advantage``.
    """
    import torch

    from trajlens.estimators import advantage_stats

    values = _token_values(recomputed, tokens) if tokens is not None and "token_advantages" in recomputed.columns \
        else recomputed.select("run_id", "step", pl.col("advantage").alias("value"))
    rows = []
    for (run_id, step), part in values.partition_by(["run_id", "step"], as_dict=True, maintain_order=True).items():
        stats = advantage_stats(torch.from_numpy(part["value"].to_numpy().astype("float64")))
        rows.append({"run_id": run_id, "step": step, **{name: getattr(stats, name) for name in DIAGNOSTIC_COLUMNS}})
    return pl.DataFrame(rows).sort("run_id", "step")


def _token_values(recomputed: pl.DataFrame, tokens: pl.DataFrame) -> pl.DataFrame:
    joined = recomputed.select("run_id", "step", "trajectory_id", "token_advantages").join(
        tokens.select("run_id", "trajectory_id", "response_mask"), on=["run_id", "trajectory_id"], how="inner"
    )
    return (
        joined.explode(["token_advantages", "response_mask"])
        .filter(pl.col("response_mask"))
        .select("run_id", "step", pl.col("token_advantages").cast(pl.Float64).alias("value"))
    )

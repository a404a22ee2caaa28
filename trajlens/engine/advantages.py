"""Recomputed advantages step by step on an engine: :func:`recompute_diagnostics_on`.

Each step's training trajectories (and token arrays, for the estimators that read them) are
recomputed where the engine runs the step (:class:`RecomputeStep`), and reduced there to that
step's row of batch diagnostics, exactly as :func:`trajlens.report.advantages.labelled_diagnostics`
computes it for the whole run: every estimator works within one step's batch. The one
exception is ``gdpo_dynamic``, whose channel weights carry from step to step; it is refused
here and runs on the local engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import polars as pl

from trajlens.engine.base import Engine, StepTables
from trajlens.engine.location import StoreLocation
from trajlens.engine.writing import save_table
from trajlens.errors import ConfigError

CARRIES_STATE: frozenset[str] = frozenset({"gdpo_dynamic"})
"""Estimators whose result at a step depends on earlier steps: they cannot run step by step."""


@dataclass(frozen=True)
class RecomputeStep:
    """The step function: one step's batch diagnostics under one estimator."""

    estimator: str
    label: str
    options: dict[str, Any] = field(default_factory=dict)

    def __call__(self, location: StoreLocation, run_id: str, step: int) -> StepTables:
        from trajlens.report.advantages import RunFrames, _reads_tokens, labelled_diagnostics

        part = location.read_step(run_id, "trajectories", step)
        trajectories = pl.DataFrame(part).filter((pl.col("run_id") == run_id) & (pl.col("split") == "train")) \
            if part is not None else pl.DataFrame()
        if trajectories.is_empty():
            return {}
        tokens = None
        if _reads_tokens(self.estimator):
            token_part = location.read_step(run_id, "tokens", step)
            tokens = pl.DataFrame(token_part) if token_part is not None and token_part.num_rows else None
        frames = RunFrames(run_id, trajectories, tokens)
        diagnostics = labelled_diagnostics(None, run_id, self.estimator, self.label, frames=frames, **self.options)
        return {"advantage_batches": diagnostics.to_arrow()}


def recompute_diagnostics_on(engine: Engine, location: StoreLocation, run_id: str, estimator: str, label: str,
                             options: dict[str, Any], *,
                             progress: Callable[[str], None] | None = None) -> pl.DataFrame:
    """Per-step batch diagnostics of ``estimator`` on ``run_id``, one row per step, labelled ``label``."""
    from trajlens.estimators.registry import estimator_spec

    estimator_spec(estimator)  # an unknown name is refused before any step runs
    if estimator in CARRIES_STATE:
        raise ConfigError([f"{estimator} carries its weights from step to step, so it cannot run one task per step; "
                           "use --engine local"])
    if run_id not in location.run_ids():
        raise ConfigError([f"run {run_id!r} is not in the store (runs: {', '.join(location.run_ids()) or 'none'})"])
    parts = []
    for result in engine.map_steps(RecomputeStep(estimator, label, dict(options)), location, run_id,
                                   location.steps(run_id, "trajectories")):
        if "advantage_batches" in result.tables:
            parts.append(pl.DataFrame(result.tables["advantage_batches"]))
        if progress is not None:
            progress(f"step {result.step}")
    if not parts:
        raise ConfigError([f"run {run_id!r} has no trajectories of split 'train' to recompute"])
    return pl.concat(parts, how="diagonal_relaxed").sort("run_id", "step")


def save_advantage_batches_on(store: Any, location: StoreLocation, run_id: str, diagnostics: pl.DataFrame) -> None:
    """Write a run's part of ``advantage_batches``, keeping the rows of other labels
    (as :func:`trajlens.report.advantages.save_advantage_batches` with ``keep_other_labels``)."""
    if store is not None:
        from trajlens.report.advantages import save_advantage_batches

        save_advantage_batches(store, run_id, diagnostics, keep_other_labels=True)
        return
    earlier = location.read_derived("advantage_batches", run_id)
    if earlier is not None:
        labels = diagnostics["estimator"].unique().implode()
        kept = pl.DataFrame(earlier).filter(~pl.col("estimator").is_in(labels))
        diagnostics = pl.concat([kept, diagnostics], how="diagonal_relaxed")
    save_table(None, location, "advantage_batches", run_id, diagnostics)


__all__ = ["CARRIES_STATE", "RecomputeStep", "recompute_diagnostics_on", "save_advantage_batches_on"]

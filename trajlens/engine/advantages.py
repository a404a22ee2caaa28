"""Recomputed advantages step by step on an engine: :func:`recompute_diagnostics_on`.

Each step's training trajectories (and token arrays, for the estimators that read them) are
recomputed where the engine runs the step (:class:`RecomputeStep`), and reduced there to that
step's row of batch diagnostics by :func:`trajlens.run.stepwise.batch_choice_diagnostics`, the
function :func:`trajlens.run.stepwise.labelled_diagnostics` runs over the whole run: every
estimator works within one step's batch. The one
exception is ``gdpo_dynamic``, whose channel weights carry from step to step: it runs in two
passes. The first gives each step's advantage std per channel (:class:`ChannelSignalStep`,
which does not depend on earlier steps); the moving averages are then run through the steps
here, in order, with the estimator's own :func:`~trajlens.estimators.dynamic.dynamic_weights`;
the second pass recomputes each step from the average its predecessors left, which is what
the whole-run recomputation hands it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import polars as pl
import pyarrow as pa

from trajlens.engine.base import Engine, StepTables
from trajlens.run.location import StoreLocation
from trajlens.engine.writing import save_table
from trajlens.errors import ConfigError
from trajlens.estimators.registry import ESTIMATOR_REGISTRY
from trajlens.run.splits import TRAIN_SPLIT

CARRIES_STATE: frozenset[str] = frozenset(name for name, spec in ESTIMATOR_REGISTRY.items() if spec.stateful)
"""Estimators whose result at a step depends on earlier steps (the registry's ``stateful``): they run in two passes."""


def _step_frames(location: StoreLocation, run_id: str, step: int, estimator: str) -> Any:
    """One step's training trajectories (and token arrays, when ``estimator`` reads them), or None."""
    from trajlens.run.advantages import RunFrames
    from trajlens.estimators.registry import reads_tokens

    part = location.read_step(run_id, "trajectories", step)
    trajectories = pl.DataFrame(part).filter((pl.col("run_id") == run_id) & (pl.col("split") == TRAIN_SPLIT)) \
        if part is not None else pl.DataFrame()
    if trajectories.is_empty():
        return None
    tokens = None
    if reads_tokens(estimator):
        token_part = location.read_step(run_id, "tokens", step)
        tokens = pl.DataFrame(token_part) if token_part is not None and token_part.num_rows else None
    return RunFrames(run_id, trajectories, tokens)


@dataclass(frozen=True)
class RecomputeStep:
    """The step function: one step's batch diagnostics under one estimator."""

    estimator: str
    label: str
    options: dict[str, Any] = field(default_factory=dict)
    carried: dict[int, list[float]] = field(default_factory=dict)
    """For an estimator in :data:`CARRIES_STATE`: the state earlier steps leave to each step
    (``gdpo_dynamic``: the channels' moving average of advantage std), absent at the first."""

    def __call__(self, location: StoreLocation, run_id: str, step: int) -> StepTables:
        from trajlens.estimators.spec import EstimatorChoice
        from trajlens.run.advantages import RunFrames, require_inputs
        from trajlens.run.stepwise import batch_choice_diagnostics, choice_token_columns

        choice = EstimatorChoice(self.label, self.estimator, dict(self.options))
        part = location.read_step(run_id, "trajectories", step)
        trajectories = pl.DataFrame(part).filter((pl.col("run_id") == run_id) & (pl.col("split") == TRAIN_SPLIT)) \
            if part is not None else pl.DataFrame()
        if trajectories.is_empty():
            return {}
        columns = choice_token_columns([choice])
        tokens = location.read_step(run_id, "tokens", step, ("run_id", *columns)) if columns is not None else None
        if tokens is not None and not tokens.num_rows:
            tokens = None
        require_inputs(run_id, self.estimator, RunFrames(run_id, trajectories, None if tokens is None else pl.DataFrame(tokens)),
                       choice.options)
        carry: dict[str, dict[str, Any]] = {self.label: {}}
        if self.estimator in CARRIES_STATE and step in self.carried:
            carry[self.label][run_id] = _ema_tensor(self.carried[step])
        errors: dict[str, Exception] = {}
        parts = batch_choice_diagnostics(run_id, trajectories, tokens, [choice], carry=carry, errors=errors)
        if self.label in errors:
            raise errors[self.label]
        return {"advantage_batches": pl.concat(parts, how="diagonal_relaxed").to_arrow()} if parts else {}


@dataclass(frozen=True)
class ChannelSignalStep:
    """The first pass of ``gdpo_dynamic``: one step's advantage std of each channel, as the
    estimator computes it before any moving average (its state after a first step)."""

    options: dict[str, Any] = field(default_factory=dict)

    def __call__(self, location: StoreLocation, run_id: str, step: int) -> StepTables:
        from trajlens.run.advantages import recompute_run

        frames = _step_frames(location, run_id, step, "gdpo_dynamic")
        if frames is None:
            return {}
        state: dict[str, Any] = {}
        recompute_run(None, run_id, "gdpo_dynamic", frames=frames, carry=state, **self.options)
        return {"channel_std": pa.table({"step": [step], "std": [state[run_id].tolist()]})}


def _ema_tensor(values: list[float]) -> Any:
    import torch

    return torch.tensor(values, dtype=torch.float32)  # the estimator's channel dtype: float32 values, exactly


def carried_averages(signals: dict[int, list[float]], options: dict[str, Any]) -> dict[int, list[float]]:
    """The moving average each step starts from (none for the first), given each step's channel
    std: ``gdpo_dynamic``'s own update, step after step in order."""
    from trajlens.estimators.dynamic import dynamic_weights, weight_config

    config = weight_config("gdpo_dynamic", options.get("config") or None)
    carried: dict[int, list[float]] = {}
    previous = None
    for step in sorted(signals):
        if previous is not None:
            carried[step] = previous.tolist()
        previous = dynamic_weights(_ema_tensor(signals[step]), previous, config).ema_std
    return carried


def recompute_diagnostics_on(engine: Engine, location: StoreLocation, run_id: str, estimator: str, label: str,
                             options: dict[str, Any], *,
                             progress: Callable[[str], None] | None = None) -> pl.DataFrame:
    """Per-step batch diagnostics of ``estimator`` on ``run_id``, one row per step, labelled ``label``."""
    from trajlens.estimators.registry import estimator_spec

    estimator_spec(estimator)  # an unknown name is refused before any step runs
    if run_id not in location.run_ids():
        raise ConfigError([f"run {run_id!r} is not in the store (runs: {', '.join(location.run_ids()) or 'none'})"])
    steps = location.steps(run_id, "trajectories")
    carried: dict[int, list[float]] = {}
    if estimator in CARRIES_STATE:
        signals = {}
        for result in engine.map_steps(ChannelSignalStep(dict(options)), location, run_id, steps):
            if "channel_std" in result.tables:
                signals[result.step] = result.tables["channel_std"].column("std")[0].as_py()
        carried = carried_averages(signals, dict(options))
    parts = []
    for result in engine.map_steps(RecomputeStep(estimator, label, dict(options), carried), location, run_id, steps):
        if "advantage_batches" in result.tables:
            parts.append(pl.DataFrame(result.tables["advantage_batches"]))
        if progress is not None:
            progress(f"step {result.step}")
    if not parts:
        raise ConfigError([f"run {run_id!r} has no trajectories of split 'train' to recompute"])
    return pl.concat(parts, how="diagonal_relaxed").sort("run_id", "step")


def save_advantage_batches_on(store: Any, location: StoreLocation, run_id: str, diagnostics: pl.DataFrame) -> None:
    """Write a run's part of ``advantage_batches``, keeping the rows of other labels
    (as :func:`trajlens.run.advantages.save_advantage_batches` with ``keep_other_labels``)."""
    if store is not None:
        from trajlens.run.advantages import save_advantage_batches

        save_advantage_batches(store, run_id, diagnostics, keep_other_labels=True)
        return
    earlier = location.read_derived("advantage_batches", run_id)
    if earlier is not None:
        labels = diagnostics["estimator"].unique().implode()
        kept = pl.DataFrame(earlier).filter(~pl.col("estimator").is_in(labels))
        diagnostics = pl.concat([kept, diagnostics], how="diagonal_relaxed")
    save_table(None, location, "advantage_batches", run_id, diagnostics)


__all__ = ["CARRIES_STATE", "ChannelSignalStep", "RecomputeStep", "carried_averages", "recompute_diagnostics_on",
           "save_advantage_batches_on"]

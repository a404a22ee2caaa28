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
        part = location.read_step(run_id, "trajectories", step)
        trajectories = pl.DataFrame(part) if part is not None else pl.DataFrame()
        if _training(run_id, trajectories).is_empty():  # a step of other splits only: its tokens are not read
            return {}
        columns = _token_columns(self.estimator, self.label, self.options)
        tokens = location.read_step(run_id, "tokens", step, columns) if columns is not None else None
        return self._diagnostics(run_id, trajectories, tokens, self.carried.get(step))

    def steps(self, location: StoreLocation, run_id: str, steps: list[int]) -> StepTables:
        """Several steps at once (their file of trajectories read once), each step's batch
        recomputed on its own as a step at a time would, in step order. Token arrays are read a
        file of them at a time, so memory is that of one file's steps. An estimator in
        :data:`CARRIES_STATE` starts each step from the state :attr:`carried` gives it, so its
        steps go one at a time."""
        from trajlens.run.reader import RunReader

        if self.estimator in CARRIES_STATE:
            results = [self(location, run_id, step) for step in steps]
        else:
            reader = RunReader(location, run_id)
            read = reader.read_steps("trajectories", steps)
            trajectories = pl.DataFrame() if read is None else read
            columns = _token_columns(self.estimator, self.label, self.options)
            if columns is None:
                results = [self._diagnostics(run_id, trajectories, None, None)]
            else:
                results = []
                for group in location.step_groups(run_id, steps, "tokens"):
                    tokens = reader.read_steps("tokens", group, columns)
                    results.append(self._diagnostics(
                        run_id, trajectories.filter(pl.col("step").is_in(group)) if trajectories.height else trajectories,
                        None if tokens is None else tokens.to_arrow(), None))
        parts = [tables["advantage_batches"] for tables in results if tables]
        return {"advantage_batches": pa.concat_tables(parts, promote_options="default")} if parts else {}

    def _diagnostics(self, run_id: str, trajectories: pl.DataFrame, tokens: pa.Table | None,
                     carried: list[float] | None) -> StepTables:
        """The batch diagnostics of the training ``trajectories`` of one or more whole steps (in
        step order) and their ``tokens``; ``carried``: the state a stateful estimator starts from."""
        from trajlens.estimators.spec import EstimatorChoice
        from trajlens.run.advantages import RunFrames, require_inputs
        from trajlens.run.batches import step_bounds
        from trajlens.run.stepwise import batch_choice_diagnostics

        every_split, trajectories = trajectories, _training(run_id, trajectories)
        if trajectories.is_empty():
            return {}
        if tokens is not None and not tokens.num_rows:
            tokens = None
        choice = EstimatorChoice(self.label, self.estimator, dict(self.options))
        token_frame = None if tokens is None else pl.DataFrame(tokens)
        starts, stops = step_bounds(trajectories["step"].to_numpy())
        # each step's inputs as a step at a time checks them: its training rows, and the token rows
        # of every trajectory of the step (all the rows read, for a step alone)
        by_step = None if token_frame is None or len(starts) == 1 else _token_rows_by_step(token_frame, every_split)
        for start, stop in zip(starts, stops):
            step = trajectories.slice(start, stop - start)
            step_tokens = token_frame if by_step is None else by_step.get(int(step["step"][0]))
            require_inputs(run_id, self.estimator, RunFrames(run_id, step, step_tokens), choice.options)
        carry: dict[str, dict[str, Any]] = {self.label: {}}
        if carried is not None:
            carry[self.label][run_id] = _ema_tensor(carried)
        errors: dict[str, Exception] = {}
        parts = batch_choice_diagnostics(run_id, trajectories, tokens, [choice], carry=carry, errors=errors)
        if self.label in errors:
            raise errors[self.label]
        return {"advantage_batches": pl.concat(parts, how="diagonal_relaxed").to_arrow()} if parts else {}


def _token_rows_by_step(tokens: pl.DataFrame, trajectories: pl.DataFrame) -> dict[int, pl.DataFrame]:
    """The rows of ``tokens`` by the step of their trajectory in ``trajectories`` (one join, one split)."""
    stepped = tokens.join(trajectories.select("trajectory_id", "step"), on="trajectory_id", maintain_order="left")
    return {int(key[0]): rows for key, rows in stepped.partition_by("step", as_dict=True, include_key=False).items()}


def _token_columns(estimator: str, label: str, options: dict[str, Any]) -> tuple[str, ...] | None:
    """The token columns a step of ``estimator`` reads, with ``run_id`` (None when it reads none)."""
    from trajlens.estimators.spec import EstimatorChoice
    from trajlens.run.stepwise import choice_token_columns

    columns = choice_token_columns([EstimatorChoice(label, estimator, dict(options))])
    return None if columns is None else ("run_id", *columns)


def _training(run_id: str, trajectories: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``trajectories`` (an empty frame, or rows of one or more steps) of the run's training split."""
    if trajectories.is_empty():
        return trajectories
    return trajectories.filter((pl.col("run_id") == run_id) & (pl.col("split") == TRAIN_SPLIT))


@dataclass(frozen=True)
class ChannelSignalStep:
    """The first pass of ``gdpo_dynamic``: one step's advantage std of each channel, as the
    estimator computes it before any moving average (its state after a first step)."""

    options: dict[str, Any] = field(default_factory=dict)

    def __call__(self, location: StoreLocation, run_id: str, step: int) -> StepTables:
        from trajlens.run.advantages import RunFrames, recompute_run

        part = location.read_step(run_id, "trajectories", step)
        trajectories = _training(run_id, pl.DataFrame(part) if part is not None else pl.DataFrame())
        if trajectories.is_empty():
            return {}
        # the token columns the second pass reads (the model-token counts), not every column of the step
        columns = _token_columns("gdpo_dynamic", "gdpo_dynamic", self.options)
        tokens = location.read_step(run_id, "tokens", step, columns) if columns is not None else None
        frames = RunFrames(run_id, trajectories, pl.DataFrame(tokens) if tokens is not None and tokens.num_rows else None)
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

"""What a comparison compares: a run, a stage of a run, or one estimator label of a run.

A side is written ``RUN``, ``RUN:STAGE`` (a stage of the staging in use: ``Q1``..``Q4`` by
default) or ``RUN:LABEL`` (an estimator label of the run's recomputed advantages, such as
``gae_raw``). :func:`read_side` turns one into the per-trajectory measures and per-step
advantage statistics it covers. A side's trajectories are those of its run's measured split
(:func:`trajlens.run.splits.measured_split`: training, or the split a run without training data
has), and its name says so when that is not training.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from trajlens.errors import ConfigError
from trajlens.run.splits import TRAIN_SPLIT, measured_split


RECOMPUTED = " recomputed under "
"""What joins a run and an estimator label in a side's name."""


@dataclass(frozen=True)
class Side:
    """One side of a comparison, as the user wrote it and as it resolved."""

    spec: str
    """What the user wrote: ``RUN``, ``RUN:STAGE`` or ``RUN:LABEL``."""
    run_id: str
    stage: str | None = None
    """Stage name when the side is a stage of the run."""
    label: str | None = None
    """Estimator label when the side is one recomputation of the run."""
    split: str = TRAIN_SPLIT
    """The split whose trajectories the side covers: the run's measured split."""

    @property
    def name(self) -> str:
        """How sentences name the side: ``sao-r7``, ``sao-r7 (Q4)``, ``sao-r6 recomputed under gae_raw``
        (advantages recomputed from the run's rewards and values, not what it trained on), and
        ``evals (val split, Q4)`` for a run measured on a split other than training."""
        run = self.run_id if self.split == TRAIN_SPLIT else f"{self.run_id} ({self.split} split)"
        if self.label:
            return f"{run}{RECOMPUTED}{self.label}"
        if self.split != TRAIN_SPLIT:
            return f"{self.run_id} ({self.split} split{', ' + self.stage if self.stage else ''})"
        return f"{run} ({self.stage})" if self.stage else run


@dataclass(frozen=True)
class SideData:
    """The trajectories a side covers, their measures, and its per-step advantage statistics."""

    side: Side
    measures: pl.DataFrame
    """One row per trajectory: :func:`trajlens.classify.per_trajectory` columns plus
    ``reward`` and ``resolved``."""
    advantages: pl.DataFrame
    """``advantage_batches`` rows (one per step and estimator label) of the side's steps."""


def parse_side(store: Any, spec: str, stages: Any = "quartiles") -> Side:
    """Resolve ``spec`` against the store; a one-line error lists what ``RUN:X`` may name."""
    run_id, sep, part = spec.partition(":")
    store.require_runs([run_id])
    split = measured_split(store, run_id)
    if not sep:
        return Side(spec, run_id, split=split)
    if part in stage_names(store, run_id, stages, split):
        return Side(spec, run_id, stage=part, split=split)
    if part in side_labels(store, run_id):
        return Side(spec, run_id, label=part, split=split)
    declared = {name: (first, last) for name, first, last in stages} if not isinstance(stages, str) else {}
    if part in declared:
        first, last = declared[part]
        which = "training" if split == TRAIN_SPLIT else split
        raise ConfigError([f"side {spec!r}: stage {part!r} (steps {first}-{last}) holds no {which} step "
                           f"of run {run_id!r}"])
    raise ConfigError([
        f"side {spec!r}: {part!r} is neither a stage of run {run_id!r} "
        f"({', '.join(stage_names(store, run_id, stages, split)) or 'none'}) nor an estimator label "
        f"({', '.join(side_labels(store, run_id)) or 'none'})"
    ])


def stage_names(store: Any, run_id: str, stages: Any, split: str) -> list[str]:
    """The names of the run's stages that hold trajectories of ``split``, in order."""
    staged = _staged(store, run_id, stages, split)
    return staged.drop_nulls("stage").select("stage", "stage_index").unique().sort("stage_index")["stage"].to_list()


def _staged(store: Any, run_id: str, stages: Any, split: str) -> pl.DataFrame:
    from trajlens.classify import assign_stages

    trajectories = store.trajectories.filter((pl.col("run_id") == run_id) & (pl.col("split") == split)).select(
        "run_id", "trajectory_id", "step").collect()
    return assign_stages(trajectories, stages)


def report_labels(store: Any, run_id: str) -> list[str]:
    """The estimator labels the report recomputes for the run (the data allows them): what a
    comparison of two sides compares unless a side names its own, whatever else earlier
    commands stored."""
    from trajlens.run.choices import available_estimators

    return [choice.label for choice in available_estimators(store, run_id)]


def side_labels(store: Any, run_id: str) -> list[str]:
    """Every label a side ``RUN:LABEL`` may name: the report's, and those stored for the run."""
    labels = report_labels(store, run_id)
    if "advantage_batches" in store.tables():
        stored = store.sql("SELECT DISTINCT estimator FROM advantage_batches WHERE run_id = $run ORDER BY 1",
                           {"run": run_id})["estimator"].to_list()
        labels += [label for label in stored if label not in labels]
    return labels


def read_side(store: Any, side: Side, stages: Any = "quartiles", labels: list[str] | None = None) -> SideData:
    """Measures of the side's trajectories, and advantage statistics for the side's own label,
    else for ``labels`` (None: every label stored for the run). Runs not classified yet
    are classified (saving ``call_classes`` and ``trajectory_measures``), and advantages not
    recomputed yet are recomputed (saving ``advantage_batches``), so later comparisons reuse them."""
    staged = _staged(store, side.run_id, stages, side.split)
    if side.stage is not None:
        staged = staged.filter(pl.col("stage") == side.stage)
    measures = _measures(store, side.run_id, side.split).join(staged.select("trajectory_id"), on="trajectory_id", how="semi")
    steps = staged["step"].unique()
    wanted = [side.label] if side.label else labels
    advantages = _advantages(store, side.run_id, wanted)
    if advantages.height:
        advantages = advantages.filter(pl.col("step").is_in(steps.implode()))
    return SideData(side, measures, advantages)


def _measures(store: Any, run_id: str, split: str) -> pl.DataFrame:
    from trajlens.engine.classify import run_measures

    trajectories = store.trajectories.filter((pl.col("run_id") == run_id) & (pl.col("split") == split)).collect()
    measures = run_measures(store, run_id).join(trajectories.select("trajectory_id"), on="trajectory_id", how="semi")
    outcome = trajectories.select("trajectory_id", "reward", pl.col("resolved").cast(pl.Boolean))
    return measures.join(outcome, on="trajectory_id", how="inner")


def _advantages(store: Any, run_id: str, labels: list[str] | None) -> pl.DataFrame:
    """Stored ``advantage_batches`` rows of the run; labels not stored yet are recomputed and saved."""
    stored = pl.DataFrame()
    if "advantage_batches" in store.tables():
        stored = store.table("advantage_batches").filter(pl.col("run_id") == run_id).collect()
    if labels is None:
        return stored
    have = set(stored["estimator"].to_list()) if stored.height else set()
    missing = [label for label in labels if label not in have]
    if missing:
        from trajlens.run.choices import advantage_diagnostics, available_estimators

        from trajlens.run.advantages import save_advantage_batches

        choices = [c for c in available_estimators(store, run_id) if c.label in missing]
        if choices:
            computed = advantage_diagnostics(store, run_id, choices)
            # Kept in advantage_batches, as `trajlens advantages` keeps them, so the next comparison reuses them.
            save_advantage_batches(store, run_id, computed, keep_other_labels=True)
            stored = pl.concat([stored, computed], how="diagonal_relaxed")
    return stored.filter(pl.col("estimator").is_in(labels)) if stored.height else stored

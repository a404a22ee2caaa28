"""The watch list of a multi-reward run: each reward channel, step by step.

The multi-reward digest names what to watch per channel while training with several rewards:
its ``rel_gain`` (the signal a group baseline can see), the dynamic weight's moving average,
the std and the excess kurtosis of its group-normalised advantages, and how many responses it
dominates (the argmax over the stacked per-channel advantages). :func:`channel_watch` gives
them for every step of a run, one row per step and channel:

``mean``, ``std``, ``rel_gain``
    The channel's values over the step's trajectories; ``std`` and ``rel_gain`` are the checks'
    ``channel_std:`` and ``rel_gain:`` measures (:func:`trajlens.checks.step_measures.channel_stats`),
    so the watch, ``trajlens check``, the report and the saved queries give one number.
``advantage_std``, ``advantage_kurtosis``, ``dominant``
    Of the channel's own GRPO advantages, over the trajectories that have every channel
    (:func:`trajlens.estimators.channel_diagnostics`); ``dominant`` counts the trajectories whose
    largest per-channel advantage is this channel's, as attribution counts them.
``weight``
    The weight ``gdpo_dynamic`` (the digest's recipe: a softmax over the moving average of each
    channel's advantage std, bounded; default settings) gives the channel at that step, as the
    estimator computes it when it recomputes the run.

Pairs of channels that move together are listed at the steps where the shipped check
``reward_channels_collinear`` fires (:func:`collinear_steps`: the check's own measure,
condition, threshold and window), so the watch and ``trajlens check`` name the same steps.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import polars as pl

from trajlens.run.channels import channel_step_means, channel_values, complete_rows, rel_gain_quarters
from trajlens.run.quarters import quarters
from trajlens.run.splits import TRAIN_SPLIT
from trajlens.steps import steps_text

WATCH_SCHEMA: dict[str, Any] = {
    "step": pl.Int64, "channel": pl.String, "mean": pl.Float64, "std": pl.Float64, "rel_gain": pl.Float64,
    "advantage_std": pl.Float64, "advantage_kurtosis": pl.Float64, "dominant": pl.Int64,
    "weight": pl.Float64,
}
COLLINEAR_SCHEMA: dict[str, Any] = {"step": pl.Int64, "channel_a": pl.String, "channel_b": pl.String,
                                    "correlation": pl.Float64}


class ChannelWatch(NamedTuple):
    """The watch list of one run (see the module docstring)."""

    table: pl.DataFrame
    """One row per step and channel, columns :data:`WATCH_SCHEMA`, in step then channel order."""
    collinear: pl.DataFrame
    """The steps at which the channels are collinear, each with its pair (:func:`collinear_steps`,
    :data:`COLLINEAR_SCHEMA`)."""
    channels: tuple[str, ...]
    """The channels, in order of first appearance."""
    gains: pl.DataFrame = pl.DataFrame(schema={"step": pl.Int64, "group_id": pl.String, "channel": pl.String,
                                               "gain": pl.Float64})
    """Each channel's gain in each group of two or more (the terms of ``rel_gain``,
    :func:`trajlens.checks.step_measures.channel_gains`): a quarter's rel_gain is their mean."""
    steps: tuple[int, ...] = ()
    """The steps of the trajectories watched: its first and last quarters are theirs, as the stage
    table and the report cut them, whichever steps lack a channel value."""
    weight_problem: str = ""
    """Why there are no weights: what ``gdpo_dynamic`` says when it cannot run on the trajectories."""


def channel_watch(trajectories: pl.DataFrame) -> ChannelWatch:
    """The watch list of the trajectories of one run (one split): module docstring.

    Empty when the trajectories have fewer than two reward channels: the list watches how
    channels compete. Where no trajectory has a value of every channel, each channel's values
    (mean, std, rel_gain: what the checks judge) are still watched; its advantages and weights
    are not, and :attr:`ChannelWatch.weight_problem` says why.
    """
    long = channel_values(trajectories)
    wide, names = complete_rows(long)
    if len(names) < 2:
        return ChannelWatch(pl.DataFrame(schema=WATCH_SCHEMA), pl.DataFrame(schema=COLLINEAR_SCHEMA), tuple(names))
    values = _value_measures(long)
    advantages = _advantage_measures(wide, names)
    weights, weight_problem = _dynamic_weights(trajectories, names)
    table = (values.join(advantages, on=["step", "channel"], how="full", coalesce=True)
             .join(weights, on=["step", "channel"], how="left"))
    order = pl.col("channel").replace_strict({n: i for i, n in enumerate(names)}, return_dtype=pl.Int32)
    table = table.sort(pl.col("step"), order).select(
        [pl.col(name).cast(dtype) for name, dtype in WATCH_SCHEMA.items()])
    from trajlens.checks.step_measures import group_gains

    steps = tuple(trajectories.get_column("step").unique().sort().to_list())
    return ChannelWatch(table, collinear_steps(long), tuple(names), group_gains(long), steps, weight_problem)


def _value_measures(long: pl.DataFrame) -> pl.DataFrame:
    """mean of each channel per step, and the checks' channel_std: and rel_gain: measures."""
    from trajlens.checks.step_measures import channel_value_stats

    stats = channel_value_stats(long)  # the channel values read once; their collinearity is collinear_steps'
    measure = stats.select(
        "step",
        pl.col("measure").str.split_exact(":", 1).struct.field("field_0").alias("kind"),
        pl.col("measure").str.splitn(":", 2).struct.field("field_1").alias("channel"),
        (pl.col("x") / pl.col("n")).alias("value"),
    ).pivot(on="kind", index=["step", "channel"], values="value", aggregate_function="first")
    for kind in ("rel_gain", "channel_std"):
        if kind not in measure.columns:
            measure = measure.with_columns(pl.lit(None, dtype=pl.Float64).alias(kind))
    return channel_step_means(long).join(measure.rename({"channel_std": "std"}), on=["step", "channel"], how="left")


COLLINEAR_CHECK = "reward_channels_collinear"
"""The shipped check that says when two reward channels are collinear."""
LISTED_SPANS = 10
"""Spans of collinear steps a line of the watch lists before counting the rest."""


def collinear_steps(long: pl.DataFrame) -> pl.DataFrame:
    """The steps at which the shipped check :data:`COLLINEAR_CHECK` fires on the channel values
    ``long`` (:func:`channel_values`), by its own measure (``channel_collinearity``: a step's
    largest |r| of a pair), condition, threshold and window; each with the pair whose |r| is that
    step's largest, and the value the check judged there (the measure over its window)
    (:data:`COLLINEAR_SCHEMA`)."""
    from trajlens.checks.conditions import evaluate
    from trajlens.checks.spec import default_checks
    from trajlens.checks.step_measures import COLLINEARITY, channel_correlations, collinearity_stats, most_correlated

    check = next(c for c in default_checks() if c.name == COLLINEAR_CHECK)
    largest = most_correlated(channel_correlations(long))
    outcome = evaluate(check, COLLINEARITY, collinearity_stats(largest), proportion=False)
    if not outcome.fired_steps:
        return pl.DataFrame(schema=COLLINEAR_SCHEMA)
    judged = outcome.values.select("step", pl.col("value").alias("correlation"))
    return (largest.filter(pl.col("step").is_in(list(outcome.fired_steps))).join(judged, on="step", how="left")
            .select([pl.col(name).cast(dtype) for name, dtype in COLLINEAR_SCHEMA.items()]))


def _advantage_measures(wide: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """Per step: each channel's advantage std, kurtosis and dominant count."""
    import torch

    from trajlens.estimators.channels import channel_diagnostics

    rows: list[dict[str, Any]] = []
    for batch in wide.partition_by("step", maintain_order=True):
        step = int(batch["step"][0])
        if batch.height < 2:
            continue
        rewards = torch.tensor(batch.select(names).to_numpy(), dtype=torch.float64)  # a copy: the frame's array may be read-only
        found = channel_diagnostics(rewards, batch["group_id"].to_list(), names=names)
        for k, name in enumerate(names):
            rows.append({"step": step, "channel": name, "advantage_std": _number(found.advantage_std[k]),
                         "advantage_kurtosis": _number(found.advantage_kurtosis[k]),
                         "dominant": int(found.dominant_counts[k])})
    schema = {"step": pl.Int64, "channel": pl.String, "advantage_std": pl.Float64,
              "advantage_kurtosis": pl.Float64, "dominant": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


def _number(value: Any) -> float | None:
    number = float(value)
    return None if np.isnan(number) else number


def _dynamic_weights(trajectories: pl.DataFrame, names: list[str]) -> tuple[pl.DataFrame, str]:
    """Each step's channel weights as ``gdpo_dynamic`` (default settings) gives them over the
    trajectories: the estimator's own recomputation, its moving averages carried from step to
    step; and why there are none when it cannot run on them (a channel missing on a trajectory),
    as ``trajlens advantages -e gdpo_dynamic`` and the report say."""
    from trajlens.errors import TrajlensError
    from trajlens.estimators import EstimatorInputError
    from trajlens.run.advantages import RunFrames, recompute_run

    schema = {"step": pl.Int64, "channel": pl.String, "weight": pl.Float64}
    run_id = str(trajectories["run_id"][0])
    try:
        # The weights do not depend on how the fused advantage is normalised; over trajectories
        # it needs no token counts.
        recomputed = recompute_run(None, run_id, "gdpo_dynamic", frames=RunFrames(run_id, trajectories, None),
                                   channels=names, config={"batch_normalisation": "sequence"})
    except (EstimatorInputError, TrajlensError) as error:
        return pl.DataFrame(schema=schema), str(error).splitlines()[0]
    per_step = recomputed.group_by("step", maintain_order=True).agg(pl.col("channel_weights").first())
    rows = [{"step": step, "channel": name, "weight": weight}
            for step, weights in per_step.iter_rows() for name, weight in zip(names, weights)]
    return pl.DataFrame(rows, schema=schema), ""


def run_channel_watch(store: Any, run_id: str, split: str = TRAIN_SPLIT) -> ChannelWatch:
    """:func:`channel_watch` of a stored run's trajectories of ``split`` (its training split by default)."""
    from trajlens.run.partitions import scan_run_table
    from trajlens.run.splits import requested_split

    store.require_runs([run_id])
    requested_split(store, run_id, split)
    trajectories = (scan_run_table(store, run_id, "trajectories").filter(pl.col("split") == split)
                    .select("run_id", "step", "trajectory_id", "group_id", "split", "model_tokens", "reward",
                            "reward_channels").collect().sort("step", maintain_order=True))
    return channel_watch(trajectories)


def watch_lines(watch: ChannelWatch) -> list[str]:
    """One sentence per channel: its watched values in the first and the last quarter of the
    run's steps (:func:`trajlens.run.quarters.quarters`; rel_gain by :func:`rel_gain_quarters`),
    or at its one step, then the collinear pairs."""
    table = watch.table
    if table.is_empty():
        return []
    split = quarters(np.asarray(watch.steps) if watch.steps else table["step"].to_numpy())
    one_step = np.array_equal(split.first, split.last) and split.first.size == 1  # nothing to compare
    total = pl.col("dominant").sum().over("step")
    table = table.with_columns((pl.col("dominant") / pl.when(total > 0).then(total)).alias("dominant in"))
    lines = []
    for name in watch.channels:
        part = table.filter(pl.col("channel") == name)
        steps = part["step"].to_numpy()
        quartered = [("rel_gain", rel_gain_quarters(watch.gains, split, name), 2)] + [
            (label, split.means(steps, part[column].cast(pl.Float64).fill_null(float("nan")).to_numpy()), digits)
            for label, column, digits in (("weight", "weight", 2), ("advantage std", "advantage_std", 2),
                                          ("advantage kurtosis", "advantage_kurtosis", 1),
                                          ("dominant in", "dominant in", None))]
        words = []
        for label, (first, last), digits in quartered:
            if np.isnan(first) and np.isnan(last):
                continue
            words.append(f"{label} {_watch_number(first, digits)}" if one_step
                         else f"{label} {_watch_number(first, digits)} -> {_watch_number(last, digits)}")
        lines.append(f"{name}: " + ", ".join(words) + (" (the run's one step)" if one_step
                                                       else " (first -> last quarter of the steps)"))
    if watch.weight_problem:
        lines.append(f"no weights: gdpo_dynamic cannot run on these trajectories ({watch.weight_problem})")
    if table["dominant"].null_count() == table.height:
        lines.append("no advantages: no step has two trajectories with a value of every channel")
    if watch.collinear.height:
        pairs = watch.collinear.group_by("channel_a", "channel_b", maintain_order=True).agg(
            pl.col("step"), pl.col("correlation").max().alias("largest"))
        for a, b, steps_seen, largest in pairs.iter_rows():
            lines.append(f"channels {a} and {b} are collinear at {len(steps_seen)} of {table['step'].n_unique()} steps, "
                         f"{steps_text(steps_seen, LISTED_SPANS)} (|r| over the check's window up to {largest:.2f}, "
                         f"{COLLINEAR_CHECK}): "
                         "GDPO will not collapse but diversity suffers; consider dropping one")
    return lines


def _watch_number(value: float, digits: int | None) -> str:
    if np.isnan(value):
        return "n/a"
    return f"{value:.0%}" if digits is None else f"{value:.{digits}f}"

"""A run's reward channels as data: each trajectory's channel values, one row per channel
(:func:`channel_values`, the one reading of ``reward_channels`` the checks, attribution, the
report and the watch list share), the trajectories that have every channel, each channel's
step means and its rel_gain over the first and the last quarter of the steps. The watch list
of ``trajlens channels`` is :mod:`trajlens.checks.channels`.
"""

from __future__ import annotations

import polars as pl

from trajlens.run.quarters import QuarterMeans, Quarters

def channel_values(trajectories: pl.DataFrame, keep: tuple[str, ...] = ()) -> pl.DataFrame:
    """One row per trajectory and channel: ``step``, ``group_id``, ``trajectory_id``, the ``keep``
    columns, ``channel``, ``value`` (channels without a name left out), in the trajectories'
    order. The one reading of ``reward_channels`` the checks, attribution and the watch list share."""
    keys = ("step", "group_id", "trajectory_id", *keep)
    return (
        trajectories.select(*keys, "reward_channels")
        .explode("reward_channels").drop_nulls("reward_channels")
        .select(*keys, pl.col("reward_channels").struct.field("name").alias("channel"),
                pl.col("reward_channels").struct.field("value").cast(pl.Float64).alias("value"))
        .drop_nulls("channel")
    )


def complete_rows(long: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """The trajectories that have a value for every channel, one column per channel, in step
    order; and the channels, in order of first appearance."""
    names = long["channel"].unique(maintain_order=True).to_list()
    wide = long.pivot(on="channel", index=["step", "group_id", "trajectory_id"], values="value",
                      aggregate_function="first")
    return wide.drop_nulls().sort("step", maintain_order=True), names


def channel_step_means(long: pl.DataFrame) -> pl.DataFrame:
    """``step``, ``channel``, ``mean``: each channel's mean over each step's trajectories that have
    it (NaN values left out), from :func:`channel_values`; the step mean every surface takes (the
    watch list, attribution's channel collapse, the report's channel findings)."""
    return long.group_by("step", "channel", maintain_order=True).agg(pl.col("value").fill_nan(None).mean().alias("mean"))


def rel_gain_quarters(gains: pl.DataFrame, split: Quarters, channel: str) -> QuarterMeans:
    """``channel``'s rel_gain over the first and the last quarter of ``split``: the mean of its
    ``gains`` (:func:`trajlens.checks.step_measures.channel_gains`) over the quarter's groups,
    which is the checks' ``rel_gain:<channel>`` pooled over the quarter's steps (a step of
    three groups weighs three times a step of one). The watch list and the report's channel
    findings both say it."""
    part = gains.filter(pl.col("channel") == channel)
    return split.means(part["step"].to_numpy(), part["gain"].to_numpy())

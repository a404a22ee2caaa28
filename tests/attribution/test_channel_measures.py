"""Attribution's per-step channel measures count dominant channels as the estimators' channel
diagnostics do: one definition (the argmax over the stacked per-channel advantages)."""

from __future__ import annotations

import polars as pl
import torch

import trajlens
from trajlens.attribution.statistics import channel_measures
from trajlens.estimators import channel_diagnostics

RUN = "multireward"


def test_dominant_counts_are_those_of_the_channel_diagnostics(samples_store_path):
    trajectories = (trajlens.open(samples_store_path).trajectories
                    .filter((pl.col("run_id") == RUN) & (pl.col("split") == "train")).collect())
    measures = channel_measures(trajectories)
    names = [c.removeprefix("dominant:") for c in measures.columns if c.startswith("dominant:")]
    assert len(names) == 2
    checked = 0
    for step in (1, 150, 300):
        rows = trajectories.filter(pl.col("step") == step).sort("trajectory_id")
        values = {n: [next(c["value"] for c in channels if c["name"] == n) for channels in rows["reward_channels"]]
                  for n in names}
        rewards = torch.tensor([values[n] for n in names], dtype=torch.float64).T
        expected = channel_diagnostics(rewards, rows["group_id"].to_list(), names=names).dominant_counts.tolist()
        found = measures.filter(pl.col("step") == step).select(f"dominant:{n}" for n in names).row(0)
        assert list(found) == expected, step
        checked += sum(expected)
    assert checked > 0

"""Every "first quarter -> last quarter" the report, `trajlens channels` and attribution state is cut
over the run's steps, as the stage table beside it cuts them, whichever steps lack a value: a step
without rewards or without a group of two or more does not shift the quarters of one surface only."""

from __future__ import annotations

import re

import polars as pl
import pytest

import trajlens
from trajlens.synth.generate import generate

NO_REWARD_STEP = 2
SINGLETON_STEPS = (4, 13)
"""Steps whose trajectories each get a group of their own: no channel gain there."""


def _edit_step(run_dir, step: int, change: pl.Expr) -> None:
    (path,) = (run_dir / "trajectories" / f"step={step:06d}").glob("*.parquet")
    frame = pl.read_parquet(path)
    frame.with_columns(change).write_parquet(path)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    work = tmp_path_factory.mktemp("quarters")
    run_dir = work / "mr"
    generate("multireward", run_dir, steps=16, batch=16, tokens_per_trajectory=200, tool_calls_per_trajectory=6)
    _edit_step(run_dir, NO_REWARD_STEP, pl.lit(None, dtype=pl.Float64).alias("reward"))
    for step in SINGLETON_STEPS:
        _edit_step(run_dir, step, pl.col("trajectory_id").alias("group_id"))
    trajlens.ingest([run_dir], store=work / "store")
    store = trajlens.open(work / "store")
    from trajlens.report import classify_store

    classify_store(store)
    return store


def _run(store):
    (run_id,) = store.run_ids()
    return run_id


def _first_and_last_quarter(store) -> tuple[list[int], list[int]]:
    """Q1 and Q4 of the run's stage table (its training steps staged by quartiles)."""
    from trajlens.classify.stages import assign_stages

    steps = store.trajectories.filter(pl.col("split") == "train").select("run_id", "step").unique().collect()
    staged = assign_stages(steps).sort("step")
    return (staged.filter(pl.col("stage") == "Q1")["step"].to_list(),
            staged.filter(pl.col("stage") == "Q4")["step"].to_list())


def _gain_means(store, first, last) -> dict[str, tuple[float, float]]:
    from trajlens.checks.step_measures import channel_gains

    trajectories = store.trajectories.filter(pl.col("split") == "train").collect()
    gains = channel_gains(trajectories)
    return {channel: tuple(gains.filter((pl.col("channel") == channel) & pl.col("step").is_in(steps))["gain"].mean()
                           for steps in (first, last))
            for channel in gains["channel"].unique().to_list()}


def test_channel_findings_and_the_watch_list_cut_the_stage_table_s_quarters(store):
    from trajlens.report.scalars import channel_findings
    from trajlens.checks.channels import run_channel_watch, watch_lines

    first, last = _first_and_last_quarter(store)
    assert first == [1, 2, 3, 4] and last == [13, 14, 15, 16]
    expected = _gain_means(store, first, last)
    findings = {m.group(1): (float(m.group(2)), float(m.group(3))) for f in channel_findings(store, _run(store))
                if (m := re.match(r"reward channel (\w+): rel_gain ([\d.]+) in the first quarter -> ([\d.]+)", f))}
    watched = {m.group(1): (float(m.group(2)), float(m.group(3))) for line in watch_lines(run_channel_watch(store, _run(store)))
               if (m := re.match(r"(\w+): rel_gain ([\d.]+) -> ([\d.]+)", line))}
    assert watched.keys() == expected.keys() and findings  # a channel that barely moved is no finding
    for channel, (early, late) in expected.items():
        assert watched[channel] == (round(early, 2), round(late, 2)), channel
        if channel in findings:
            assert findings[channel] == watched[channel], channel


def test_the_reward_trend_is_the_mean_reward_of_the_stage_table_s_quarters(store):
    from trajlens.report.overview import run_trends

    first, last = _first_and_last_quarter(store)
    trajectories = store.trajectories.filter(pl.col("split") == "train").collect()
    means = [trajectories.filter(pl.col("step").is_in(steps))["reward"].drop_nulls().mean() for steps in (first, last)]
    measures = store.table("trajectory_measures").filter(pl.col("run_id") == _run(store)).collect()
    trend = run_trends(store, _run(store), measures, "train")[0]["reward"]
    assert trend.first == pytest.approx(means[0], rel=1e-12) and trend.last == pytest.approx(means[1], rel=1e-12)

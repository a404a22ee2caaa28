"""Identification read a batch of steps at a time gives what the whole-run identification gives."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from _tolerance import assert_close_ulp
from trajlens.estimators import recompute
from trajlens.estimators.identify import identify_advantages, identify_batches
from trajlens.estimators.registry import run_facts

STEPS, GROUPS, MEMBERS = 5, 6, 4


def logged_run(seed: int = 0, noise: float = 0.0) -> pl.DataFrame:
    """Training trajectories whose logged advantage is GRPO's (plus ``noise``), one group of
    ``MEMBERS`` per prompt."""
    rng = np.random.default_rng(seed)
    rows = [{"run_id": "r", "step": step, "trajectory_id": f"{step}-{group}-{member}", "group_id": f"{step}-{group}",
             "split": "train", "reward": float(rng.integers(0, 5)) / 4}
            for step in range(1, STEPS + 1) for group in range(GROUPS) for member in range(MEMBERS)]
    trajectories = pl.DataFrame(rows)
    advantage = recompute(trajectories, None, "grpo")["advantage"].to_numpy()
    advantage = advantage + noise * rng.standard_normal(advantage.size)
    return trajectories.with_columns(pl.Series("logged_advantage", advantage, dtype=pl.Float64))


def by_step(trajectories: pl.DataFrame):
    return [(part, None) for part in trajectories.partition_by("step", maintain_order=True)]


@pytest.mark.parametrize("noise", [0.0, 0.01])
def test_step_batches_give_the_whole_run_fits(noise):
    trajectories = logged_run(noise=noise)
    whole = identify_advantages(trajectories)
    streamed = identify_batches(by_step(trajectories), facts=run_facts(trajectories, None))
    assert streamed.best.candidate.label == whole.best.candidate.label
    assert streamed.matched == whole.matched and streamed.unit == whole.unit
    assert [f.candidate.label for f in streamed.candidates] == [f.candidate.label for f in whole.candidates]
    for a, b in zip(streamed.candidates, whole.candidates):
        assert (a.n, a.worst_step, a.worst_group, a.worst_trajectory, a.error) == \
            (b.n, b.worst_step, b.worst_group, b.worst_trajectory, b.error)
        if math.isfinite(b.max_abs_diff):
            assert_close_ulp([a.max_abs_diff, a.median_abs_diff], [b.max_abs_diff, b.median_abs_diff])
    assert streamed.steps.equals(whole.steps)
    assert streamed.departures.height == whole.departures.height
    if whole.departures.height:
        assert streamed.departures.sort("step", "group_id").equals(whole.departures.sort("step", "group_id"))
    assert (noise == 0.0) == streamed.matched


def test_beyond_the_exact_limit_the_median_comes_from_the_histogram(monkeypatch):
    import trajlens.estimators.identify as identify

    trajectories = logged_run(noise=0.05)
    exact = identify_batches(by_step(trajectories), facts=run_facts(trajectories, None))
    monkeypatch.setattr(identify, "EXACT_MEDIAN_VALUES", 10)
    binned = identify_batches(by_step(trajectories), facts=run_facts(trajectories, None))
    for a, b in zip(binned.candidates, exact.candidates):
        assert a.candidate.label == b.candidate.label and a.max_abs_diff == b.max_abs_diff
        if math.isfinite(b.median_abs_diff) and b.median_abs_diff > 0:
            # the upper median's bin midpoint: within 2^-9 of it, and np.median lies between the two middles
            values = np.sort(np.abs(trajectories["logged_advantage"].to_numpy() - recompute(
                trajectories, None, b.candidate.estimator, **dict(b.candidate.options))["advantage"].to_numpy()))
            upper = values[values.size // 2]
            assert abs(a.median_abs_diff - upper) <= upper * 2.0**-9

"""The extremes the step-wise diagnostics report are those of the advantages the whole-run
recomputation gives, at the values each estimator's statistics describe."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import trajlens
from _tolerance import assert_close_ulp
from engine_helpers import RUN_ID
from trajlens.estimators import EstimatorChoice, recompute
from trajlens.run.advantages import read_run
from trajlens.run.stepwise import batch_choice_diagnostics


@pytest.mark.parametrize("choice", [EstimatorChoice("raw", "gae", {"whiten": False}),
                                    EstimatorChoice("whitened", "gae", {"whiten": True}),
                                    EstimatorChoice("grpo", "grpo", {})])
def test_min_and_max_are_those_of_the_recomputed_advantages(engine_store, choice):
    frames = read_run(trajlens.open(engine_store), RUN_ID)
    trajectories = frames.trajectories.sort("step", maintain_order=True)
    errors: dict = {}
    parts = batch_choice_diagnostics(RUN_ID, trajectories, frames.tokens.to_arrow(), [choice], carry={},
                                     errors=errors, extremes=True)
    assert not errors
    found = pl.concat(parts).sort("step")
    recomputed = recompute(trajectories, frames.tokens if choice.estimator == "gae" else None, choice.estimator,
                           **choice.options)
    if choice.estimator == "gae":  # over model tokens
        values = recomputed.select("step", "trajectory_id", "token_advantages").join(
            frames.tokens.select("trajectory_id", "response_mask"), on="trajectory_id").explode(
            ["token_advantages", "response_mask"]).filter(pl.col("response_mask")).select(
            "step", pl.col("token_advantages").cast(pl.Float64).alias("value"))
    else:  # over trajectories
        values = recomputed.select("step", pl.col("advantage").cast(pl.Float64).alias("value"))
    expected = values.group_by("step").agg(pl.col("value").min().alias("min"), pl.col("value").max().alias("max")) \
        .sort("step")
    assert found["step"].to_list() == expected["step"].to_list()
    # float32 advantages from two kernels (the flat scan, the padded one): a few float32 ulp of the largest
    assert_close_ulp(found["min"].to_numpy().astype(np.float32), expected["min"].to_numpy().astype(np.float32), ulps=64)
    assert_close_ulp(found["max"].to_numpy().astype(np.float32), expected["max"].to_numpy().astype(np.float32), ulps=64)

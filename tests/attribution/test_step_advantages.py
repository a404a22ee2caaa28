"""The flat step kernels attribution uses agree with the reference paths they replace."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import torch

from trajlens.run.step_advantages import Shifted, align_tokens, flat_kernel, step_advantages
from trajlens.attribution.calls import per_token_weights
from trajlens.estimators import EstimatorChoice
from trajlens.estimators import AGGREGATION_MODES, aggregation_weights, recompute
from trajlens.estimators._compiled import AVAILABLE

RECS = (
    EstimatorChoice("gae_raw", "gae", {"gamma": 1.0, "lam": 1.0, "whiten": False}),
    EstimatorChoice("gae_lam", "gae", {"gamma": 0.99, "lam": 0.9, "whiten": True}),
    EstimatorChoice("reinforce", "reinforce", {"gamma": 0.98}),
    EstimatorChoice("reinforce_whitened", "reinforce", {"gamma": 1.0, "whiten": True}),
    EstimatorChoice("reinforce_pp", "reinforce_plus_plus", {"gamma": 0.98}),
    EstimatorChoice("reinforce_pp_reset", "reinforce_plus_plus", {"gamma": 0.97, "convention": "reset"}),
)


def _random_step(seed: int) -> tuple[pl.DataFrame, pa.Table]:
    rng = np.random.default_rng(seed)
    batch = 7
    lengths = rng.integers(3, 60, batch)
    ids = [f"t{i}" for i in range(batch)]
    masks, values, rewards = [], [], []
    for length in lengths:
        mask = rng.random(length) < 0.7
        mask[0] = True
        masks.append(mask.tolist())
        values.append(rng.normal(size=length).astype(np.float32).tolist())
        # rewards anywhere, observation tokens too: every convention must drop or keep them alike
        reward = np.where(rng.random(length) < 0.2, rng.normal(size=length), 0.0).astype(np.float32)
        reward[np.nonzero(mask)[0][-1]] = rng.normal()
        rewards.append(reward.tolist())
    trajectories = pl.DataFrame({"run_id": "r", "step": 3, "trajectory_id": ids, "group_id": ids,
                                 "reward": rng.normal(size=batch)})
    tokens = pa.table({"trajectory_id": ids[::-1], "response_mask": masks[::-1], "values": values[::-1],
                       "token_rewards": rewards[::-1]})  # stored in another order than the batch
    return trajectories, tokens


@pytest.mark.skipif(not AVAILABLE, reason="the flat kernels need numba")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_flat_step_advantages_equal_recompute_at_model_tokens(seed):
    trajectories, tokens = _random_step(seed)
    aligned = align_tokens(trajectories, tokens)
    assert aligned.column("trajectory_id").to_pylist() == trajectories["trajectory_id"].to_list()
    assert all(flat_kernel(rec) for rec in RECS)
    flat = step_advantages(trajectories, aligned, RECS, {})
    frame = pl.from_arrow(aligned).with_columns(pl.lit("r").alias("run_id"))
    mask = np.concatenate(frame["response_mask"].to_list())
    for rec, got in zip(RECS, flat):
        reference = recompute(trajectories, frame, rec.estimator, **rec.options)
        expected = np.concatenate(reference["token_advantages"].to_list())
        assert isinstance(got, Shifted) == (rec.estimator == "reinforce_plus_plus" or rec.options.get("whiten", False))
        got = (got.base - got.shift) * got.scale if isinstance(got, Shifted) else got
        assert got.shape == mask.shape
        np.testing.assert_allclose(got[mask], expected[mask], rtol=1e-5, atol=1e-5, err_msg=rec.label)


def test_a_batch_with_a_trajectory_lacking_tokens_is_not_aligned():
    trajectories, tokens = _random_step(0)
    assert align_tokens(trajectories, tokens.slice(1)) is None
    assert align_tokens(trajectories, None) is None


@pytest.mark.parametrize("seed", range(5))
def test_per_token_weights_equal_aggregation_weights(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 50, 6)
    max_length = int(lengths.max()) + int(rng.integers(0, 10))
    mask = torch.arange(int(lengths.max()))[None, :] < torch.from_numpy(lengths)[:, None]
    got = per_token_weights(lengths, max_length, AGGREGATION_MODES)
    for m, mode in enumerate(AGGREGATION_MODES):
        expected = aggregation_weights(mask, mode, max_length=max_length).per_token_weight.numpy()
        np.testing.assert_allclose(got[m], expected, rtol=1e-12, err_msg=mode)


def _renamed(seed: int, step: int) -> tuple[pl.DataFrame, pa.Table]:
    trajectories, tokens = _random_step(seed)
    ids = pa.array([f"s{step}-{i}" for i in tokens.column("trajectory_id").to_pylist()])
    trajectories = trajectories.with_columns(pl.lit(step).alias("step"), ("s" + pl.lit(str(step)) + "-" + pl.col("trajectory_id"))
                                             .alias("trajectory_id"))
    return trajectories, align_tokens(trajectories, tokens.set_column(0, "trajectory_id", ids))


@pytest.mark.skipif(not AVAILABLE, reason="the flat kernels need numba")
def test_scans_run_over_a_window_of_steps_give_each_step_its_own_advantages():
    from trajlens.run.step_advantages import window_scans

    steps = [_renamed(seed, step) for seed, step in ((0, 1), (1, 2), (2, 3))]
    cuts = window_scans([b for b, _ in steps], [t for _, t in steps], RECS)
    assert cuts is not None and len(cuts) == 3
    assert {key[0] for key in cuts[0]} == {"critic", "returns"}  # verl's reset returns go a step at a time
    for (batch, tokens), cut in zip(steps, cuts):
        alone = step_advantages(batch, tokens, RECS, {})
        shared = step_advantages(batch, tokens, RECS, {}, cut)
        for mine, theirs in zip(shared, alone):
            if isinstance(theirs, Shifted):
                assert np.array_equal(mine.base, theirs.base) and (mine.shift, mine.scale) == (theirs.shift, theirs.scale)
            else:
                assert np.array_equal(mine, theirs)


@pytest.mark.skipif(not AVAILABLE, reason="the flat kernels need numba")
def test_a_window_with_a_step_its_scan_refuses_goes_a_step_at_a_time():
    from trajlens.run.step_advantages import window_scans

    steps = [_renamed(seed, step) for seed, step in ((0, 1), (1, 2))]
    batch, tokens = steps[1]
    nulls = pa.array([None] * tokens.num_rows, tokens.schema.field("values").type)
    steps[1] = batch, tokens.set_column(tokens.column_names.index("values"), "values", nulls)
    assert window_scans([b for b, _ in steps], [t for _, t in steps], RECS) is None

"""recompute(): advantages from small handmade trajectories and tokens frames."""

from __future__ import annotations

import math

import polars as pl
import pytest
import torch
from polars.testing import assert_series_equal

from trajlens.estimators import (
    DynamicWeightConfig,
    EstimatorInputError,
    gdpo_dynamic,
    gdpo_trl,
    gdpo_verl,
    recompute,
)

CHANNEL = pl.Struct({"name": pl.String, "value": pl.Float64})


def _trajectories() -> pl.DataFrame:
    # group "a" exists at both steps: groups are per (step, group_id), so they must not merge
    return pl.DataFrame(
        {
            "run_id": ["r"] * 6,
            "step": [1, 1, 1, 2, 2, 2],
            "trajectory_id": ["t1", "t2", "t3", "t4", "t5", "t6"],
            "group_id": ["a", "a", "b", "a", "a", "a"],
            "task_id": ["x"] * 6,
            "reward": [1.0, 0.0, 0.5, 0.0, 0.0, 1.0],
            "reward_channels": [
                [{"name": "correct", "value": 1.0}, {"name": "format", "value": 1.0}],
                [{"name": "correct", "value": 0.0}],  # format missing: NaN
                [{"name": "correct", "value": 0.5}, {"name": "format", "value": 0.0}],
                [{"name": "correct", "value": 0.0}, {"name": "format", "value": 1.0}],
                [{"name": "correct", "value": 0.0}, {"name": "format", "value": 0.0}],
                [{"name": "correct", "value": 1.0}, {"name": "format", "value": 1.0}],
            ],
            "model_tokens": [3, 2, 1, 2, 2, 3],
        },
        schema_overrides={"reward_channels": pl.List(CHANNEL)},
    )


def _tokens() -> pl.DataFrame:
    f32 = pl.List(pl.Float32)
    return pl.DataFrame(
        {
            "run_id": ["r"] * 6,
            "step": [1, 1, 1, 2, 2, 2],
            "trajectory_id": ["t3", "t1", "t2", "t4", "t5", "t6"],  # any order: joined by id
            "response_mask": [
                [True],
                [True, True, False, True],
                [True, True],
                [True, True],
                [True, True],
                [True, False, True, True],
            ],
            "values": [[0.1], [0.5, 0.5, 0.0, 1.0], [0.2, 0.4], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0, 0.0, 0.0]],
            # t1 has no token rewards: its reward 1.0 goes on its last model token
            "token_rewards": [[0.5], None, [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0, 0.0, 1.0]],
            "log_probs": [None] * 6,
        },
        schema_overrides={"values": f32, "token_rewards": f32, "log_probs": f32},
    )


def test_grpo_per_step_and_group():
    out = recompute(_trajectories(), estimator="grpo")
    assert out["trajectory_id"].to_list() == ["t1", "t2", "t3", "t4", "t5", "t6"]
    # step 1, a: scores 1, 0: mean 0.5, std sqrt(0.5) -> +-0.5 / (sqrt(0.5) + 1e-6); b alone: 0.5 / (1 + 1e-6)
    # step 2, a: scores 0, 0, 1: mean 1/3, std sqrt(1/3) -> [-1/3, -1/3, 2/3] / (sqrt(1/3) + 1e-6)
    s1, s2 = math.sqrt(0.5) + 1e-6, math.sqrt(1 / 3) + 1e-6
    expected = [0.5 / s1, -0.5 / s1, 0.5 / (1 + 1e-6), -1 / 3 / s2, -1 / 3 / s2, 2 / 3 / s2]
    assert out["advantage"].to_list() == pytest.approx(expected, rel=1e-6)
    assert set(out["normalisation"]) == {"group_std"} and set(out["estimator"]) == {"grpo"}


def test_rloo_from_token_rewards():
    out = recompute(_trajectories(), _tokens(), "rloo", score="token_rewards")
    # step 2, a: token sums 0, 0, 1 -> 0 - 1/2, 0 - 1/2, 1 - 0
    assert out.filter(pl.col("step") == 2)["advantage"].to_list() == pytest.approx([-0.5, -0.5, 1.0])
    # step 1, a: t1 has no token rewards, so its reward 1.0 stands in; t2 sums to 0 -> +1, -1
    assert out.filter(pl.col("step") == 1)["advantage"].to_list()[:2] == pytest.approx([1.0, -1.0])


def test_gae_by_hand_without_whitening():
    out = recompute(_trajectories(), _tokens(), "gae", gamma=1.0, lam=1.0, whiten=False)
    t1 = out.row(by_predicate=pl.col("trajectory_id") == "t1", named=True)
    # t1: model tokens 0, 1, 3 with V 0.5, 0.5, 1.0 and the reward 1.0 on token 3:
    # A_3 = 1 - 1.0 = 0;  A_1 = 0 + 1.0 - 0.5 + 0 = 0.5;  A_0 = 0 + 0.5 - 0.5 + 0.5 = 0.5; token 2 carries A_3
    assert t1["token_advantages"] == pytest.approx([0.5, 0.5, 0.0, 0.0])
    assert t1["token_returns"] == pytest.approx([1.0, 1.0, 0.0, 1.0])  # A + V
    assert t1["advantage"] == pytest.approx(1 / 3)  # mean over the 3 model tokens
    assert (t1["advantage_first"], t1["advantage_last"]) == pytest.approx((0.5, 0.0))
    t2 = out.row(by_predicate=pl.col("trajectory_id") == "t2", named=True)
    # t2: A_1 = 0 - 0.4 = -0.4;  A_0 = 0 + 0.4 - 0.2 - 0.4 = -0.2
    assert t2["token_advantages"] == pytest.approx([-0.2, -0.4])
    assert out.row(by_predicate=pl.col("trajectory_id") == "t3", named=True)["advantage"] == pytest.approx(0.4)
    assert set(out["normalisation"]) == {"none"}


def test_gae_whitens_per_step_over_model_tokens():
    out = recompute(_trajectories(), _tokens(), "gae", gamma=1.0, lam=1.0)
    # step 1 model-token advantages: t1 0.5, 0.5, 0;  t2 -0.2, -0.4;  t3 0.4
    raw = [0.5, 0.5, 0.0, -0.2, -0.4, 0.4]
    mean = sum(raw) / 6
    sd = math.sqrt(sum((x - mean) ** 2 for x in raw) / 5 + 1e-8)
    t1 = out.row(by_predicate=pl.col("trajectory_id") == "t1", named=True)
    # every position is whitened, the observation token (raw 0) too
    assert t1["token_advantages"] == pytest.approx([(x - mean) / sd for x in (0.5, 0.5, 0.0, 0.0)], rel=1e-5)
    assert t1["token_returns"] == pytest.approx([1.0, 1.0, 0.0, 1.0])  # built before whitening
    assert set(out["normalisation"]) == {"batch_whiten"}


def test_reinforce():
    out = recompute(_trajectories(), _tokens(), "reinforce", gamma=0.5)
    t6 = out.row(by_predicate=pl.col("trajectory_id") == "t6", named=True)
    # t6: reward 1 on token 3; G_2 = 0.5, G_0 = 0.25; token 1 is tool output and carries G_2
    assert t6["token_advantages"] == pytest.approx([0.25, 0.5, 0.5, 1.0])


def test_gdpo_trl_matches_the_tensor_function_per_step():
    out = recompute(_trajectories(), estimator="gdpo_trl", weights={"correct": 2.0, "format": 1.0})
    nan = float("nan")
    step1 = gdpo_trl(torch.tensor([[1.0, 1.0], [0.0, nan], [0.5, 0.0]]), ["a", "a", "b"], weights=[2.0, 1.0])
    assert out["advantage"][:3].to_list() == pytest.approx(step1.sequence_advantages.tolist())


def test_gdpo_verl_uses_model_token_counts_without_tokens():
    trajectories = _trajectories().filter(pl.col("trajectory_id") != "t2")  # verl refuses missing channels
    out = recompute(trajectories, estimator="gdpo_verl")
    counts = torch.tensor([3, 1])
    mask = torch.arange(3)[None, :] < counts[:, None]
    step1 = gdpo_verl(torch.tensor([[1.0, 1.0], [0.5, 0.0]]), mask, ["a", "b"])
    assert out["advantage"][:2].to_list() == pytest.approx(step1.sequence_advantages.tolist())


def test_gdpo_dynamic_carries_its_ema_from_step_to_step():
    config = DynamicWeightConfig(batch_normalisation="sequence")
    trajectories = _trajectories().filter(pl.col("trajectory_id") != "t2")
    out = recompute(trajectories, estimator="gdpo_dynamic", config=config)
    first = gdpo_dynamic(torch.tensor([[1.0, 1.0], [0.5, 0.0]]), ["a", "b"], config=config)
    second = gdpo_dynamic(
        torch.tensor([[0.0, 1.0], [0.0, 0.0], [1.0, 1.0]]), ["a", "a", "a"], previous_ema=first.weights.ema_std, config=config
    )
    assert out["advantage"][2:].to_list() == pytest.approx(second.sequence_advantages.tolist())
    assert out["channel_weights"][2].to_list() == pytest.approx(second.weights.weights.tolist())


def test_input_order_is_kept():
    shuffled = _trajectories().reverse()
    out = recompute(shuffled, estimator="dr_grpo")
    assert_series_equal(out["trajectory_id"], shuffled["trajectory_id"])


def test_errors_name_what_is_missing():
    with pytest.raises(EstimatorInputError, match="needs the tokens frame"):
        recompute(_trajectories(), estimator="gae")
    with pytest.raises(EstimatorInputError, match="trajectory 't1' \\(run 'r'\\) has no row in tokens"):
        recompute(_trajectories(), _tokens().filter(pl.col("trajectory_id") != "t1"), "gae")
    with pytest.raises(EstimatorInputError, match="trajectory 't1' of run 'r' has more than one row in tokens"):
        recompute(_trajectories(), pl.concat([_tokens(), _tokens().filter(pl.col("trajectory_id") == "t1")]), "gae")
    with pytest.raises(EstimatorInputError, match="trajectory 't2' has no reward"):
        no_reward = pl.when(pl.col("trajectory_id") == "t2").then(None).otherwise(pl.col("reward")).alias("reward")
        recompute(_trajectories().with_columns(no_reward), estimator="grpo")
    with pytest.raises(EstimatorInputError, match="estimator must be one of"):
        recompute(_trajectories(), estimator="ppo")
    with pytest.raises(EstimatorInputError, match="channel\\(s\\) style appear in no trajectory"):
        recompute(_trajectories(), estimator="gdpo_trl", channels=["correct", "style"])


def test_a_recomputer_gives_each_estimator_what_it_alone_gives():
    """Estimators recomputed on one Recomputer share each step's groups and scores: every result
    is the one a fresh recomputation of that estimator alone gives, whatever ran before it."""
    from trajlens.estimators.adapters import Recomputer

    trajectories = _trajectories()
    names = ["grpo", "rloo", "dr_grpo", "grpo_batch_std", "gdpo_trl", "sum_then_normalize",
             "reinforce_plus_plus_baseline", "opo", "gpg"]
    shared = Recomputer(trajectories, _tokens())
    for name in [*names, *reversed(names)]:
        alone = recompute(trajectories, _tokens(), name)
        assert shared.recompute(name).equals(alone), name
    trl = {"convention": "trl"}  # TRL's conventions score an unscorable completion: another set of scores
    assert shared.recompute("grpo", **trl).equals(recompute(trajectories, _tokens(), "grpo", **trl))

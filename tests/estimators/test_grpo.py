"""GRPO, Dr.GRPO, batch-std GRPO and RLOO: hand cases, references, group invariants."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
import torch
from _tolerance import assert_close_ulp
from trajlens.estimators.reference.trl import trl_sum_then_normalize
from trajlens.estimators.reference.verl import grpo_loop, rloo_loop
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from trajlens.estimators import EstimatorInputError, dr_grpo, grpo, grpo_batch_std, rloo

# Six trajectories in three non-contiguous groups; the score sits on the last token.
GROUPS = ["p", "q", "p", "q", "p", "r"]
SCORES = [1.0, 2.0, 0.0, 2.0, 0.0, 3.0]  # p: 1, 0, 0   q: 2, 2 (equal)   r: 3 (alone)


def _batch(scores=SCORES, length=3):
    rewards = torch.zeros(len(scores), length)
    rewards[:, -1] = torch.tensor(scores)
    return rewards, torch.ones(len(scores), length, dtype=torch.bool)


def test_grpo_by_hand():
    rewards, mask = _batch()
    result = grpo(rewards, mask, GROUPS)
    # p: mean 1/3, unbiased std sqrt(((2/3)^2 + 2 (1/3)^2) / 2) = sqrt(1/3) = 0.57735
    #    A = (1 - 1/3) / (0.57735 + 1e-6), (0 - 1/3) / (0.57735 + 1e-6)
    # q: equal rewards, std 0: A = 0 / (0 + 1e-6) = 0
    # r: alone, mean 0 and std 1 (verl): A = 3 / (1 + 1e-6)
    s = math.sqrt(1 / 3) + 1e-6
    expected = torch.tensor([(2 / 3) / s, 0.0, (-1 / 3) / s, 0.0, (-1 / 3) / s, 3 / (1 + 1e-6)])
    assert_close(result.sequence_advantages, expected)
    assert_close(result.advantages, expected[:, None].expand(6, 3))
    assert_close(result.scores, torch.tensor(SCORES))
    assert result.normalisation == "group_std"


def test_grpo_group_of_one_can_be_zero():
    rewards, mask = _batch()
    assert float(grpo(rewards, mask, GROUPS, singleton="zero").sequence_advantages[5]) == 0.0


def test_dr_grpo_by_hand():
    rewards, mask = _batch()
    # A = score - group mean: p: 2/3, -1/3, -1/3   q: 0, 0   r: 3 - 0 (verl: mean 0 alone)
    expected = torch.tensor([2 / 3, 0.0, -1 / 3, 0.0, -1 / 3, 3.0])
    assert_close(dr_grpo(rewards, mask, GROUPS).sequence_advantages, expected)


def test_rloo_by_hand():
    rewards, mask = _batch()
    # A = score - mean of the others: p: 1 - 0, 0 - (1 + 0)/2, 0 - (1 + 0)/2   q: 0, 0   r: raw 3
    expected = torch.tensor([1.0, 0.0, -0.5, 0.0, -0.5, 3.0])
    assert_close(rloo(rewards, mask, GROUPS).sequence_advantages, expected)
    assert float(rloo(rewards, mask, GROUPS, singleton="zero").sequence_advantages[5]) == 0.0


def test_rloo_clamps_scores_to_trls_reward_clip_range_before_the_leave_one_out():
    """TRL ``RLOOTrainer``: ``rewards.clamp(min=range[0], max=range[1])``, then the leave-one-out."""
    scores = torch.tensor([3.0, -1.0, 0.5, 2.0])
    mask = torch.ones(4, 1, dtype=torch.bool)
    # clamped to [-0.5, 1]: 1, -0.5, 0.5, 1 (sum 2); A_i = r_i - (2 - r_i) / 3
    expected = torch.tensor([1 - 1 / 3, -0.5 - 2.5 / 3, 0.5 - 1.5 / 3, 1 - 1 / 3])
    found = rloo(scores[:, None], mask, [0] * 4, convention="trl", reward_clip_range=[-0.5, 1.0]).sequence_advantages
    assert_close(found, expected)
    assert not torch.allclose(rloo(scores[:, None], mask, [0] * 4, convention="trl").sequence_advantages, expected)
    with pytest.raises(EstimatorInputError, match="reward_clip_range is TRL's option"):
        rloo(scores[:, None], mask, [0] * 4, reward_clip_range=[-0.5, 1.0])
    with pytest.raises(EstimatorInputError, match="two finite numbers, low then high"):
        rloo(scores[:, None], mask, [0] * 4, convention="trl", reward_clip_range=[1.0, -0.5])


def test_batch_std_by_hand():
    rewards, mask = _batch()
    # group means p 1/3, q 2, r 3 (TRL: a group of one is its own mean)
    # batch: mean 8/6, unbiased std sqrt(sum((s - 4/3)^2) / 5) = sqrt(7.3333 / 5) = 1.21106
    batch_std = math.sqrt(sum((s - 8 / 6) ** 2 for s in SCORES) / 5) + 1e-4
    expected = torch.tensor([(2 / 3) / batch_std, 0.0, (-1 / 3) / batch_std, 0.0, (-1 / 3) / batch_std, 0.0])
    assert_close(grpo_batch_std(rewards, mask, GROUPS).sequence_advantages, expected)


def test_rewards_on_masked_tokens_are_summed_like_verl_or_dropped_on_request():
    rewards = torch.tensor([[0.0, 5.0, 1.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[True, False, True], [True, True, True]])
    groups = [0, 0]
    # keep (verl sums every position): scores 6, 0 -> Dr.GRPO +3, -3
    assert_close(dr_grpo(rewards, mask, groups).sequence_advantages, torch.tensor([3.0, -3.0]))
    # drop: scores 1, 0 -> +0.5, -0.5
    assert_close(dr_grpo(rewards, mask, groups, masked_rewards="drop").sequence_advantages, torch.tensor([0.5, -0.5]))
    # the advantage is written on model tokens only
    assert_close(dr_grpo(rewards, mask, groups).advantages, torch.tensor([[3.0, 0.0, 3.0], [-3.0, -3.0, -3.0]]))


def test_equal_rewards_give_zero_when_exactly_representable():
    rewards, mask = _batch([0.5] * 4)
    assert torch.equal(grpo(rewards, mask, [0] * 4).sequence_advantages, torch.zeros(4))


def test_equal_rewards_reproduce_verls_float32_rounding():
    # 8 x 0.1 in float32: torch.mean is 1 ulp off 0.1, torch.std ~8e-9, so verl's advantage is
    # about -7.45e-9 / (7.97e-9 + 1e-6) = -0.0074, not 0. The recomputation reproduces that rounding:
    # a few ulp of -0.0074 (an exact mean would give 0).
    rewards, mask = _batch([0.1] * 8)
    ours = grpo(rewards, mask, [0] * 8).advantages
    assert_close_ulp(ours, grpo_loop(rewards.clone(), mask, [0] * 8))


def test_verl_loops_to_rounding():
    torch.manual_seed(0)
    rewards = torch.randn(40, 6)
    mask = torch.rand(40, 6) > 0.2
    mask[:, 0] = True
    ids = [int(i) for i in torch.randint(0, 9, (40,))]
    assert_close_ulp(grpo(rewards, mask, ids).advantages, grpo_loop(rewards.clone(), mask, ids))
    assert_close_ulp(
        dr_grpo(rewards, mask, ids).advantages, grpo_loop(rewards.clone(), mask, ids, norm_adv_by_std_in_grpo=False)
    )
    assert_close_ulp(rloo(rewards, mask, ids).advantages, rloo_loop(rewards.clone(), mask, ids))


def test_batch_std_is_trl_to_rounding():
    torch.manual_seed(1)
    scores = torch.rand(24)
    rewards = torch.zeros(24, 2)
    rewards[:, 1] = scores
    mask = torch.ones(24, 2, dtype=torch.bool)
    ids = [i // 4 for i in range(24)]
    expected = trl_sum_then_normalize(scores[:, None], 4, torch.ones(1), scale_rewards="batch")
    assert_close_ulp(grpo_batch_std(rewards, mask, ids).sequence_advantages, expected)


def test_group_ids_from_strings_numpy_polars_and_tensors_agree():
    rewards, mask = _batch()
    expected = grpo(rewards, mask, GROUPS).advantages
    codes = torch.tensor([7, 3, 7, 3, 7, -1])
    for ids in (np.array(GROUPS), pl.Series(GROUPS), tuple(GROUPS), codes):
        assert torch.equal(grpo(rewards, mask, ids).advantages, expected)


@settings(max_examples=50, deadline=None)
@given(
    sizes=st.lists(st.integers(2, 6), min_size=1, max_size=6),
    seed=st.integers(0, 2**16),
    discrete=st.booleans(),
)
def test_group_advantages_sum_to_zero(sizes, seed, discrete):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    ids = ids[torch.randperm(ids.numel(), generator=generator)]  # groups need not be contiguous
    batch = ids.numel()
    rewards = torch.zeros(batch, 4, dtype=torch.float64)
    scores = torch.randint(0, 2, (batch,), generator=generator) if discrete else torch.randn(batch, generator=generator)
    rewards[:, -1] = scores.double()
    mask = torch.ones(batch, 4, dtype=torch.bool)
    for estimator in (grpo, dr_grpo, rloo):
        sequence = estimator(rewards, mask, ids).sequence_advantages
        per_group = torch.zeros(len(sizes), dtype=torch.float64).index_add_(0, ids, sequence)
        assert_close(per_group, torch.zeros_like(per_group), atol=1e-9, rtol=0)


def test_a_dead_group_of_equal_float32_rewards_can_share_an_advantage_far_from_zero():
    """The report's dead-groups caption: eight rewards of 5/3 average to 5/3 plus a rounding step
    in float32, and dividing by their std (1.3e-7) plus eps (1e-6) makes that -0.106 for each, as
    verl's own loop computes it; eight of 4/3 get +0.106. In float64 both are 0."""
    for score, expected in ((5 / 3, -0.10573), (4 / 3, 0.10573)):
        rewards, mask = _batch([score] * 8)
        result = grpo(rewards, mask, [0] * 8)
        loop = grpo_loop(rewards, mask, [0] * 8, epsilon=1e-6)
        assert result.advantages[:, -1].tolist() == pytest.approx([expected] * 8, abs=1e-4)
        assert_close(result.advantages, loop, rtol=0, atol=1e-6)
        exact = grpo(rewards.double(), mask, [0] * 8)
        assert exact.advantages.abs().max().item() == 0.0

"""GDPO in verl's and TRL's conventions, and the collapse of sum-then-normalise."""

from __future__ import annotations

import math

import pytest
import torch
from _tolerance import assert_close_ulp
from trajlens.estimators.reference.trl import gdpo_trl_loop, trl_sum_then_normalize
from trajlens.estimators.reference.verl import gdpo_verl_loop
from torch.testing import assert_close

from trajlens.estimators import EstimatorInputError, gdpo_trl, gdpo_verl, sum_then_normalize

# (correct, format) for two groups of two, the GDPO paper's picture:
# group 0: (0, 1) vs (0, 0)  the better rollout gets format only
# group 1: (1, 1) vs (0, 0)  the better rollout gets both
CHANNELS = torch.tensor([[0.0, 1.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
GROUPS = ["g0", "g0", "g1", "g1"]
MASK = torch.ones(4, 2, dtype=torch.bool)


def test_sum_then_normalize_collapses_distinct_reward_combinations():
    # sums: group 0 -> 1, 0; group 1 -> 2, 0. Group normalisation erases the difference:
    # group 0: +-0.5 / (sqrt(0.5) + 1e-4);  group 1: +-1 / (sqrt(2) + 1e-4)  (TRL)
    result = sum_then_normalize(CHANNELS, GROUPS)
    a0 = 0.5 / (math.sqrt(0.5) + 1e-4)
    a1 = 1.0 / (math.sqrt(2.0) + 1e-4)
    assert_close(result.sequence_advantages, torch.tensor([a0, -a0, a1, -a1]))
    assert abs(a0 - a1) < 1e-4  # (1, 1) is rewarded no more than (0, 1): the collapse
    verl = sum_then_normalize(CHANNELS, GROUPS, convention="verl").sequence_advantages
    assert_close(verl, torch.tensor([0.5, -0.5, 1.0, -1.0]) / torch.tensor([0.5**0.5, 0.5**0.5, 2**0.5, 2**0.5]).add(1e-6))


def test_gdpo_verl_by_hand_keeps_the_distinction():
    result = gdpo_verl(CHANNELS, MASK, GROUPS)
    # per channel, a group of two with values 1, 0: mean 0.5, unbiased std sqrt(0.5):
    # A = +-a, a = 0.5 / (sqrt(0.5) + 1e-6); a group with equal values gives 0.
    a = 0.5 / (math.sqrt(0.5) + 1e-6)
    assert_close(result.channel_advantages, torch.tensor([[0.0, a], [0.0, -a], [a, a], [-a, -a]]))
    # fused F = A^correct + A^format: [a, -a, 2a, -2a]
    assert_close(result.fused, torch.tensor([a, -a, 2 * a, -2 * a]))
    # token whitening over 8 tokens (2 per row): mean 0, var = (4 a^2 + 16 a^2) / 8 * 8/7 = 20 a^2 / 7
    scale = math.sqrt(20 * a * a / 7 + 1e-8)
    expected = torch.tensor([a, -a, 2 * a, -2 * a]) / scale  # = sqrt(7/20) * [1, -1, 2, -2]
    assert_close(result.sequence_advantages, expected)
    assert_close(result.advantages, expected[:, None].expand(4, 2))
    assert result.normalisation == "group_per_channel+token_whiten"


def test_gdpo_verl_whitening_weighs_long_trajectories_more():
    mask = torch.tensor([[True] * 4, [True, False, False, False], [True] * 4, [True, False, False, False]])
    result = gdpo_verl(CHANNELS, mask, GROUPS)
    a = 0.5 / (math.sqrt(0.5) + 1e-6)
    fused = torch.tensor([a, -a, 2 * a, -2 * a], dtype=torch.float64)
    counts = torch.tensor([4.0, 1.0, 4.0, 1.0], dtype=torch.float64)
    n = float(counts.sum())  # 10 model tokens
    mean = float((fused * counts).sum()) / n
    var = float((((fused - mean) ** 2) * counts).sum()) / n * n / (n - 1)
    expected = (fused - mean) / math.sqrt(var + 1e-8)
    assert_close(result.sequence_advantages.double(), expected, atol=1e-6, rtol=1e-6)


def test_gdpo_trl_by_hand():
    result = gdpo_trl(CHANNELS, GROUPS)
    # group z-score with eps 1e-4; equal values: std 0 -> (0 - 0) / 1e-4 = 0
    b = 0.5 / (math.sqrt(0.5) + 1e-4)
    assert_close(result.fused, torch.tensor([b, -b, 2 * b, -2 * b]))
    # sequence z-score: mean 0, unbiased std = b sqrt((1 + 1 + 4 + 4) / 3)
    expected = torch.tensor([b, -b, 2 * b, -2 * b]) / (b * math.sqrt(10 / 3) + 1e-4)
    assert_close(result.sequence_advantages, expected)
    assert result.advantages is None
    assert_close(gdpo_trl(CHANNELS, GROUPS, response_mask=MASK).advantages, expected[:, None].expand(4, 2))


def test_gdpo_trl_skips_nan_channel_values():
    nan = float("nan")
    channels = torch.tensor([[1.0, nan], [0.0, 1.0], [0.5, 0.0]])
    result = gdpo_trl(channels, [0, 0, 0])
    # correct: mean 0.5, nanstd sqrt((0.25 + 0.25 + 0) / 3 * 3/2) = 0.5 -> A = [0.5, -0.5, 0] / 0.5001
    # format: values (1, 0) only: mean 0.5, nanstd sqrt((0.25 + 0.25) / 2 * 2/1) = sqrt(0.5)
    #         A = [nan, 0.5, -0.5] / (sqrt(0.5) + 1e-4); nansum skips the nan
    c = 0.5 / 0.5001
    f = 0.5 / (math.sqrt(0.5) + 1e-4)
    fused = [c, -c + f, -f]
    assert_close(result.fused, torch.tensor(fused))
    mean = sum(fused) / 3
    std = math.sqrt(sum((x - mean) ** 2 for x in fused) / 2)
    assert_close(result.sequence_advantages, torch.tensor([(x - mean) / (std + 1e-4) for x in fused]))
    assert math.isnan(float(result.channel_advantages[0, 1]))


def test_gdpo_trl_a_lone_value_in_a_channel_contributes_nothing():
    nan = float("nan")
    channels = torch.tensor([[1.0, 3.0], [0.0, nan]])
    # format has one value in the group: nanstd is nan, so its advantage is nan and nansum drops it
    result = gdpo_trl(channels, [0, 0])
    d = 0.5 / (math.sqrt(0.5) + 1e-4)
    assert_close(result.fused, torch.tensor([d, -d]))


def test_gdpo_verl_refuses_nan():
    channels = torch.tensor([[1.0, float("nan")], [0.0, 1.0]])
    message = r"gdpo_verl: channel_rewards of shape \(2, 2\) is NaN at trajectory 0, channel 1"
    with pytest.raises(EstimatorInputError, match=message):
        gdpo_verl(channels, torch.ones(2, 3, dtype=torch.bool), [0, 0])


def test_weights_scale_each_channel():
    weighted = gdpo_trl(CHANNELS, GROUPS, weights=[2.0, 0.0])
    b = 0.5 / (math.sqrt(0.5) + 1e-4)
    assert_close(weighted.fused, torch.tensor([0.0, 0.0, 2 * b, -2 * b]))
    with pytest.raises(EstimatorInputError, match="weights must have one entry per channel"):
        gdpo_trl(CHANNELS, GROUPS, weights=[1.0])
    with pytest.raises(EstimatorInputError, match="gdpo_trl: weights are all zero"):
        gdpo_trl(CHANNELS, GROUPS, weights=[0.0, 0.0])


def test_the_reference_trainers_to_rounding():
    torch.manual_seed(0)
    channels = torch.randint(0, 3, (32, 3)).float() / 2
    mask = torch.rand(32, 7) > 0.3
    mask[:, 0] = True
    ids = [i // 4 for i in range(32)]  # contiguous groups of 4, as TRL requires
    weights = torch.tensor([1.0, 0.5, 2.0])
    assert_close_ulp(gdpo_verl(channels, mask, ids, weights).advantages, gdpo_verl_loop(channels, mask, ids, weights))
    with_nan = channels.clone()
    with_nan[torch.rand(32, 3) < 0.15] = float("nan")
    assert_close_ulp(gdpo_trl(with_nan, ids, weights, convention="trl-1.5").sequence_advantages,
                     gdpo_trl_loop(with_nan, 4, weights))
    for scale in ("group", "batch"):
        assert_close_ulp(
            sum_then_normalize(with_nan, ids, weights, convention="trl-1.5", scale_rewards=scale).sequence_advantages,
            trl_sum_then_normalize(with_nan, 4, weights, scale),
        )


@pytest.mark.parametrize("seed", range(5))
def test_trl_v16_unscorable_completions_to_rounding(seed):
    from trajlens.estimators.reference.trl import gdpo_trl_loop_v16, trl_sum_then_normalize_v16

    generator = torch.Generator().manual_seed(seed)
    channels = torch.randint(0, 3, (24, 3), generator=generator).float() / 2
    channels[torch.rand(24, 3, generator=generator) < 0.2] = float("nan")
    channels[[1, 7, 8]] = float("nan")  # unscorable: every reward function returned None
    ids = [i // 4 for i in range(24)]
    weights = torch.tensor([1.0, 0.5, 2.0])
    trl = gdpo_trl(channels, ids, weights).sequence_advantages
    assert_close_ulp(trl, gdpo_trl_loop_v16(channels, 4, weights))
    assert torch.all(trl[[1, 7, 8]] == 0)
    for scale in ("group", "batch", "none"):
        mine = sum_then_normalize(channels, ids, weights, scale_rewards=scale).sequence_advantages
        assert_close_ulp(mine, trl_sum_then_normalize_v16(channels, 4, weights, scale), msg=scale)
    # before v1.6 an unscorable completion summed to 0 and counted in its group
    earlier = sum_then_normalize(channels, ids, weights, convention="trl-1.5").sequence_advantages
    assert float((earlier - sum_then_normalize(channels, ids, weights).sequence_advantages).abs().max()) > 1e-3


def test_non_contiguous_groups_give_the_same_advantages_as_contiguous_ones():
    torch.manual_seed(1)
    channels = torch.rand(12, 2)
    ids = torch.tensor([i // 3 for i in range(12)])
    order = torch.randperm(12)
    straight = gdpo_trl(channels, ids).sequence_advantages
    shuffled = gdpo_trl(channels[order], ids[order]).sequence_advantages
    assert_close(shuffled, straight[order])


def test_gdpo_verl_without_std_division():
    result = gdpo_verl(CHANNELS, MASK, GROUPS, divide_by_std=False)
    # Dr.GRPO per channel: value - group mean = +-0.5 where the group differs
    assert_close(result.channel_advantages, torch.tensor([[0.0, 0.5], [0.0, -0.5], [0.5, 0.5], [-0.5, -0.5]]))


@pytest.mark.parametrize("weights, message", [
    ([1.0, "a"], "weights must be numbers, one per channel"),
    ([1.0, None], "weights must be numbers, one per channel"),
    ([1.0, float("nan")], "weights must be finite"),
    ([1.0, float("inf")], "weights must be finite"),
    ([1e308, 1.0], "weights must be finite"),  # beyond float32: infinite where the estimator computes
])
def test_weights_that_are_not_finite_numbers_are_refused(weights, message):
    with pytest.raises(EstimatorInputError, match=message):
        gdpo_trl(CHANNELS, GROUPS, weights=weights)


@pytest.mark.parametrize("option, value, found", [
    ("weights", [1, "a"], "found 'a'"),
    ("weights", [1, None], "found None"),
    ("weights", {"format": float("nan")}, "found nan"),
    ("weights", [1e308, 1], "found 1e+308"),
    ("channels", ["format", "format"], "a channel named twice"),
    ("channels", ["format", ""], "expected channel names, found ''"),
])
def test_recompute_refuses_channel_options_in_one_line(option, value, found):
    from trajlens.estimators import estimator_spec

    for name in ("gdpo_verl", "gdpo_trl", "sum_then_normalize"):
        problems = estimator_spec(name).option_problems({option: value})
        assert len(problems) == 1 and found in problems[0] and f"option {option!r}" in problems[0], problems

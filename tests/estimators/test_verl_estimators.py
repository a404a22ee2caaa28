"""verl's other estimators against loops transcribed from verl's own code (trajlens.estimators.reference).

Random batches with observation spans inside responses, groups of one, tied and equal rewards;
kernel and loop agree to a few ulp (tests/_tolerance.py: their summation orders differ).
"""

from __future__ import annotations

import pytest
import torch
from trajlens.estimators.reference.trl import rloo_trl_loop
from trajlens.estimators.reference.verl import (
    gpg_loop,
    grpo_loop,
    grpo_passk_loop,
    opo_loop,
    otb_loop,
    reinforce_plus_plus_baseline_loop,
    reinforce_plus_plus_loop,
    reinforce_plus_plus_reset_loop,
    remax_loop,
    tir_otb_loop,
)
from _tolerance import assert_close_ulp
from torch.testing import assert_close

from trajlens.estimators import EstimatorInputError, grpo, reinforce, rloo
from trajlens.estimators.group_variants import gpg, grpo_passk, opo, reinforce_plus_plus_baseline
from trajlens.estimators.reinforce import reinforce_plus_plus
from trajlens.estimators.token_baselines import optimal_token_baseline, remax, tir_optimal_token_baseline

SEEDS = range(6)


def batch(seed: int, groups_of_one: bool = True, dtype=torch.float32):
    """(rewards on the last model token, mask with observation spans, group ids) for 12 trajectories."""
    generator = torch.Generator().manual_seed(seed)
    size, length = 12, 10
    mask = torch.rand(size, length, generator=generator) > 0.3
    mask[:, 0] = True
    ends = torch.randint(3, length + 1, (size,), generator=generator)
    mask &= torch.arange(length)[None, :] < ends[:, None]  # right padding after each response
    last = length - 1 - mask.flip(1).int().argmax(dim=1)
    rewards = torch.zeros(size, length, dtype=dtype)
    rewards[torch.arange(size), last] = torch.randint(0, 3, (size,), generator=generator).to(dtype) / 2
    rewards += torch.where(mask, torch.rand(size, length, generator=generator, dtype=dtype) * 0.1, 0.0)
    ids = [0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 3, 3] if not groups_of_one else [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 4, 4]
    return rewards, mask, ids


@pytest.mark.parametrize("seed", SEEDS)
def test_reinforce_plus_plus_reset_is_the_verl_0_8_loop_to_rounding(seed):
    rewards, mask, _ = batch(seed)
    expected, expected_returns = reinforce_plus_plus_reset_loop(rewards.clone(), mask.float(), gamma=0.9)
    result = reinforce_plus_plus(rewards, mask, gamma=0.9, convention="reset")
    assert_close_ulp(result.returns, expected_returns)
    assert_close_ulp(result.advantages, expected)


@pytest.mark.parametrize("seed", SEEDS)
def test_reinforce_plus_plus_default_is_the_verl_0_9_loop(seed):
    rewards, mask, _ = batch(seed)
    expected, expected_returns = reinforce_plus_plus_loop(rewards.clone(), mask.float(), gamma=0.9)
    result = reinforce_plus_plus(rewards, mask, gamma=0.9)
    assert_close_ulp(result.advantages, expected)
    assert_close_ulp(torch.where(mask, result.returns, 0.0), expected_returns)  # verl zeroes masked returns


def test_reinforce_plus_plus_gives_verl_main_values_across_an_observation_span():
    rewards = torch.tensor([[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, -1.0]])
    mask = torch.tensor([[True, False, True, True], [True, True, True, True]])
    current = reinforce_plus_plus(rewards, mask, gamma=1.0).advantages
    assert_close(current[0], torch.tensor([1.0690, 0.0, 1.0690, 1.0690]), atol=1e-4, rtol=0)  # verl 0.9.0, main
    old = reinforce_plus_plus(rewards, mask, gamma=1.0, convention="reset").advantages
    assert_close(old[0], torch.tensor([0.3004, 0.0, 1.3517, 1.3517]), atol=1e-4, rtol=0)  # verl 0.8.0


def test_reinforce_conventions_differ_only_across_observation_spans():
    rewards = torch.tensor([[0.0, 0.0, 0.0, 1.0]])
    mask = torch.tensor([[True, False, True, True]])
    carry = reinforce(rewards, mask, convention="carry").advantages
    reset = reinforce(rewards, mask, convention="reset").advantages
    assert_close(carry, torch.tensor([[1.0, 1.0, 1.0, 1.0]]))  # the outcome reaches the first turn
    assert_close(reset, torch.tensor([[0.0, 1.0, 1.0, 1.0]]))  # cut at the observation token (verl)
    single_turn = torch.tensor([[True, True, True, False]])  # one response, right padding
    outcome = torch.tensor([[0.0, 0.0, 1.0, 0.0]])
    carry = reinforce(outcome, single_turn, gamma=0.5, convention="carry").advantages
    reset = reinforce(outcome, single_turn, gamma=0.5, convention="reset").advantages
    assert_close_ulp(carry[:, :3], reset[:, :3])
    assert_close(reset[:, :3], torch.tensor([[0.25, 0.5, 1.0]]))


@pytest.mark.parametrize("seed", SEEDS)
def test_reinforce_plus_plus_baseline_is_the_loop_to_rounding(seed):
    rewards, mask, ids = batch(seed)
    expected = reinforce_plus_plus_baseline_loop(rewards.clone(), mask.float(), ids)
    assert_close_ulp(reinforce_plus_plus_baseline(rewards, mask, ids).advantages, expected)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("divide", [True, False])
def test_grpo_passk_is_the_loop_to_rounding(seed, divide):
    rewards, mask, ids = batch(seed, groups_of_one=False)
    expected = grpo_passk_loop(rewards.clone(), mask, ids, norm_adv_by_std_in_grpo=divide)
    assert_close_ulp(grpo_passk(rewards, mask, ids, norm_adv_by_std_in_grpo=divide).advantages, expected)


def test_grpo_passk_refuses_a_group_of_one():
    rewards, mask, ids = batch(0, groups_of_one=True)
    with pytest.raises(EstimatorInputError, match="pass@k needs two or more trajectories per group"):
        grpo_passk(rewards, mask, ids)


@pytest.mark.parametrize("seed", SEEDS)
def test_opo_is_the_loop_to_rounding(seed):
    rewards, mask, ids = batch(seed)
    assert_close_ulp(opo(rewards, mask, ids).advantages, opo_loop(rewards.clone(), mask, ids))


@pytest.mark.parametrize("seed", SEEDS)
def test_gpg_is_the_loop_to_rounding(seed):
    rewards, mask, ids = batch(seed)
    rewards[0] = 0.0  # a zero score changes alpha
    assert_close_ulp(gpg(rewards, mask, ids, f_norm=2.0).advantages, gpg_loop(rewards.clone(), mask, ids, f_norm=2.0))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gpg_in_half_precision_rounds_once_as_verl_does(dtype):
    """verl multiplies one 0-d score at a time by its float32 alpha, so the product is float32 and
    rounded to the score's dtype once. Groups of two with scores in halves have exact means, so
    both sides agree to the bit on any CPU, where rounding alpha to half first differs in the
    last bit."""
    generator = torch.Generator().manual_seed(0)
    for _ in range(50):
        rewards = torch.zeros(12, 3, dtype=dtype)
        rewards[:, -1] = torch.randint(0, 6, (12,), generator=generator).to(dtype) / 2
        mask, ids = torch.ones(12, 3, dtype=torch.bool), [i % 6 for i in range(12)]
        assert torch.equal(gpg(rewards, mask, ids).advantages, gpg_loop(rewards.clone(), mask, ids))


@pytest.mark.parametrize("seed", SEEDS)
def test_remax_is_the_loop_to_rounding(seed):
    rewards, mask, _ = batch(seed)
    baselines = torch.rand(12, generator=torch.Generator().manual_seed(seed))
    expected, expected_returns = remax_loop(rewards, baselines, mask.float())
    result = remax(rewards, mask, baselines)
    assert_close_ulp(result.advantages, expected)
    assert_close_ulp(result.returns, expected_returns)


def _policy(seed: int, shape):
    generator = torch.Generator().manual_seed(seed + 100)
    probabilities = torch.rand(shape, generator=generator) * 0.9 + 0.05
    return probabilities.log(), probabilities**2 + torch.rand(shape, generator=generator) * 0.05


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("zero_tail", [True, False])
def test_optimal_token_baselines_are_the_loop_to_rounding(seed, zero_tail):
    rewards, mask, ids = batch(seed)
    log_probs, sum_pi_squared = _policy(seed, rewards.shape)
    fmask = mask.float()
    expected = otb_loop(rewards, fmask, ids, log_probs, sum_pi_squared, handle_zero_tail=zero_tail)
    got = optimal_token_baseline(rewards, mask, ids, log_probs, sum_pi_squared, handle_zero_tail=zero_tail)
    assert_close_ulp(got.advantages, expected)
    expected = tir_otb_loop(rewards, fmask, ids, log_probs, sum_pi_squared, handle_zero_tail=zero_tail)
    got = tir_optimal_token_baseline(rewards, mask, ids, log_probs, sum_pi_squared, handle_zero_tail=zero_tail)
    assert_close_ulp(got.advantages, expected)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("normalize", [False, True])
def test_rloo_trl_convention_is_the_loop_to_rounding(seed, normalize):
    rewards, mask, _ = batch(seed)
    ids = [i // 4 for i in range(12)]  # TRL: contiguous groups of num_generations
    expected = rloo_trl_loop(rewards.sum(dim=-1), 4, normalize)
    got = rloo(rewards, mask, ids, convention="trl", normalize_advantages=normalize).sequence_advantages
    assert_close_ulp(got, expected)


def test_grpo_group_of_one_divides_by_float32_one_plus_eps_as_verl():
    scores = torch.tensor([[0.3], [1.0], [2.0]], dtype=torch.float64)
    mask = torch.ones_like(scores, dtype=torch.bool)
    ids = [0, 1, 1]
    expected = grpo_loop(scores.clone(), mask, ids)
    assert_close_ulp(grpo(scores, mask, ids).advantages, expected)
    alone = float(grpo(scores, mask, ids).sequence_advantages[0])
    one_plus_eps = float(torch.tensor(1.0) + 1e-6)  # verl: float32 std 1 of a group of one, plus eps in float32
    assert_close_ulp(alone, 0.3 / one_plus_eps)
    assert abs(alone / (0.3 / 1.000001) - 1) > 4e-8  # a float64 1 + 1e-6 is 4.6e-8 relative away

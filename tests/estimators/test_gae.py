"""GAE and REINFORCE: hand-derived cases, agreement with verl's loop, and invariants."""

from __future__ import annotations

import math

import pytest
import torch
from trajlens.estimators.reference.verl import gae_loop, returns_loop
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from trajlens.estimators import discounted_returns, gae, reinforce
from trajlens.estimators._scan import reverse_discounted_scan

T_, F_ = True, False


def test_gae_by_hand_with_an_observation_span():
    # model tokens at 0, 1, 4; tokens 2-3 are tool output, 5 is padding.
    mask = torch.tensor([[T_, T_, F_, F_, T_, F_]])
    values = torch.tensor([[1.0, 2.0, 9.0, 9.0, 0.5, 7.0]])  # 9.0 and 7.0 sit on masked tokens: ignored
    rewards = torch.tensor([[0.0, 0.5, 5.0, 0.0, 1.0, 3.0]])  # 5.0 and 3.0 sit on masked tokens: dropped
    gamma, lam = 0.9, 0.5  # c = gamma * lam = 0.45
    # delta_4 = 1.0 + 0.9 * 0   - 0.5 =  0.5      A_4 = 0.5
    # delta_1 = 0.5 + 0.9 * 0.5 - 2.0 = -1.05     A_1 = -1.05 + 0.45 * 0.5     = -0.825
    # delta_0 = 0.0 + 0.9 * 2.0 - 1.0 =  0.8      A_0 =  0.8  + 0.45 * -0.825  =  0.42875
    # tokens 2, 3 carry A_4 (verl's loop leaves lastgaelam there); token 5 is past the last: 0
    expected = torch.tensor([[0.42875, -0.825, 0.5, 0.5, 0.5, 0.0]])
    result = gae(rewards, values, mask, gamma, lam)
    assert_close(result.advantages, expected)
    assert_close(result.returns, expected + values)  # returns = raw A + V, every position
    assert result.normalisation == "none"
    verl_advantages, verl_returns = gae_loop(rewards, values, mask, gamma, lam)
    assert_close(result.advantages, verl_advantages)
    assert_close(result.returns, verl_returns)


def test_last_model_token_of_one_turn_links_to_the_first_of_the_next():
    mask = torch.tensor([[T_, F_, F_, F_, T_]])
    values = torch.tensor([[0.0, 0.0, 0.0, 0.0, 2.0]])
    rewards = torch.zeros(1, 5)
    # gamma = 1, lambda = 1: delta_0 = 0 + V_4 - V_0 = 2, delta_4 = 0 - 2 = -2, A_0 = 2 + (-2) = 0
    # gamma = 0.5: delta_0 = 0.5 * 2 = 1, A_0 = 1 + 0.5 * 1 * (-2) = 0
    assert_close(gae(rewards, values, mask, 1.0, 1.0).advantages, torch.tensor([[0.0, -2.0, -2.0, -2.0, -2.0]]))
    assert_close(gae(rewards, values, mask, 0.5, 1.0).advantages, torch.tensor([[0.0, -2.0, -2.0, -2.0, -2.0]]))


def test_gamma_lambda_zero_gives_the_td_error():
    mask = torch.tensor([[T_, T_, T_]])
    values = torch.tensor([[1.0, 2.0, 3.0]])
    rewards = torch.tensor([[0.0, 0.0, 1.0]])
    # lam = 0: A_t = delta_t = r_t + 0.5 V_{t+1} - V_t = [0 + 1 - 1, 0 + 1.5 - 2, 1 + 0 - 3]
    assert_close(gae(rewards, values, mask, 0.5, 0.0).advantages, torch.tensor([[0.0, -0.5, -2.0]]))
    # gamma = 0: A_t = r_t - V_t
    assert_close(gae(rewards, values, mask, 0.0, 1.0).advantages, torch.tensor([[-1.0, -2.0, -2.0]]))


def test_gamma_lambda_one_telescopes_to_return_minus_value():
    torch.manual_seed(0)
    mask = torch.rand(3, 200) > 0.3
    mask[:, 0] = True
    values = torch.randn(3, 200, dtype=torch.float64)
    rewards = torch.zeros(3, 200, dtype=torch.float64)
    rewards[:, 150] = 1.0
    result = gae(rewards, values, mask, 1.0, 1.0)
    # A_t = sum of later model-token rewards - V_t
    later = torch.flip(torch.cumsum(torch.flip(torch.where(mask, rewards, 0.0), [1]), 1), [1])
    assert_close(result.advantages[mask], (later - values)[mask])


@settings(max_examples=60, deadline=None)
@given(
    batch=st.integers(1, 4),
    length=st.integers(1, 300),
    gamma=st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]) | st.floats(0.0, 1.0),
    lam=st.sampled_from([0.0, 0.95, 1.0]) | st.floats(0.0, 1.0),
    observed=st.floats(0.0, 0.9),
    seed=st.integers(0, 2**16),
)
def test_fast_gae_equals_the_loop(batch, length, gamma, lam, observed, seed):
    generator = torch.Generator().manual_seed(seed)
    mask = torch.rand(batch, length, generator=generator) > observed
    mask[:, torch.randint(length, (1,), generator=generator)] = True
    rewards = torch.randn(batch, length, generator=generator, dtype=torch.float64)
    values = torch.randn(batch, length, generator=generator, dtype=torch.float64)
    result = gae(rewards, values, mask, gamma, lam)
    slow_advantages, slow_returns = gae_loop(rewards, values, mask, gamma, lam)
    assert_close(result.advantages, slow_advantages)
    assert_close(result.returns, slow_returns)


@settings(max_examples=25, deadline=None)
@given(length=st.integers(2, 120), seed=st.integers(0, 2**16))
def test_masked_positions_never_leak_into_gae(length, seed):
    generator = torch.Generator().manual_seed(seed)
    mask = torch.rand(2, length, generator=generator) > 0.4
    mask[:, 0] = True
    rewards = torch.randn(2, length, generator=generator)
    values = torch.randn(2, length, generator=generator)
    base = gae(rewards, values, mask, 0.99, 0.95)
    noisy_rewards = torch.where(mask, rewards, float("nan"))
    noisy_values = torch.where(mask, values, 1e6)
    other = gae(noisy_rewards, noisy_values, mask, 0.99, 0.95)
    assert_close(other.advantages, base.advantages)


def test_long_sequences_cross_every_scan_level():
    torch.manual_seed(1)
    mask = torch.rand(2, 9000) > 0.3
    mask[:, 0] = True
    rewards = torch.randn(2, 9000, dtype=torch.float64) * 0.01
    values = torch.randn(2, 9000, dtype=torch.float64)
    for gamma, lam in [(1.0, 0.95), (0.999, 1.0), (1.0, 1.0)]:
        fast = gae(rewards, values, mask, gamma, lam).advantages
        slow, _ = gae_loop(rewards, values, mask, gamma, lam)
        assert_close(fast, slow)


def test_scan_on_a_very_long_row_matches_a_python_loop():
    n = 270_000  # four levels of 64-token blocks
    x = torch.randn(1, n, dtype=torch.float64)
    c = 0.9999
    expected = [0.0] * n
    running = 0.0
    values = x[0].tolist()
    for k in range(n - 1, -1, -1):
        running = values[k] + c * running
        expected[k] = running
    assert_close(reverse_discounted_scan(x, c)[0], torch.tensor(expected, dtype=torch.float64))


def test_float32_fast_gae_is_within_1e_5_of_the_loop():
    torch.manual_seed(2)
    mask = torch.rand(4, 4096) > 0.3
    mask[:, 0] = True
    values = torch.randn(4, 4096)
    rewards = torch.zeros(4, 4096)
    rewards[:, -1] = torch.randn(4)
    fast = gae(rewards, values, mask, 1.0, 0.95).advantages
    slow, _ = gae_loop(rewards, values, mask, 1.0, 0.95)
    assert float((fast - slow).abs().max()) <= 1e-5


def test_half_precision_is_computed_in_float32():
    mask = torch.tensor([[T_, T_]])
    result = gae(torch.tensor([[0.0, 1.0]], dtype=torch.bfloat16), torch.zeros(1, 2, dtype=torch.bfloat16), mask)
    assert result.advantages.dtype == torch.float32
    assert_close(result.advantages, torch.tensor([[1.0, 1.0]]))


def test_reinforce_by_hand():
    mask = torch.tensor([[T_, F_, T_, T_, F_]])
    rewards = torch.tensor([[1.0, 7.0, 0.0, 2.0, 9.0]])  # 7.0 and 9.0 on masked tokens: dropped
    # G_3 = 2, G_2 = 0 + 0.5 * 2 = 1, G_0 = 1 + 0.5 * 1 = 1.5; token 1 carries G_2, token 4 is past the end
    expected = torch.tensor([[1.5, 1.0, 1.0, 2.0, 0.0]])
    result = reinforce(rewards, mask, gamma=0.5)
    assert_close(result.advantages, expected)
    assert result.returns is result.advantages
    assert_close(discounted_returns(rewards, mask, 0.5), expected)


@settings(max_examples=30, deadline=None)
@given(length=st.integers(1, 200), gamma=st.floats(0.0, 1.0), seed=st.integers(0, 2**16))
def test_reinforce_equals_the_loop(length, gamma, seed):
    generator = torch.Generator().manual_seed(seed)
    mask = torch.rand(3, length, generator=generator) > 0.5
    mask[:, -1] = True
    rewards = torch.randn(3, length, generator=generator, dtype=torch.float64)
    assert_close(reinforce(rewards, mask, gamma).advantages, returns_loop(rewards, mask, gamma))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gae_runs_on_cuda():
    torch.manual_seed(3)
    mask = torch.rand(4, 1000) > 0.3
    mask[:, 0] = True
    rewards, values = torch.randn(4, 1000), torch.randn(4, 1000)
    on_gpu = gae(rewards.cuda(), values.cuda(), mask.cuda(), 1.0, 0.95)
    assert on_gpu.advantages.is_cuda
    assert_close(on_gpu.advantages.cpu(), gae(rewards, values, mask, 1.0, 0.95).advantages, atol=1e-5, rtol=1e-5)
    assert not math.isnan(float(on_gpu.returns.sum()))

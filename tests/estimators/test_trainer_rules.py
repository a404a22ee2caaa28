"""What each trainer release did, case by case: TRL's NaN and single-completion rules, verl's
vectorised estimators and its empty responses, TRL's float32 reward weights.

Every expected value is the trainer's own (its code transcribed in ``trajlens.estimators.reference``,
or the number it prints); ``scripts/reference_check`` compares against the released code itself.
"""

from __future__ import annotations

import pytest
import torch
from _tolerance import assert_close_ulp
from torch.testing import assert_close

from trajlens.estimators import dr_grpo, grpo, grpo_batch_std, rloo, sum_then_normalize
from trajlens.estimators.group_variants import opo
from trajlens.estimators.reference.trl import (
    rloo_trl_loop,
    rloo_trl_loop_v16,
    trl_sum_then_normalize,
    trl_sum_then_normalize_v16,
)
from trajlens.estimators.reference.verl import (
    grpo_loop,
    grpo_vectorized_verl,
    opo_loop,
    otb_loop,
    rloo_vectorized_verl,
)
from trajlens.estimators.token_baselines import optimal_token_baseline

NAN = float("nan")


def _column(values: list[float], dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    rewards = torch.tensor(values, dtype=dtype)[:, None]
    return rewards, torch.ones_like(rewards, dtype=torch.bool)


# one reward function, scores [nan, 1, 0, 2] in groups of two: TRL >= 1.6's values
def test_trl_rloo_leaves_an_unscorable_completion_out():
    rewards, mask = _column([NAN, 1.0, 0.0, 2.0])
    found = rloo(rewards, mask, ["a", "a", "b", "b"], convention="trl").sequence_advantages
    assert_close(found, torch.tensor([0.0, 0.0, -2.0, 2.0]))
    assert_close(found, rloo_trl_loop_v16(rewards[:, 0], 2, False))


def test_trl_batch_std_leaves_an_unscorable_completion_out():
    rewards, mask = _column([NAN, 1.0, 0.0, 2.0])
    found = grpo_batch_std(rewards, mask, ["a", "a", "b", "b"]).sequence_advantages
    assert_close(found, torch.tensor([0.0, 0.0, -0.9999, 0.9999]), atol=1e-4, rtol=0)
    assert torch.equal(found, trl_sum_then_normalize_v16(rewards, 2, torch.ones(1), "batch"))


def test_trl_scale_rewards_none_leaves_an_unscorable_completion_out():
    rewards, mask = _column([NAN, 1.0, 0.0, 2.0])
    found = dr_grpo(rewards, mask, ["a", "a", "b", "b"], convention="trl").sequence_advantages
    assert_close(found, torch.tensor([0.0, 0.0, -1.0, 1.0]))
    assert torch.equal(found, trl_sum_then_normalize_v16(rewards, 2, torch.ones(1), "none"))
    group = grpo(rewards, mask, ["a", "a", "b", "b"], epsilon=1e-4, convention="trl").sequence_advantages
    assert torch.equal(group, trl_sum_then_normalize_v16(rewards, 2, torch.ones(1), "group"))


@pytest.mark.parametrize("convention, reference", [("trl", trl_sum_then_normalize_v16), ("trl-1.5", trl_sum_then_normalize)])
def test_grpo_under_trl_takes_trl_s_epsilon_unless_told(convention, reference):
    """TRL adds 1e-4 to the group std, verl 1e-6: the convention alone gives TRL's numbers (a
    float32 near-tie, where the two differ a hundredfold), an explicit epsilon still wins."""
    rewards, mask = _column([1.4, 1.4000001, 1.4, 1.4])
    found = grpo(rewards, mask, [0, 0, 0, 0], convention=convention).sequence_advantages
    assert torch.equal(found, reference(rewards, 4, torch.ones(1), "group"))
    assert_close(found[0], torch.tensor(-0.0011907), atol=1e-7, rtol=0)
    verl_eps = grpo(rewards, mask, [0, 0, 0, 0], convention=convention, epsilon=1e-6).sequence_advantages
    assert_close(verl_eps[0], torch.tensor(-0.10651), atol=1e-5, rtol=0)
    assert_close(grpo(rewards, mask, [0, 0, 0, 0]).sequence_advantages, verl_eps)  # verl's own default


def test_trl_1_5_counts_an_unscorable_completion_as_zero():
    rewards, mask = _column([NAN, 1.0, 0.0, 2.0])
    zeroed = torch.nan_to_num(rewards, nan=0.0)
    found = rloo(rewards, mask, ["a", "a", "b", "b"], convention="trl-1.5").sequence_advantages
    assert_close(found, torch.tensor([-1.0, 1.0, -2.0, 2.0]))
    assert torch.equal(found, rloo_trl_loop(zeroed[:, 0], 2, False))
    batch = grpo_batch_std(rewards, mask, ["a", "a", "b", "b"], convention="trl-1.5").sequence_advantages
    assert torch.equal(batch, trl_sum_then_normalize(rewards, 2, torch.ones(1), "batch"))
    with pytest.raises(ValueError, match="non-finite"):
        rloo(rewards, mask, ["a", "a", "b", "b"])  # verl would turn the group into NaN


def test_trl_rloo_normalized_with_one_completion_gives_zero():
    rewards, mask = _column([0.5])
    current = rloo(rewards, mask, ["a"], convention="trl", normalize_advantages=True).sequence_advantages
    assert_close(current, torch.tensor([0.0]))  # TRL >= 1.6: nanstd of one value is NaN, nan_to_num -> 0
    assert_close(current, rloo_trl_loop_v16(rewards[:, 0], 1, True))
    old = rloo(rewards, mask, ["a"], convention="trl-1.5", normalize_advantages=True).sequence_advantages
    assert torch.isnan(old).all()  # TRL 1.5: Tensor.std of one value is NaN, and it stays


@pytest.mark.parametrize("seed", range(4))
def test_trl_float32_paths_are_bit_identical(seed):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 5, (24,), generator=generator).float() * torch.rand(24, generator=generator)
    scores[torch.rand(24, generator=generator) < 0.2] = NAN
    rewards, mask = scores[:, None], torch.ones(24, 1, dtype=torch.bool)
    groups = [i // 4 for i in range(24)]
    for scale, ours in (("batch", grpo_batch_std(rewards, mask, groups)),
                        ("group", grpo(rewards, mask, groups, epsilon=1e-4, convention="trl")),
                        ("none", dr_grpo(rewards, mask, groups, convention="trl"))):
        assert torch.equal(ours.sequence_advantages, trl_sum_then_normalize_v16(rewards, 4, torch.ones(1), scale)), scale
    for normalize in (False, True):
        ours = rloo(rewards, mask, groups, convention="trl", normalize_advantages=normalize).sequence_advantages
        assert torch.equal(ours, rloo_trl_loop_v16(scores, 4, normalize)), normalize


def test_float32_batch_std_is_trl_nanstd_not_tensor_std():
    generator = torch.Generator().manual_seed(3)
    rewards = torch.rand(64, 1, generator=generator) * 7
    mask = torch.ones_like(rewards, dtype=torch.bool)
    groups = [i // 8 for i in range(64)]
    found = grpo_batch_std(rewards, mask, groups).sequence_advantages
    assert torch.equal(found, trl_sum_then_normalize_v16(rewards, 8, torch.ones(1), "batch"))
    assert_close_ulp(found, trl_sum_then_normalize(rewards, 8, torch.ones(1), "batch"))  # 1.5 differs by rounding only


def test_trl_float32_weights_break_the_ties_trl_breaks():
    # 2 x 0.7 and 0.3 + 1.1 are both 1.4, but not in float32: TRL's eps 1e-4 makes the gap ~1e-3
    channels = torch.tensor([[0.0, 2.0, 0.0], [1.0, 0.0, 1.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    weights = [0.3, 0.7, 1.1]
    expected = trl_sum_then_normalize_v16(channels.float(), 2, torch.tensor(weights, dtype=torch.float32))
    assert expected[:2].abs().max() > 1e-4  # the tie TRL broke
    for dtype in (torch.float32, torch.float64):
        found = sum_then_normalize(channels.to(dtype), [0, 0, 1, 1], weights).sequence_advantages
        assert_close(found.float(), expected, atol=1e-6, rtol=0)


def test_verl_grpo_vectorized_takes_float32_group_statistics():
    generator = torch.Generator().manual_seed(0)
    rewards = torch.rand(12, 5, generator=generator, dtype=torch.float64) / 3
    mask = torch.ones(12, 5, dtype=torch.bool)
    ids = [0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 3, 4]
    index = torch.tensor(ids)
    for divide, fn in ((True, grpo), (False, dr_grpo)):
        found = fn(rewards, mask, ids, vectorized=True).advantages
        assert torch.equal(found, grpo_vectorized_verl(rewards, mask.double(), index, norm_adv_by_std_in_grpo=divide))
    loop = grpo(rewards, mask, ids).advantages
    assert 1e-9 < (loop - grpo(rewards, mask, ids, vectorized=True).advantages).abs().max() < 1e-5  # float32 statistics
    assert torch.equal(grpo(rewards.float(), mask, ids, vectorized=True).advantages,
                       grpo_vectorized_verl(rewards.float(), mask.float(), index))


def test_verl_rloo_vectorized_zeroes_a_group_of_one():
    rewards, mask = _column([3.0, 1.0, 7.0])
    found = rloo(rewards, mask, ["a", "a", "b"], vectorized=True).sequence_advantages
    assert_close(found, torch.tensor([2.0, -2.0, 0.0]))
    assert torch.equal(found[:, None], rloo_vectorized_verl(rewards, mask.float(), ["a", "a", "b"]))
    assert_close(rloo(rewards, mask, ["a", "a", "b"]).sequence_advantages, torch.tensor([2.0, -2.0, 7.0]))  # verl rloo


def test_an_empty_response_stays_in_its_group_as_verl_keeps_it():
    rewards = torch.tensor([[0.0, 0.0], [0.0, 1.0], [0.0, 2.0]])
    mask = torch.tensor([[False, False], [True, True], [True, True]])
    found = grpo(rewards, mask, ["g", "g", "g"])
    assert_close(found.advantages[:, -1], torch.tensor([0.0, 0.0, 0.999999]))
    assert_close_ulp(found.advantages, grpo_loop(rewards.clone(), mask.float(), ["g", "g", "g"]))
    assert_close_ulp(opo(rewards, mask, ["g", "g", "g"]).advantages, opo_loop(rewards.clone(), mask.float(), ["g", "g", "g"]))


_EMPTY_FIRST = {"run_id": ["r"] * 3, "step": [1] * 3, "trajectory_id": ["a", "b", "c"], "group_id": ["g"] * 3,
                "split": ["train"] * 3, "reward": [0.0, 1.0, 2.0]}


@pytest.mark.parametrize(("estimator", "expected"), [
    ("grpo", [0.0, 0.0, 0.999999]), ("dr_grpo", [0.0, 0.0, 1.0]), ("rloo", [0.0, 0.0, 1.5]),
    ("opo", [0.0, -0.5, 0.5]), ("gpg", [0.0, 0.0, 1.5]),
])
def test_recompute_gives_an_empty_response_its_token_advantage_zero(estimator, expected):
    """The group statistics count the empty response (its score 0); its trajectory's advantage is
    what its token arrays hold, 0, whether told by the tokens frame or by the model-token count."""
    import polars as pl

    from trajlens.estimators import recompute

    tokens = pl.DataFrame({"run_id": ["r"] * 3, "trajectory_id": ["a", "b", "c"],
                           "response_mask": [[False, False], [True, True], [True, True]]})
    by_count = pl.DataFrame({**_EMPTY_FIRST, "model_tokens": [0, 2, 2]})
    for trajectories, frame in ((pl.DataFrame(_EMPTY_FIRST), tokens), (by_count, None)):
        found = recompute(trajectories, frame, estimator)["advantage"]
        assert found.to_list() == pytest.approx(expected, abs=1e-6)


def test_a_step_whose_every_response_is_empty_gives_zero_or_a_one_line_refusal():
    """No IndexError from a (B, 0) mask: OPO gives 0 to responses that trained on no token, and
    REINFORCE++ with a baseline, which whitens over the step's model tokens, says there are none."""
    import polars as pl

    from trajlens.estimators import EstimatorInputError, recompute

    empty = pl.DataFrame({**_EMPTY_FIRST, "model_tokens": [0, 0, 0]})
    assert recompute(empty, None, "opo")["advantage"].to_list() == [0.0, 0.0, 0.0]
    with pytest.raises(EstimatorInputError, match="has 0 model tokens; whitening needs at least two"):
        recompute(empty, None, "reinforce_plus_plus_baseline")


def test_an_empty_response_stays_in_the_token_baseline():
    generator = torch.Generator().manual_seed(1)
    rewards = torch.zeros(4, 6)
    rewards[:, -1] = torch.tensor([1.0, 0.0, 0.5, 1.0])
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[1] = False
    probabilities = torch.rand(4, 6, generator=generator) * 0.9 + 0.05
    ids = ["g"] * 4
    found = optimal_token_baseline(rewards, mask, ids, probabilities.log(), probabilities**2).advantages
    expected = otb_loop(rewards, mask.float(), ids, probabilities.log(), probabilities**2)
    assert_close_ulp(found, expected)


def test_a_run_without_a_reward_is_recomputed_under_trl_rules():
    import polars as pl

    from trajlens.estimators import EstimatorInputError, recompute

    trajectories = pl.DataFrame({
        "run_id": ["r"] * 4, "step": [1] * 4, "trajectory_id": ["a", "b", "c", "d"], "group_id": ["g", "g", "h", "h"],
        "split": ["train"] * 4, "reward": [None, 1.0, 0.0, 2.0]})
    assert recompute(trajectories, None, "rloo", convention="trl")["advantage"].to_list() == [0.0, 0.0, -2.0, 2.0]
    assert recompute(trajectories, None, "dr_grpo", convention="trl")["advantage"].to_list() == [0.0, 0.0, -1.0, 1.0]
    with pytest.raises(EstimatorInputError, match="trajectory 'a' has no reward"):
        recompute(trajectories, None, "grpo")  # verl's rule has no unscorable completion


def test_an_empty_response_stays_in_the_multi_turn_token_baseline():
    from trajlens.estimators.reference.verl import tir_otb_loop
    from trajlens.estimators.token_baselines import tir_optimal_token_baseline

    generator = torch.Generator().manual_seed(2)
    rewards = torch.zeros(4, 6)
    rewards[:, -1] = torch.tensor([1.0, 0.0, 0.5, 1.0])
    mask = torch.rand(4, 6, generator=generator) > 0.3
    mask[:, -1] = True
    mask[2] = False
    probabilities = torch.rand(4, 6, generator=generator) * 0.9 + 0.05
    ids = ["g"] * 4
    found = tir_optimal_token_baseline(rewards, mask, ids, probabilities.log(), probabilities**2).advantages
    assert_close_ulp(found, tir_otb_loop(rewards, mask.float(), ids, probabilities.log(), probabilities**2))

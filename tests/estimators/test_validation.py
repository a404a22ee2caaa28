"""Bad input: every error names the function, the argument and the shapes."""

from __future__ import annotations

import pytest
import torch

import trajlens.estimators as estimators
from trajlens.errors import TrajlensError
from trajlens.estimators import EstimatorInputError, gae, grpo, masked_whiten, reinforce, rloo

REWARDS = torch.zeros(2, 5)
VALUES = torch.zeros(2, 5)
MASK = torch.ones(2, 5, dtype=torch.bool)


def test_the_error_is_a_trajlens_error_and_a_value_error():
    assert issubclass(EstimatorInputError, TrajlensError)
    assert issubclass(EstimatorInputError, ValueError)


def test_mismatched_shapes():
    with pytest.raises(EstimatorInputError, match=r"gae: values has shape \(2, 4\) but token_rewards has shape \(2, 5\)"):
        gae(REWARDS, torch.zeros(2, 4), MASK)
    with pytest.raises(EstimatorInputError, match=r"grpo: response_mask has shape \(3, 5\) but token_rewards has shape \(2, 5\)"):
        grpo(REWARDS, torch.ones(3, 5, dtype=torch.bool), [0, 0])


def test_float_mask_where_bool_is_expected():
    with pytest.raises(
        EstimatorInputError, match=r"gae: response_mask must be a bool tensor .* got torch.float32 of shape \(2, 5\)"
    ):
        gae(REWARDS, VALUES, MASK.float())
    with pytest.raises(EstimatorInputError, match=r"masked_whiten: response_mask must be a bool tensor .* torch.int64"):
        masked_whiten(REWARDS, MASK.long())


def test_bool_tensor_where_floats_are_expected():
    with pytest.raises(
        EstimatorInputError, match=r"gae: values must be a floating tensor, got a bool tensor of shape \(2, 5\)"
    ):
        gae(REWARDS, MASK, MASK)
    with pytest.raises(EstimatorInputError, match=r"reinforce: token_rewards must be a floating tensor, got torch.int64"):
        reinforce(torch.zeros(2, 5, dtype=torch.int64), MASK)


def test_empty_batch():
    with pytest.raises(EstimatorInputError, match=r"gae: empty batch: token_rewards has shape \(0, 5\)"):
        gae(torch.zeros(0, 5), torch.zeros(0, 5), torch.zeros(0, 5, dtype=torch.bool))
    with pytest.raises(EstimatorInputError, match=r"rloo: empty batch: token_rewards has shape \(0, 3\)"):
        rloo(torch.zeros(0, 3), torch.zeros(0, 3, dtype=torch.bool), [])
    with pytest.raises(EstimatorInputError, match=r"gdpo_trl: empty batch: channel_rewards has shape \(0, 2\)"):
        estimators.gdpo_trl(torch.zeros(0, 2), [])


def test_all_masked_rows():
    mask = MASK.clone()
    mask[1] = False
    with pytest.raises(
        EstimatorInputError, match=r"gae: response_mask of shape \(2, 5\) has rows with no model tokens: 1; drop"
    ):
        gae(REWARDS, VALUES, mask)
    kept = grpo(REWARDS, mask, [0, 0])  # verl keeps a response without model tokens in its group
    assert kept.advantages.shape == (2, 5) and not kept.advantages[1].any()


def test_wrong_number_of_group_ids():
    with pytest.raises(EstimatorInputError, match="grpo: group_ids has 3 entries but the batch has 2 trajectories"):
        grpo(REWARDS, MASK, ["a", "b", "c"])


def test_out_of_range_discounts():
    with pytest.raises(EstimatorInputError, match=r"gae: lam must lie in \[0, 1\], got 1.5"):
        gae(REWARDS, VALUES, MASK, 0.9, 1.5)


def test_non_finite_value_on_a_model_token_is_located():
    values = VALUES.clone()
    values[1, 3] = float("nan")
    message = r"gae: values of shape \(2, 5\) has a non-finite value at model token \(1, 3\)"
    with pytest.raises(EstimatorInputError, match=message):
        gae(REWARDS, values, MASK)


def test_every_public_name_has_a_docstring():
    for name in estimators.__all__:
        value = getattr(estimators, name)
        if callable(value):
            assert (value.__doc__ or "").strip(), f"trajlens.estimators.{name} has no docstring"


def test_import_trajlens_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, trajlens, trajlens.errors; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("epsilon", [-1.0, float("inf"), float("nan")])
def test_every_group_estimator_refuses_an_epsilon_that_is_negative_or_not_finite(epsilon):
    rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.0, 0.5], [0.0, 0.2]])
    mask = torch.ones(4, 2, dtype=torch.bool)
    groups = [0, 0, 1, 1]
    channels = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    calls = {
        "grpo": lambda: grpo(rewards, mask, groups, epsilon=epsilon),
        "grpo_batch_std": lambda: estimators.grpo_batch_std(rewards, mask, groups, epsilon=epsilon),
        "grpo_passk": lambda: estimators.grpo_passk(rewards, mask, groups, epsilon=epsilon),
        "gdpo_verl": lambda: estimators.gdpo_verl(channels, mask, groups, epsilon=epsilon),
        "gdpo_trl": lambda: estimators.gdpo_trl(channels, groups, epsilon=epsilon),
    }
    for name, call in calls.items():
        with pytest.raises(EstimatorInputError, match=f"{name}: epsilon must be a finite number >= 0"):
            call()


GROUPS = [0, 0]


@pytest.mark.parametrize("call, message", [
    (lambda: estimators.gpg(REWARDS, MASK, GROUPS, f_norm="1"), "gpg: f_norm must be a number, got '1'"),
    (lambda: grpo(REWARDS, MASK, GROUPS, epsilon="x"), "grpo: epsilon must be a number, got 'x'"),
    (lambda: gae(REWARDS, VALUES, MASK, gamma=None), "gae: gamma must be a number, got None"),
    (lambda: gae(REWARDS, VALUES, MASK, gamma="0.5"), "gae: gamma must be a number, got '0.5'"),
    (lambda: grpo(REWARDS, MASK, GROUPS, vectorized="no"), "grpo: vectorized must be True or False, got 'no'"),
    (lambda: rloo(REWARDS, MASK, GROUPS, normalize_advantages=1), "rloo: normalize_advantages must be True or False, got 1"),
    (lambda: estimators.gdpo_verl(torch.zeros(2, 2), MASK, GROUPS, divide_by_std="no"),
     "gdpo_verl: divide_by_std must be True or False, got 'no'"),
    (lambda: estimators.grpo_passk(REWARDS, MASK, GROUPS, norm_adv_by_std_in_grpo="no"),
     "grpo_passk: norm_adv_by_std_in_grpo must be True or False, got 'no'"),
    (lambda: estimators.gdpo_dynamic(torch.zeros(2, 2), GROUPS, MASK, config=3),
     "gdpo_dynamic: config must be a DynamicWeightConfig or a dict of its fields, got 3"),
])
def test_a_setting_of_the_wrong_kind_is_one_error_naming_it(call, message):
    """Not a TypeError from deep inside, and no text read as True (``"no"``) or as a number."""
    with pytest.raises(EstimatorInputError) as raised:
        call()
    assert str(raised.value) == message


def test_gdpo_dynamic_takes_its_config_as_a_dict_of_fields_as_documented():
    rewards = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    as_dict = estimators.gdpo_dynamic(rewards, [0, 0, 1, 1], MASK.repeat(2, 1), config={"temperature": 0.3})
    as_config = estimators.gdpo_dynamic(rewards, [0, 0, 1, 1], MASK.repeat(2, 1),
                                        config=estimators.DynamicWeightConfig(temperature=0.3))
    assert torch.equal(as_dict.advantages, as_config.advantages)

"""GDPO with dynamic weights: a saturated channel loses weight, bounds hold, the clip is counted."""

from __future__ import annotations

import math
import re

import pytest
import torch
from torch.testing import assert_close

from trajlens.estimators import DynamicWeightConfig, EstimatorInputError, dynamic_weights, gdpo_dynamic
from trajlens.estimators.dynamic import weight_config

GROUPS = [i // 8 for i in range(64)]  # 8 groups of 8, the digest's group size


def _step(generator: torch.Generator, format_saturated: bool) -> torch.Tensor:
    correct = torch.randint(0, 2, (64,), generator=generator).float()
    if format_saturated:
        formatted = torch.ones(64)  # learned: every rollout gets the format reward
    else:
        formatted = torch.randint(0, 2, (64,), generator=generator).float()
    return torch.stack([formatted, correct], dim=1)


def test_a_channel_whose_variance_goes_to_zero_loses_weight():
    generator = torch.Generator().manual_seed(0)
    config = DynamicWeightConfig()
    mask = torch.ones(64, 4, dtype=torch.bool)
    ema = None
    format_weights = []
    for step in range(60):
        result = gdpo_dynamic(_step(generator, format_saturated=step >= 10), GROUPS, mask, ema, config)
        ema = result.weights.ema_std
        format_weights.append(float(result.weights.weights[0]))
        if step >= 10:
            # saturated: every group has equal format scores, so A^format = 0 and its std is 0
            assert float(result.channel_std[0]) == 0.0
    # while both channels carry signal the weights are near equal (softmax of similar stds, capped at 0.5)
    assert abs(format_weights[9] - 0.5) < 0.05
    # after saturation the format weight falls every step and ends well below correctness'
    after = format_weights[10:]
    assert all(later < earlier for earlier, later in zip(after, after[1:]))
    assert after[-1] < 0.25
    assert float(result.weights.weights[1]) == pytest.approx(0.5)  # correctness at the upper bound


def test_weights_follow_the_std_not_its_inverse():
    config = DynamicWeightConfig(min_weight=0.0, max_weight=1.0)
    weights = dynamic_weights(torch.tensor([0.0, 0.5, 1.0]), None, config).weights
    # softmax([0, 1, 2]) with temperature 0.5 -> increasing in the std
    expected = torch.softmax(torch.tensor([0.0, 1.0, 2.0]), dim=0)
    assert_close(weights, expected)


def test_ema_update_by_hand():
    config = DynamicWeightConfig(ema_alpha=0.05)
    state = dynamic_weights(torch.tensor([1.0, 1.0]), torch.tensor([0.0, 2.0]), config)
    # e = 0.95 * previous + 0.05 * current
    assert_close(state.ema_std, torch.tensor([0.05, 1.95]))


def test_clamp_bounds_each_weight_without_renormalising():
    config = DynamicWeightConfig(min_weight=0.1, max_weight=0.5)
    state = dynamic_weights(torch.tensor([0.0, 0.0, 5.0]), None, config)
    # softmax([0, 0, 10]) ~ [4.5e-5, 4.5e-5, 0.9999] -> clamped to [0.1, 0.1, 0.5]; sum 0.7 (ratios are what count)
    assert_close(state.weights, torch.tensor([0.1, 0.1, 0.5]))
    assert state.weights.max() / state.weights.min() <= 0.5 / 0.1 + 1e-6


def test_project_keeps_the_bounds_and_a_sum_of_one():
    config = DynamicWeightConfig(min_weight=0.1, max_weight=0.5, bound="project")
    state = dynamic_weights(torch.tensor([0.0, 0.0, 5.0]), None, config)
    # the closest point of {0.1 <= w <= 0.5, sum 1} to [~0, ~0, ~1]: [0.25, 0.25, 0.5]
    assert_close(state.weights, torch.tensor([0.25, 0.25, 0.5]), atol=1e-6, rtol=0)
    with pytest.raises(EstimatorInputError, match="K \\* min_weight <= 1 <= K \\* max_weight"):
        dynamic_weights(torch.tensor([0.0, 1.0]), None, DynamicWeightConfig(max_weight=0.4, bound="project"))


def test_clip_share_and_clipped_channel_advantages():
    # a group of 8 with one success: its advantage is (1 - 1/8) / (std + eps) = 2.47 > 2
    channels = torch.zeros(8, 1)
    channels[0, 0] = 1.0
    result = gdpo_dynamic(channels, [0] * 8, config=DynamicWeightConfig(batch_normalisation="sequence"))
    std = math.sqrt((0.875**2 + 7 * 0.125**2) / 7)
    assert (1 - 1 / 8) / (std + 1e-6) > 2.0
    assert float(result.channel_advantages.max()) == 2.0
    assert_close(result.clip_share, torch.tensor([1 / 8]))
    assert result.advantages is None


def test_invalid_config_lists_every_problem():
    with pytest.raises(EstimatorInputError, match="temperature must be > 0.*advantage_clip must be > 0"):
        config = DynamicWeightConfig(temperature=0.0, advantage_clip=-1.0, batch_normalisation="sequence")
        gdpo_dynamic(torch.rand(4, 2), [0, 0, 1, 1], config=config)


FLOAT32 = "a finite number that float32 holds (0, or 1.175e-38 to 3.403e+38 in size)"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"ema_alpha": "x"}, f"ema_alpha must be {FLOAT32}, got 'x'"),
        ({"temperature": float("nan")}, f"temperature must be {FLOAT32}, got nan"),
        ({"ema_alpha": True}, f"ema_alpha must be {FLOAT32}, got True"),
        ({"advantage_clip": 1e300}, f"advantage_clip must be {FLOAT32}, got 1e+300"),  # overflowed torch's clamp
        ({"temperature": 1e-39}, f"temperature must be {FLOAT32}, got 1e-39"),  # e / temperature: inf, softmax NaN
        ({"epsilon": -1.0}, "epsilon must be >= 0, got -1.0"),
        ({"min_weight": 0.0, "max_weight": 0.0}, "max_weight must be > 0: every channel weighted 0 gives every "
                                                 "trajectory an advantage of 0"),
        ({"bound": 3}, "bound must be a text, got 3"),
    ],
)
def test_a_config_of_the_wrong_kind_is_one_clear_problem(fields, message):
    """Not a TypeError from comparing a text with a number, and no NaN that passes every bound."""
    with pytest.raises(EstimatorInputError, match=f"invalid DynamicWeightConfig: {re.escape(message)}$"):
        gdpo_dynamic(torch.rand(4, 2), [0, 0, 1, 1], config=DynamicWeightConfig(**fields, batch_normalisation="sequence"))


def test_an_unknown_config_field_is_named_with_the_fields_there_are():
    """As the ``config`` option (``--option config={...}``) reads a dict of fields."""
    with pytest.raises(EstimatorInputError, match="unknown field 'emma_alpha' \\(fields: ema_alpha, temperature"):
        weight_config("gdpo_dynamic", {"emma_alpha": 0.1})


def test_token_normalisation_needs_a_mask():
    with pytest.raises(EstimatorInputError, match="needs response_mask"):
        gdpo_dynamic(torch.rand(4, 2), [0, 0, 1, 1])

"""Loss aggregation weights and the length bias they imply."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from trajlens.estimators import EstimatorInputError, aggregation_weights

# two trajectories of 1 and 3 model tokens in T = 4 positions; B = 2
MASK = torch.tensor([[True, False, False, False], [True, True, False, True]])


@pytest.mark.parametrize(
    ("mode", "per_token", "elasticity"),
    [
        ("token-mean", [1 / 4, 1 / 4], 0.0),  # 1 / (1 + 3)
        ("seq-mean-token-mean", [1 / 2, 1 / 6], -1.0),  # 1 / (B L_i) = 1/(2*1), 1/(2*3)
        ("seq-mean-token-sum", [1 / 2, 1 / 2], 0.0),  # 1 / B
        ("seq-mean-token-sum-norm", [1 / 4, 1 / 4], 0.0),  # 1 / L_max, L_max = T = 4
        ("dr-grpo", [1 / 8, 1 / 8], 0.0),  # 1 / (B L_max)
    ],
)
def test_weights_by_hand(mode, per_token, elasticity):
    weights = aggregation_weights(MASK, mode)
    expected_tokens = MASK.double() * torch.tensor(per_token, dtype=torch.float64)[:, None]
    assert_close(weights.token_weights, expected_tokens)
    assert_close(weights.trajectory_weights, torch.tensor([per_token[0] * 1, per_token[1] * 3], dtype=torch.float64))
    assert_close(weights.lengths, torch.tensor([1.0, 3.0], dtype=torch.float64))
    assert weights.length_elasticity == pytest.approx(elasticity, abs=1e-12)
    assert weights.mode == mode


def test_seq_mean_token_mean_gives_every_trajectory_the_same_total():
    weights = aggregation_weights(MASK, "seq-mean-token-mean")
    assert_close(weights.trajectory_weights, torch.tensor([0.5, 0.5], dtype=torch.float64))


def test_fixed_length_can_be_given():
    weights = aggregation_weights(MASK, "dr-grpo", max_length=10)
    assert_close(weights.per_token_weight, torch.full((2,), 1 / 20, dtype=torch.float64))


def test_equal_lengths_have_no_elasticity():
    assert math.isnan(aggregation_weights(torch.ones(3, 2, dtype=torch.bool), "token-mean").length_elasticity)


def test_unknown_mode():
    with pytest.raises(EstimatorInputError, match="mode must be one of"):
        aggregation_weights(MASK, "sum")  # type: ignore[arg-type]

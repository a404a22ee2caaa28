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
    ("mode", "convention", "per_token", "elasticity"),
    [
        ("token-mean", "verl", [1 / 4, 1 / 4], 0.0),  # 1 / (1 + 3)
        ("token-sum", "verl", [1.0, 1.0], 0.0),  # no normaliser
        ("seq-mean-token-mean", "verl", [1 / 2, 1 / 6], -1.0),  # 1 / (B L_i) = 1/(2*1), 1/(2*3)
        ("seq-mean-token-sum", "verl", [1 / 2, 1 / 2], 0.0),  # 1 / B
        ("seq-mean-token-sum-norm", "verl", [1 / 8, 1 / 8], 0.0),  # 1 / (B L_max), L_max = T = 4
        ("seq-mean-token-sum-norm", "verl-0.7.0", [1 / 4, 1 / 4], 0.0),  # 1 / L_max
        ("dr-grpo", "verl", [1 / 8, 1 / 8], 0.0),  # 1 / (B L_max)
        ("luspo", "verl", [1 / 2, 1 / 2], 0.0),  # L_i / B per sequence, 1 / B per token
    ],
)
def test_weights_by_hand(mode, convention, per_token, elasticity):
    weights = aggregation_weights(MASK, mode, convention=convention)
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


@pytest.mark.parametrize("mode", ["token-mean", "token-sum", "seq-mean-token-mean", "seq-mean-token-sum",
                                  "seq-mean-token-sum-norm"])
def test_weights_reproduce_verl_agg_loss(mode):
    from trajlens.estimators.reference.verl import agg_loss_verl

    generator = torch.Generator().manual_seed(3)
    mask = torch.rand(6, 9, generator=generator) > 0.3
    mask[:, 0] = True
    loss = torch.randn(6, 9, generator=generator, dtype=torch.float64)
    weights = aggregation_weights(mask, mode)
    assert_close((weights.token_weights * loss).sum(), agg_loss_verl(loss, mask.double(), mode))


def test_luspo_weights_reproduce_trl_sequence_level_loss():
    from trajlens.estimators.reference.trl import luspo_loss_trl

    generator = torch.Generator().manual_seed(4)
    mask = torch.rand(5, 7, generator=generator) > 0.4
    mask[:, 0] = True
    sequence_loss = torch.randn(5, 1, generator=generator, dtype=torch.float64)  # sequence-level IS: (B, 1)
    weights = aggregation_weights(mask, "luspo")
    assert_close((weights.trajectory_weights * sequence_loss[:, 0]).sum(), luspo_loss_trl(sequence_loss, mask.double()))


def test_unknown_convention():
    with pytest.raises(EstimatorInputError, match="convention must be one of"):
        aggregation_weights(MASK, "token-mean", convention="verl-2024")

"""Loss aggregation weights: how much each token, and so each trajectory, counts in the loss.

A policy loss is ``sum_{i,t} w_{i,t} * loss_{i,t}``; the aggregation mode fixes ``w``. With an
outcome advantage A_i on every token of trajectory i, the trajectory's pull on the policy is
``A_i * sum_t w_{i,t}`` and each of its tokens is pushed by ``A_i * w_{i,t}``. Modes (names as
verl's ``agg_loss``; L_i model tokens of trajectory i, B trajectories, L_max a fixed length)::

    token-mean               w = m / sum(m)            every token equal (verl default, TRL "dapo")
    seq-mean-token-mean      w = m / (B * L_i)         GRPO as published (TRL "grpo"):
                                                       every trajectory equal, long ones diluted
    seq-mean-token-sum       w = m / B                 every token equal, per batch size
    seq-mean-token-sum-norm  w = m / L_max             verl's Dr.GRPO mode (no division by B)
    dr-grpo                  w = m / (B * L_max)       TRL ``loss_type="dr_grpo"``

Under seq-mean-token-mean a token of a long trajectory weighs 1/L_i: a wrong long answer is
punished less per token than a wrong short one, which lets responses grow (the Dr.GRPO paper's
length bias; the digest's GRPO run grew while per-token GAE did not).
:attr:`AggregationWeights.length_elasticity` measures it: the least-squares slope of
log(per-token weight) on log(length), -1 for seq-mean-token-mean and 0 for the others.

Matches verl ``agg_loss`` (``verl/trainer/ppo/core_algos.py``) and TRL ``GRPOTrainer`` loss
normalisers; departure: verl's multi-GPU global token counts are not modelled (one batch).

Shapes: B trajectories, T token positions.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import torch

from trajlens.estimators import _validate as check

AggregationMode = Literal[
    "token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm", "dr-grpo"
]
AGGREGATION_MODES: tuple[str, ...] = (
    "token-mean",
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
    "dr-grpo",
)


class AggregationWeights(NamedTuple):
    """Per-token loss weights of one aggregation mode, and what they imply per trajectory."""

    token_weights: torch.Tensor
    """(B, T) w_{i,t}; 0 on observation tokens."""
    trajectory_weights: torch.Tensor
    """(B,) sum_t w_{i,t}: the trajectory's total weight."""
    per_token_weight: torch.Tensor
    """(B,) weight of each model token of trajectory i."""
    lengths: torch.Tensor
    """(B,) model tokens per trajectory."""
    length_elasticity: float
    """Slope of log(per-token weight) on log(length); NaN when all lengths are equal."""
    mode: str


def aggregation_weights(
    response_mask: torch.Tensor, mode: AggregationMode = "token-mean", max_length: int | None = None
) -> AggregationWeights:
    """Per-token loss weights of ``mode`` for a batch with ``response_mask`` (B, T) bool.

    ``max_length`` is L_max of the fixed-length modes, ``T`` by default (verl uses the padded
    response length; TRL ``max_completion_length``).

    Reference: the normalisers of verl ``agg_loss`` and TRL ``GRPOTrainer`` loss types (see the
    module docstring); verl's cross-GPU global token counts are not modelled.
    """
    fn = "aggregation_weights"
    response_mask = check.bool_mask(fn, "response_mask", response_mask)
    check.nonempty_batch(fn, "response_mask", response_mask)
    check.rows_have_tokens(fn, "response_mask", response_mask)
    check.choice(fn, "mode", mode, AGGREGATION_MODES)
    batch, length = response_mask.shape
    fixed = float(length if max_length is None else check.positive(fn, "max_length", max_length))
    mask = response_mask.to(torch.float64)
    lengths = mask.sum(dim=1)
    if mode == "token-mean":
        per_token = torch.full_like(lengths, 1.0 / float(lengths.sum()))  # w = 1 / sum(m)
    elif mode == "seq-mean-token-mean":
        per_token = 1.0 / (batch * lengths)  # w = 1 / (B L_i)
    elif mode == "seq-mean-token-sum":
        per_token = torch.full_like(lengths, 1.0 / batch)  # w = 1 / B
    elif mode == "seq-mean-token-sum-norm":
        per_token = torch.full_like(lengths, 1.0 / fixed)  # w = 1 / L_max
    else:
        per_token = torch.full_like(lengths, 1.0 / (batch * fixed))  # w = 1 / (B L_max)
    token_weights = mask * per_token[:, None]
    return AggregationWeights(
        token_weights, token_weights.sum(dim=1), per_token, lengths, _elasticity(lengths, per_token), mode
    )


def _elasticity(lengths: torch.Tensor, per_token: torch.Tensor) -> float:
    x = lengths.log()
    y = per_token.log()
    x_centred = x - x.mean()
    denominator = float((x_centred**2).sum())
    if denominator <= 1e-24:
        return float("nan")
    return float((x_centred * (y - y.mean())).sum()) / denominator

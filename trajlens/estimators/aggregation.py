"""Loss aggregation weights: how much each token, and so each trajectory, counts in the loss.

A policy loss is ``sum_{i,t} w_{i,t} * loss_{i,t}``; the aggregation mode fixes ``w``. With an
outcome advantage A_i on every token of trajectory i, the trajectory's pull on the policy is
``A_i * sum_t w_{i,t}`` and each of its tokens is pushed by ``A_i * w_{i,t}``. Modes (names as
verl's ``agg_loss``, plus TRL's ``dr-grpo`` and ``luspo``; L_i model tokens of trajectory i,
B trajectories, L_max a fixed length)::

    token-mean               w = m / sum(m)            every token equal (verl default, TRL "dapo")
    token-sum                w = m                     verl >= 0.9.0: the plain sum, no normaliser
    seq-mean-token-mean      w = m / (B * L_i)         GRPO as published (TRL "grpo"):
                                                       every trajectory equal, long ones diluted
    seq-mean-token-sum       w = m / B                 every token equal, per batch size
    seq-mean-token-sum-norm  w = m / (B * L_max)       verl's Dr.GRPO mode, current (see below)
    dr-grpo                  w = m / (B * L_max)       TRL ``loss_type="dr_grpo"``
    luspo                    w = m / B                 TRL ``loss_type="luspo"``: each sequence's
                                                       loss times L_i, averaged over sequences

Versions. verl's ``seq-mean-token-sum-norm`` divides the summed loss by the number of sequences
and by ``loss_scale_factor`` (L_max by default) from verl 0.7.1 to 0.9.1
(``agg_loss`` in ``verl/trainer/ppo/core_algos.py``); verl 0.7.0 and earlier divided by L_max
only, ``w = m / L_max``. ``convention="verl-0.7.0"`` gives that earlier weight; the default is the
current one. TRL's ``luspo`` with sequence-level importance sampling (the setup it is meant
for) multiplies each sequence's loss by its length L_i and averages over the B sequences, so a
trajectory weighs L_i / B in total and each of its tokens 1 / B (as seq-mean-token-sum); older
TRL releases without a mask in that line also averaged padding positions under token-level
importance sampling, which is not modelled.

Under seq-mean-token-mean a token of a long trajectory weighs 1/L_i: a wrong long answer is
punished less per token than a wrong short one, which lets responses grow (the Dr.GRPO paper's
length bias; the digest's GRPO run grew while per-token GAE did not).
:attr:`AggregationWeights.length_elasticity` measures it: the least-squares slope of
log(per-token weight) on log(length), -1 for seq-mean-token-mean and 0 for the others.

Departure: verl's multi-GPU global token and sequence counts (``dp_size``,
``global_batch_size``) are not modelled (one batch).

Shapes: B trajectories, T token positions.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from trajlens.estimators import _validate as check
from trajlens.estimators.spec import AGGREGATION_MODES as AGGREGATION_MODES
from trajlens.estimators.spec import AggregationMode as AggregationMode

AGGREGATION_CONVENTIONS: tuple[str, ...] = ("verl", "verl-0.7.0")


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
    response_mask: torch.Tensor,
    mode: AggregationMode = "token-mean",
    max_length: int | None = None,
    convention: str = "verl",
) -> AggregationWeights:
    """Per-token loss weights of ``mode`` for a batch with ``response_mask`` (B, T) bool.

    ``max_length`` is L_max of the fixed-length modes, ``T`` by default (verl uses the padded
    response length or ``loss_scale_factor``; TRL ``max_completion_length``). ``convention``
    matters for ``seq-mean-token-sum-norm`` only: ``"verl"`` (current, 1 / (B L_max)) or
    ``"verl-0.7.0"`` (1 / L_max, verl 0.7.0 and earlier).

    Reference: the normalisers of verl ``agg_loss`` (verl 0.9.0) and TRL
    ``GRPOTrainer`` loss types (see the module docstring); cross-GPU counts are not modelled.
    """
    fn = "aggregation_weights"
    response_mask = check.bool_mask(fn, "response_mask", response_mask)
    check.nonempty_batch(fn, "response_mask", response_mask)
    check.rows_have_tokens(fn, "response_mask", response_mask)
    check.choice(fn, "mode", mode, AGGREGATION_MODES)
    check.choice(fn, "convention", convention, AGGREGATION_CONVENTIONS)
    batch, length = response_mask.shape
    fixed = float(length if max_length is None else check.positive(fn, "max_length", max_length))
    mask = response_mask.to(torch.float64)
    lengths = mask.sum(dim=1)
    if mode == "token-mean":
        per_token = torch.full_like(lengths, 1.0 / float(lengths.sum()))  # w = 1 / sum(m)
    elif mode == "seq-mean-token-mean":
        per_token = 1.0 / (batch * lengths)  # w = 1 / (B L_i)
    elif mode == "token-sum":
        per_token = torch.ones_like(lengths)  # w = 1
    elif mode in ("seq-mean-token-sum", "luspo"):
        per_token = torch.full_like(lengths, 1.0 / batch)  # w = 1 / B (luspo: L_i / B per sequence)
    elif mode == "seq-mean-token-sum-norm" and convention == "verl-0.7.0":
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

"""TRL's advantage arithmetic, shared by every estimator's TRL convention.

TRL computes advantages inline in ``GRPOTrainer._generate_and_score_completions``
(``trl/trainer/grpo_trainer.py``) and ``RLOOTrainer`` (``trl/trainer/rloo_trainer.py``); these
functions are those lines, operation for operation, over groups of any size and order (TRL's are
contiguous blocks of ``num_generations``). Read from trl 1.5.0, 1.6.0 and 1.16.0:

* ``convention="trl"`` (trl >= 1.6, unchanged to 1.16.0): a completion whose every reward is NaN
  (``unscorable_mask``: every reward function returned None) is NaN in the summed reward, so
  ``nanmean`` and :func:`trl_nanstd` leave it out of the group and batch statistics, and
  ``nan_to_num`` gives it advantage 0; so does any completion whose statistics are NaN (the one
  scorable member of a group under RLOO or a group std, a batch of one under RLOO's
  ``normalize_advantages``).
* ``convention="trl-1.5"`` (trl <= 1.5): ``nansum`` makes such a completion's reward 0 and it
  counts; statistics by ``mean`` and ``Tensor.std``, and a NaN statistic stays NaN.

TRL computes in float32 whatever it is given: rewards, ``reward_weights`` and every statistic.
So do these functions (:func:`trl_weighted_sum` and :func:`trl_scores` return float32, and the
callers cast the advantages back to their inputs' dtype), so a tie that float32 rounding breaks
(channel rewards 0, 2, 0 and 1, 0, 1 under weights 0.3, 0.7, 1.1 both sum to 1.4, but not in
float32; TRL's eps 1e-4 turns the gap into advantages near 1e-3) is broken exactly as TRL
breaks it, for float64 inputs too. A group of one gets 0 (its mean is its score; TRL's
``num_generations == 1`` branches).

Shapes: B completions, K reward functions.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import torch

from trajlens.estimators._groups import GroupIndex
from trajlens.estimators.epsilons import TRL_EPS

TRLConvention = Literal["trl", "trl-1.5"]
TRL_CONVENTIONS: tuple[str, ...] = ("trl", "trl-1.5")
ScaleRewards = Literal["group", "batch", "none"]


class TRLAdvantages(NamedTuple):
    """TRL's advantages of B completions and what went into them, each (B,)."""

    advantages: torch.Tensor
    baseline: torch.Tensor
    """What was subtracted: the group mean, or the leave-one-out mean (NaN where TRL's is)."""
    scale: torch.Tensor
    """What the difference was divided by (std + eps), 1 where nothing was."""


def trl_nanstd(values: torch.Tensor, dim: int | None) -> torch.Tensor:
    """TRL ``nanstd(values, dim, keepdim=True)`` (``dim=None``: over everything, a 0-d tensor):
    the Bessel-corrected std ignoring NaN, NaN with fewer than two values. The correction
    ``count / (count - 1)`` is float32, as in TRL."""
    if dim is None:
        mean = torch.nanmean(values)
        variance = torch.nanmean((values - mean) ** 2)
        count = torch.sum(~torch.isnan(values))
    else:
        mean = torch.nanmean(values, dim=dim, keepdim=True)
        variance = torch.nanmean((values - mean) ** 2, dim=dim, keepdim=True)
        count = torch.sum(~torch.isnan(values), dim=dim, keepdim=True)
    correction = count / (count - 1)  # Bessel's correction
    correction = torch.where(count > 1, correction, torch.full_like(correction, float("nan")))
    variance = variance * correction
    return torch.sqrt(variance)


def trl_weighted_sum(channel_rewards: torch.Tensor, weights: torch.Tensor, convention: TRLConvention) -> torch.Tensor:
    """TRL's reward ``R_i = nansum_k w_k r^k_i``, (B,) float32 as TRL's; NaN where every r^k_i is
    NaN under ``convention="trl"`` (unscorable), 0 under ``"trl-1.5"``."""
    rewards = channel_rewards.to(torch.float32)
    summed = (rewards * weights.to(torch.float32)[None, :]).nansum(dim=1)  # R_i = sum_k w_k r^k_i
    if convention == "trl":
        summed[torch.isnan(rewards).all(dim=1)] = float("nan")  # unscorable: out of the statistics
    return summed


def trl_scores(scores: torch.Tensor, convention: TRLConvention) -> torch.Tensor:
    """One reward function's scores as TRL holds them: float32 (times the float32 weight 1.0,
    which changes no value), NaN kept (``"trl"``, unscorable) or 0 (``"trl-1.5"``, ``nansum``)."""
    rewards = scores.to(torch.float32)
    return rewards.clone() if convention == "trl" else torch.where(torch.isnan(rewards), 0.0, rewards)


def trl_group_advantages(
    rewards: torch.Tensor, groups: GroupIndex, scale_rewards: ScaleRewards, convention: TRLConvention,
    epsilon: float = TRL_EPS,
) -> TRLAdvantages:
    """TRL ``GRPOTrainer``'s ``sum_then_normalize`` advantages of summed ``rewards`` (B,):
    ``(R_i - mean_g) / (std + eps)``, the std of the group (``"group"``) or of the batch
    (``"batch"``), or ``R_i - mean_g`` (``"none"``)."""
    nan_aware = convention == "trl"
    mean = torch.empty_like(rewards)
    std = torch.zeros_like(rewards)
    for bucket in groups.buckets:
        grouped = rewards[bucket.members]  # (G_n, n) as TRL's view(-1, n)
        mean[bucket.members] = (torch.nanmean(grouped, dim=1, keepdim=True) if nan_aware
                                else grouped.mean(dim=1, keepdim=True)).expand_as(grouped)
        if bucket.size > 1:  # TRL: num_generations == 1 -> std 0
            std[bucket.members] = (trl_nanstd(grouped, dim=1) if nan_aware
                                   else grouped.std(dim=1, keepdim=True)).expand_as(grouped)
    if scale_rewards == "batch":
        if rewards.numel() > 1:
            std = (trl_nanstd(rewards, dim=None) if nan_aware else rewards.std()).expand_as(rewards)
        else:
            std = torch.zeros_like(rewards)
    advantages = rewards - mean
    scale = torch.ones_like(rewards)
    if scale_rewards != "none":
        scale = std + epsilon
        advantages = advantages / scale  # A_i = (R_i - mu_g) / (sigma + eps)
    if nan_aware:
        advantages = torch.nan_to_num(advantages, nan=0.0)  # unscorable completions get advantage 0
    return TRLAdvantages(advantages, mean, scale)


def trl_rloo_advantages(
    rewards: torch.Tensor, groups: GroupIndex, normalize_advantages: bool, convention: TRLConvention
) -> TRLAdvantages:
    """TRL ``RLOOTrainer``'s advantages of summed ``rewards`` (B,): ``R_i - mean of the other
    (scorable) members``, a group of one 0, then with ``normalize_advantages`` a batch z-score
    ``(A - mean) / (std + 1e-4)``."""
    nan_aware = convention == "trl"
    advantages = torch.zeros_like(rewards)
    baseline = torch.zeros_like(rewards)
    for bucket in groups.buckets:
        if bucket.size == 1:
            continue  # TRL: num_generations == 1 gives advantage 0
        grouped = rewards[bucket.members]  # (G_n, n) as TRL's view(-1, n)
        if nan_aware:
            scorable = (~torch.isnan(grouped)).sum(dim=1, keepdim=True)
            others = (torch.nansum(grouped, dim=1, keepdim=True) - grouped) / (scorable - 1)  # NaN alone
        else:
            others = (grouped.sum(dim=1, keepdim=True) - grouped) / (bucket.size - 1)  # (sum_g - R_i) / (n - 1)
        baseline[bucket.members] = others
        advantages[bucket.members] = grouped - others
    scale = torch.ones_like(rewards)
    if normalize_advantages:
        if nan_aware:
            spread = trl_nanstd(advantages, dim=None) + TRL_EPS
            advantages = (advantages - torch.nanmean(advantages)) / spread  # over the scorable subset
        else:
            spread = advantages.std() + TRL_EPS
            advantages = (advantages - advantages.mean()) / spread  # A' = (A - mean A) / (std A + 1e-4)
        scale = scale * spread
    if nan_aware:
        advantages = torch.nan_to_num(advantages, nan=0.0)  # unscorable completions carry no signal
    return TRLAdvantages(advantages, baseline, scale)

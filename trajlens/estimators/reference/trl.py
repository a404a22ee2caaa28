"""TRL's advantage code as written inline in its trainers, transcribed.

TRL computes advantages inside its trainers rather than in functions one could call, so these
are the lines of those methods, in order, over contiguous groups of ``num_generations``:

- ``GRPOTrainer._generate_and_score_completions`` (``trl/trainer/grpo_trainer.py``) with
  ``multi_objective_aggregation`` ``"normalize_then_sum"`` (:func:`gdpo_trl_loop`) and
  ``"sum_then_normalize"`` (:func:`trl_sum_then_normalize`) as TRL wrote them before v1.6, and
  from v1.6 on, where a completion whose every reward is NaN (``unscorable_mask``) is left out of
  the statistics and gets advantage 0 (:func:`gdpo_trl_loop_v16`,
  :func:`trl_sum_then_normalize_v16`);
- ``nanstd`` from ``trl/trainer/utils.py`` (:func:`trl_nanstd`, and :func:`trl_nanstd_all`
  for its call with no ``dim``);
- ``RLOOTrainer`` (``trl/trainer/rloo_trainer.py``), the advantages from summed rewards, as
  trl 1.5.0 wrote them (:func:`rloo_trl_loop`) and from 1.6.0 to 1.16.0, with unscorable
  completions left out of the leave-one-out baseline and given 0 (:func:`rloo_trl_loop_v16`);
- ``GRPOTrainer``'s loss with ``loss_type="luspo"`` (:func:`luspo_loss_trl`).

Departures: rewards arrive as one (B, K) tensor (``rewards_per_func``) on one process, so TRL's
gather across processes and its slice back to the local completions are left out.

Notation: B completions, K reward functions, G = ``num_generations``.
"""

from __future__ import annotations

import torch


def trl_nanstd(tensor: torch.Tensor, dim: int, keepdim: bool) -> torch.Tensor:
    """TRL ``nanstd(tensor, dim, keepdim)``: the unbiased std ignoring NaN; NaN under two values."""
    mean = torch.nanmean(tensor, dim=dim, keepdim=True)
    variance = torch.nanmean((tensor - mean) ** 2, dim=dim, keepdim=True)
    count = torch.sum(~torch.isnan(tensor), dim=dim, keepdim=True)
    correction = count / (count - 1)  # Bessel's correction
    correction = torch.where(count > 1, correction, torch.full_like(correction, float("nan")))
    variance *= correction
    std = torch.sqrt(variance)
    return std if keepdim else std.squeeze(dim)


def trl_nanstd_all(tensor: torch.Tensor) -> torch.Tensor:
    """TRL ``nanstd(tensor)`` with no dim: over every element; NaN under two values."""
    mean = torch.nanmean(tensor)
    variance = torch.nanmean((tensor - mean) ** 2)
    count = torch.sum(~torch.isnan(tensor))
    correction = count / (count - 1)
    correction = torch.where(count > 1, correction, torch.full_like(correction, float("nan")))
    variance *= correction
    return torch.sqrt(variance)


def gdpo_trl_loop(rewards_per_func: torch.Tensor, num_generations: int, reward_weights: torch.Tensor) -> torch.Tensor:
    """TRL GRPOTrainer before v1.6, ``multi_objective_aggregation="normalize_then_sum"``; (B,) advantages."""
    k = rewards_per_func.shape[1]
    grouped = rewards_per_func.view(-1, num_generations, k)
    mean_k = torch.nanmean(grouped, dim=1, keepdim=True)
    std_k = trl_nanstd(grouped, dim=1, keepdim=True) if num_generations > 1 else torch.zeros_like(mean_k)
    reward_k = (grouped - mean_k) / (std_k + 1e-4)  # z-score per channel within the group
    reward_k = reward_k.view(-1, k)
    rewards = (reward_k * reward_weights.unsqueeze(0)).nansum(dim=1)
    std_rewards = rewards.std().expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    return (rewards - rewards.mean()) / (std_rewards + 1e-4)  # z-score over the batch


def trl_sum_then_normalize(
    rewards_per_func: torch.Tensor, num_generations: int, reward_weights: torch.Tensor, scale_rewards: str = "group"
) -> torch.Tensor:
    """TRL GRPOTrainer before v1.6, ``multi_objective_aggregation="sum_then_normalize"``; (B,) advantages."""
    rewards = (rewards_per_func * reward_weights.unsqueeze(0)).nansum(dim=1)
    mean_grouped_rewards = rewards.view(-1, num_generations).mean(dim=1)
    mean_grouped_rewards = mean_grouped_rewards.repeat_interleave(num_generations, dim=0)
    if scale_rewards == "group":
        if num_generations > 1:
            std_rewards = rewards.view(-1, num_generations).std(dim=1)
            std_rewards = std_rewards.repeat_interleave(num_generations, dim=0)
        else:
            std_rewards = torch.zeros_like(rewards)
    else:
        std_rewards = rewards.std().expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    return (rewards - mean_grouped_rewards) / (std_rewards + 1e-4)


def gdpo_trl_loop_v16(rewards_per_func: torch.Tensor, num_generations: int, reward_weights: torch.Tensor) -> torch.Tensor:
    """TRL GRPOTrainer v1.6, ``normalize_then_sum``, unscorable completions (every reward NaN) masked."""
    unscorable_mask = torch.isnan(rewards_per_func).all(dim=1)
    k = rewards_per_func.shape[1]
    grouped = rewards_per_func.view(-1, num_generations, k)
    mean_k = torch.nanmean(grouped, dim=1, keepdim=True)
    std_k = trl_nanstd(grouped, dim=1, keepdim=True) if num_generations > 1 else torch.zeros_like(mean_k)
    reward_k = (grouped - mean_k) / (std_k + 1e-4)
    reward_k = reward_k.view(-1, k)
    rewards = (reward_k * reward_weights.unsqueeze(0)).nansum(dim=1)
    rewards[unscorable_mask] = torch.nan
    std_rewards = trl_nanstd_all(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    advantages = (rewards - torch.nanmean(rewards)) / (std_rewards + 1e-4)
    return torch.nan_to_num(advantages, nan=0.0)


def trl_sum_then_normalize_v16(
    rewards_per_func: torch.Tensor, num_generations: int, reward_weights: torch.Tensor, scale_rewards: str = "group"
) -> torch.Tensor:
    """TRL GRPOTrainer v1.6, ``sum_then_normalize``, unscorable completions masked."""
    unscorable_mask = torch.isnan(rewards_per_func).all(dim=1)
    rewards = (rewards_per_func * reward_weights.unsqueeze(0)).nansum(dim=1)
    rewards[unscorable_mask] = torch.nan
    mean_grouped_rewards = torch.nanmean(rewards.view(-1, num_generations), dim=1)
    mean_grouped_rewards = mean_grouped_rewards.repeat_interleave(num_generations, dim=0)
    if scale_rewards in ["group", "none"]:
        if num_generations > 1:
            std_rewards = trl_nanstd(rewards.view(-1, num_generations), dim=1, keepdim=False)
            std_rewards = std_rewards.repeat_interleave(num_generations, dim=0)
        else:
            std_rewards = torch.zeros_like(rewards)
    else:
        std_rewards = trl_nanstd_all(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    advantages = rewards - mean_grouped_rewards
    if scale_rewards != "none":
        advantages = advantages / (std_rewards + 1e-4)
    return torch.nan_to_num(advantages, nan=0.0)


def rloo_trl_loop_v16(rewards: torch.Tensor, num_generations: int, normalize_advantages: bool) -> torch.Tensor:
    """TRL RLOOTrainer, trl 1.6.0 to 1.16.0: the leave-one-out baseline over scorable siblings
    (NaN rewards are unscorable), a NaN advantage (unscorable, or a group's one scorable member) 0."""
    grouped_rewards = rewards.view(-1, num_generations)
    scorable_counts = (~torch.isnan(grouped_rewards)).sum(dim=1, keepdim=True)
    grouped_sum = torch.nansum(grouped_rewards, dim=1, keepdim=True)
    if num_generations > 1:
        baselines = (grouped_sum - grouped_rewards) / (scorable_counts - 1)
        baselines = baselines.view(-1)
        advantages = rewards - baselines
    else:
        advantages = torch.zeros_like(rewards)
    if normalize_advantages:
        advantages = (advantages - torch.nanmean(advantages)) / (trl_nanstd_all(advantages) + 1e-4)
    return torch.nan_to_num(advantages, nan=0.0)


def rloo_trl_loop(rewards: torch.Tensor, num_generations: int, normalize_advantages: bool) -> torch.Tensor:
    """TRL RLOOTrainer, trl 1.5.0: score - mean of the others; a group of one gets 0."""
    grouped_rewards = rewards.view(-1, num_generations)
    grouped_sum = grouped_rewards.sum(dim=1, keepdim=True)
    if num_generations > 1:
        baselines = (grouped_sum - grouped_rewards) / (num_generations - 1)
        baselines = baselines.view(-1)
        advantages = rewards - baselines
    else:
        advantages = torch.zeros_like(rewards)
    if normalize_advantages:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-4)
    return advantages


def luspo_loss_trl(per_token_loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """TRL GRPOTrainer ``loss_type="luspo"``: (per_token_loss * mask).sum(-1).mean()."""
    return (per_token_loss * mask).sum(-1).mean()

"""Slow, obviously-correct loop references, written the way the reference trainers write them.

Each is a transcription of the trainer's own loop (verl ``core_algos.py`` and
``torch_functional.py``, TRL ``GRPOTrainer``), kept here so the fast kernels can be checked
against it on random inputs. Nothing here is fast, and nothing here is imported by trajlens.
"""

from __future__ import annotations

from collections import defaultdict

import torch


def gae_loop(token_rewards, values, response_mask, gamma, lam):
    """verl compute_gae_advantage_return, loop over time, without the final whitening."""
    mask = response_mask.to(values.dtype)
    nextvalues = 0
    lastgaelam = 0
    advantages_reversed = []
    for t in reversed(range(token_rewards.shape[-1])):
        delta = token_rewards[:, t] + gamma * nextvalues - values[:, t]
        lastgaelam_ = delta + gamma * lam * lastgaelam
        # skip values and TD-error on observation tokens
        nextvalues = values[:, t] * mask[:, t] + (1 - mask[:, t]) * nextvalues
        lastgaelam = lastgaelam_ * mask[:, t] + (1 - mask[:, t]) * lastgaelam
        advantages_reversed.append(lastgaelam)
    advantages = torch.stack(advantages_reversed[::-1], dim=1)
    return advantages, advantages + values


def returns_loop(token_rewards, response_mask, gamma):
    """Discounted return-to-go over model tokens, observation tokens carried, by a loop."""
    out = torch.zeros_like(token_rewards)
    running = torch.zeros(token_rewards.shape[0], dtype=token_rewards.dtype)
    for t in reversed(range(token_rewards.shape[1])):
        updated = token_rewards[:, t] + gamma * running
        running = torch.where(response_mask[:, t], updated, running)
        out[:, t] = running
    return out


def masked_mean(values, mask):
    valid_values = torch.where(mask.bool(), values, 0.0)
    return (valid_values * mask).sum() / (mask.sum() + 1e-8)


def masked_whiten(values, mask):
    """verl masked_whiten with masked_var(unbiased=True)."""
    mean = masked_mean(values, mask)
    centered_values = values - mean
    variance = masked_mean(centered_values**2, mask)
    mask_sum = mask.sum()
    variance = variance * (mask_sum / (mask_sum - 1))
    return (values - mean) * torch.rsqrt(variance + 1e-8)


def grpo_loop(token_rewards, response_mask, index, epsilon=1e-6, norm_adv_by_std_in_grpo=True):
    """verl compute_grpo_outcome_advantage (loop version)."""
    scores = token_rewards.sum(dim=-1)
    id2score = defaultdict(list)
    id2mean, id2std = {}, {}
    bsz = scores.shape[0]
    for i in range(bsz):
        id2score[index[i]].append(scores[i])
    for idx in id2score:
        if len(id2score[idx]) == 1:
            id2mean[idx] = torch.tensor(0.0)
            id2std[idx] = torch.tensor(1.0)
        else:
            scores_tensor = torch.stack(id2score[idx])
            id2mean[idx] = torch.mean(scores_tensor)
            id2std[idx] = torch.std(scores_tensor)
    for i in range(bsz):
        if norm_adv_by_std_in_grpo:
            scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
        else:
            scores[i] = scores[i] - id2mean[index[i]]
    return scores.unsqueeze(-1) * response_mask


def rloo_loop(token_rewards, response_mask, index):
    """verl compute_rloo_outcome_advantage."""
    scores = token_rewards.sum(dim=-1)
    id2score = defaultdict(list)
    id2mean = {}
    bsz = scores.shape[0]
    for i in range(bsz):
        id2score[index[i]].append(scores[i])
    for idx in id2score:
        if len(id2score[idx]) == 1:
            id2mean[idx] = torch.tensor(0.0)
        else:
            id2mean[idx] = torch.mean(torch.stack(id2score[idx]))
    for i in range(bsz):
        response_num = len(id2score[index[i]])
        if response_num > 1:
            scores[i] = scores[i] * response_num / (response_num - 1) - id2mean[index[i]] * response_num / (
                response_num - 1
            )
    return scores.unsqueeze(-1) * response_mask


def gdpo_verl_loop(channel_scores, response_mask, index, weights):
    """verl GDPO: per-channel GRPO on token-level scores at the last model token, fuse, whiten."""
    bsz, length = response_mask.shape
    last = length - 1 - response_mask.flip(1).int().argmax(dim=1)
    new_advantage = None
    for k in range(channel_scores.shape[1]):
        token_scores = torch.zeros(bsz, length, dtype=torch.float32)
        token_scores[torch.arange(bsz), last] = channel_scores[:, k]
        normalized = grpo_loop(token_scores, response_mask, index)
        if new_advantage is None:
            new_advantage = weights[k] * normalized
        else:
            new_advantage += weights[k] * normalized
    return masked_whiten(new_advantage, response_mask) * response_mask


def trl_nanstd(tensor, dim, keepdim):
    mean = torch.nanmean(tensor, dim=dim, keepdim=True)
    variance = torch.nanmean((tensor - mean) ** 2, dim=dim, keepdim=True)
    count = torch.sum(~torch.isnan(tensor), dim=dim, keepdim=True)
    correction = count / (count - 1)
    correction = torch.where(count > 1, correction, torch.full_like(correction, float("nan")))
    variance *= correction
    std = torch.sqrt(variance)
    return std if keepdim else std.squeeze(dim)


def gdpo_trl_loop(rewards_per_func, num_generations, reward_weights):
    """TRL GRPOTrainer, multi_objective_aggregation == "normalize_then_sum" (contiguous groups)."""
    k = rewards_per_func.shape[1]
    grouped = rewards_per_func.view(-1, num_generations, k)
    mean_k = torch.nanmean(grouped, dim=1, keepdim=True)
    std_k = trl_nanstd(grouped, dim=1, keepdim=True) if num_generations > 1 else torch.zeros_like(mean_k)
    reward_k = (grouped - mean_k) / (std_k + 1e-4)
    reward_k = reward_k.view(-1, k)
    rewards = (reward_k * reward_weights.unsqueeze(0)).nansum(dim=1)
    std_rewards = rewards.std().expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    return (rewards - rewards.mean()) / (std_rewards + 1e-4)


def trl_sum_then_normalize(rewards_per_func, num_generations, reward_weights, scale_rewards="group"):
    """TRL GRPOTrainer, multi_objective_aggregation == "sum_then_normalize"."""
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

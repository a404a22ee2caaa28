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
    """TRL GRPOTrainer before v1.6, multi_objective_aggregation == "normalize_then_sum" (contiguous groups)."""
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
    """TRL GRPOTrainer before v1.6, multi_objective_aggregation == "sum_then_normalize"."""
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


def gdpo_trl_loop_v16(rewards_per_func, num_generations, reward_weights):
    """TRL GRPOTrainer v1.6, normalize_then_sum, with unscorable completions (every reward NaN) masked."""
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


def trl_sum_then_normalize_v16(rewards_per_func, num_generations, reward_weights, scale_rewards="group"):
    """TRL GRPOTrainer v1.6, sum_then_normalize, with unscorable completions masked."""
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


def trl_nanstd_all(tensor):
    """TRL nanstd(tensor) with no dim: over every element."""
    mean = torch.nanmean(tensor)
    variance = torch.nanmean((tensor - mean) ** 2)
    count = torch.sum(~torch.isnan(tensor))
    variance *= count / (count - 1)
    return torch.sqrt(variance)


def rloo_trl_loop(rewards, num_generations, normalize_advantages):
    """TRL RLOOTrainer (huggingface/trl@00313f2) advantages from summed rewards, contiguous groups."""
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


def agg_loss_verl(loss_mat, loss_mask, loss_agg_mode):
    """verl agg_loss at verl-project/verl@018f23b (one process: dp_size 1, counts from the batch)."""
    if loss_agg_mode == "token-mean":
        loss = (loss_mat * loss_mask).sum() / loss_mask.sum()
    elif loss_agg_mode == "token-sum":
        loss = (loss_mat * loss_mask).sum()
    elif loss_agg_mode in ["seq-mean-token-sum", "seq-mean-token-sum-norm"]:
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1)
        seq_mask = (torch.sum(loss_mask, dim=-1) > 0).float()
        global_batch_size = seq_mask.sum()
        loss = (seq_losses * seq_mask).sum() / global_batch_size
        if loss_agg_mode == "seq-mean-token-sum-norm":
            loss /= loss_mask.shape[-1]
    elif loss_agg_mode == "seq-mean-token-mean":
        seq_mask = torch.sum(loss_mask, dim=-1)
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1) / (seq_mask + 1e-8)
        seq_mask = (seq_mask > 0).float()
        loss = (seq_losses * seq_mask).sum() / seq_mask.sum()
    else:
        raise ValueError(loss_agg_mode)
    return loss


def luspo_loss_trl(per_token_loss, mask):
    """TRL GRPOTrainer loss_type="luspo": (per_token_loss * mask).sum(-1).mean()."""
    return (per_token_loss * mask).sum(-1).mean()


# verl-project/verl@018f23b, verl/trainer/ppo/core_algos.py, transcribed


def reinforce_plus_plus_loop(token_level_rewards, response_mask, gamma):
    """compute_reinforce_plus_plus_outcome_advantage."""
    returns = torch.zeros_like(token_level_rewards)
    running_return = 0
    for t in reversed(range(token_level_rewards.shape[1])):
        running_return = token_level_rewards[:, t] + gamma * running_return
        returns[:, t] = running_return
        running_return = running_return * response_mask[:, t]
    advantages = masked_whiten(returns, response_mask)
    return advantages * response_mask, returns


def reinforce_plus_plus_baseline_loop(token_level_rewards, response_mask, index):
    """compute_reinforce_plus_plus_baseline_outcome_advantage."""
    response_length = token_level_rewards.shape[-1]
    scores = token_level_rewards.sum(dim=-1)
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
        scores[i] = scores[i] - id2mean[index[i]]
    scores = scores.unsqueeze(-1).tile([1, response_length]) * response_mask
    return masked_whiten(scores, response_mask) * response_mask


def grpo_passk_loop(token_level_rewards, response_mask, index, epsilon=1e-6, norm_adv_by_std_in_grpo=True):
    """compute_grpo_passk_outcome_advantage."""
    scores = token_level_rewards.sum(dim=-1)
    advantages = torch.zeros_like(scores)
    id2scores = defaultdict(list)
    id2indices = defaultdict(list)
    for i in range(scores.shape[0]):
        id2scores[index[i]].append(scores[i])
        id2indices[index[i]].append(i)
    for idx in id2scores:
        rewards = torch.stack(id2scores[idx])
        topk, topk_idx = torch.topk(rewards, 2)
        r_max, r_second_max = topk[0], topk[1]
        i_max = id2indices[idx][topk_idx[0].item()]
        advantage = r_max - r_second_max
        if norm_adv_by_std_in_grpo:
            std = torch.std(rewards)
            advantage = advantage / (std + epsilon)
        advantages[i_max] = advantage
    return advantages.unsqueeze(-1) * response_mask


def opo_loop(token_level_rewards, response_mask, index):
    """compute_opo_outcome_advantage."""
    response_length = response_mask.sum(dim=-1)
    scores = token_level_rewards.sum(dim=-1)
    id2score = defaultdict(list)
    id2len = defaultdict(list)
    id2bsl = {}
    for i in range(scores.shape[0]):
        id2score[index[i]].append(scores[i])
        id2len[index[i]].append(response_length[i])
    for idx in id2score:
        if len(id2score[idx]) == 1:
            id2bsl[idx] = torch.tensor(0.0)
        else:
            score_tensor = torch.stack(id2score[idx])
            len_tensor = torch.stack(id2len[idx])
            id2bsl[idx] = (len_tensor * score_tensor).sum() / len_tensor.sum()
    for i in range(scores.shape[0]):
        scores[i] = scores[i] - id2bsl[index[i]]
    return scores.unsqueeze(-1) * response_mask


def gpg_loop(token_level_rewards, response_mask, index, f_norm=1.0):
    """compute_gpg_outcome_advantage."""
    scores = token_level_rewards.sum(dim=-1)
    id2score = defaultdict(list)
    id2mean = {}
    bsz = scores.shape[0]
    m = torch.count_nonzero(scores)
    alpha = bsz / m.clamp(min=1)
    for i in range(bsz):
        id2score[index[i]].append(scores[i])
    for idx in id2score:
        if len(id2score[idx]) == 1:
            id2mean[idx] = torch.tensor(0.0)
        else:
            id2mean[idx] = torch.mean(torch.stack(id2score[idx]))
    for i in range(bsz):
        scores[i] = alpha * (scores[i] - id2mean[index[i]]) / (f_norm)
    return scores.unsqueeze(-1) * response_mask


def remax_loop(token_level_rewards, reward_baselines, response_mask):
    """compute_remax_outcome_advantage."""
    returns = (token_level_rewards * response_mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])
    return returns - reward_baselines.unsqueeze(-1) * response_mask, returns


def otb_loop(token_level_rewards, response_mask, index, old_log_probs, sum_pi_squared, handle_zero_tail=True,
             epsilon=1e-8):
    """compute_optimal_token_baseline_advantage (no rollout IS weights)."""
    batch_size, _ = token_level_rewards.shape
    returns = (token_level_rewards * response_mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])
    pi_t = torch.exp(old_log_probs)
    w_per_timestep = 1 - 2 * pi_t + sum_pi_squared
    w_cumulative = (w_per_timestep * response_mask).cumsum(dim=-1)
    prompt_groups = defaultdict(list)
    for i in range(batch_size):
        prompt_groups[index[i]].append(i)
    baselines = torch.zeros_like(returns)
    for _, trajectory_indices in prompt_groups.items():
        N = len(trajectory_indices)
        if N == 1:
            continue
        traj_idx = torch.tensor(trajectory_indices)
        returns_group = returns[traj_idx]
        w_cumulative_group = w_cumulative[traj_idx]
        mask_group = response_mask[traj_idx]
        numerator = (returns_group * w_cumulative_group * mask_group).sum(dim=0)
        denominator = (w_cumulative_group * mask_group).sum(dim=0) + epsilon
        baseline_per_step = numerator / denominator
        baselines[traj_idx] = baseline_per_step.unsqueeze(0).expand(N, -1)
        if handle_zero_tail:
            response_lengths = mask_group.sum(dim=-1)
            sorted_lengths, _ = torch.sort(response_lengths)
            max_length = int(sorted_lengths[-1].item())
            second_max_length = int(sorted_lengths[-2].item())
            max_length_idx = (response_lengths == max_length).nonzero(as_tuple=True)[0]
            if max_length_idx.numel() == 1 and max_length > second_max_length:
                max_length_traj_idx = trajectory_indices[int(max_length_idx[0])]
                baselines[max_length_traj_idx, second_max_length:] = 0.0
    return (returns - baselines) * response_mask


def tir_otb_loop(token_level_rewards, response_mask, index, old_log_probs, sum_pi_squared, handle_zero_tail=True,
                 epsilon=1e-8):
    """compute_multi_turn_optimal_token_baseline_advantage (no rollout IS weights)."""
    token_returns = (token_level_rewards * response_mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])
    pi_t = torch.exp(old_log_probs)
    w_per_timestep = 1 - 2 * pi_t + sum_pi_squared
    w_cumulative = (w_per_timestep * response_mask).cumsum(dim=-1)
    response_lengths = response_mask.sum(dim=-1).to(dtype=torch.long)
    max_response_length = int(response_lengths.max().item())
    all_w_values = w_cumulative.new_zeros((len(response_lengths), max_response_length))
    all_returns = torch.zeros_like(all_w_values)
    for i in range(len(response_lengths)):
        length = int(response_lengths[i].item())
        mask = response_mask[i].bool()
        all_w_values[i, :length] = w_cumulative[i, mask]
        all_returns[i, :length] = token_returns[i, mask]
    prompt_groups = defaultdict(list)
    for i in range(len(response_lengths)):
        prompt_groups[index[i]].append(i)
    baselines = torch.zeros_like(all_returns)
    for _, trajectory_indices in prompt_groups.items():
        N = len(trajectory_indices)
        traj_idx = torch.tensor(trajectory_indices)
        if N == 1:
            baselines[traj_idx[0]] = 0.0
            continue
        w_group = all_w_values[traj_idx]
        R_group = all_returns[traj_idx]
        b_star = (R_group * w_group).sum(dim=0) / (w_group.sum(dim=0) + epsilon)
        baselines[traj_idx] = b_star.to(baselines.dtype)
        if handle_zero_tail:
            response_lengths_group = response_lengths[traj_idx]
            sorted_lengths, _ = torch.sort(response_lengths_group)
            max_length = int(sorted_lengths[-1].item())
            second_max_length = int(sorted_lengths[-2].item())
            max_length_idx = (response_lengths_group == max_length).nonzero(as_tuple=True)[0]
            if max_length_idx.numel() == 1 and max_length > second_max_length:
                max_length_traj_idx = trajectory_indices[int(max_length_idx[0])]
                baselines[max_length_traj_idx, second_max_length:] = 0.0
    all_advantages = all_returns - baselines
    advantages = torch.zeros_like(token_returns)
    for i in range(len(response_lengths)):
        advantages[i, response_mask[i].bool()] = all_advantages[i, : response_lengths[i]]
    return advantages * response_mask

"""verl's estimators as loops, transcribed from verl's own code.

Source: verl v0.9.0, ``verl/trainer/ppo/core_algos.py`` (the advantage estimators and
``agg_loss``) and ``verl/utils/torch_functional.py`` (``masked_mean``, ``masked_whiten``), and
verl 0.8.0 for :func:`reinforce_plus_plus_reset_loop` (below). Each function names the verl function it transcribes;
the loops, the order of operations and the epsilons are verl's, so a fast kernel that matches
verl to rounding matches these to rounding.

Departures, shared by all: no ``torch.no_grad`` block and no ``config`` object (its fields are
arguments); each returns what verl's function returns for the advantages, without the duplicate
``returns`` where verl returns the advantages twice; verl's error for an empty group is left out
(a group here always has a member). Per function:

- :func:`gae_loop` leaves out verl's final ``masked_whiten`` (call :func:`masked_whiten`);
- :func:`reinforce_plus_plus_loop` is verl 0.9.0's rule (the return carried through
  observation spans); :func:`reinforce_plus_plus_reset_loop` is verl 0.8.0's (the running
  return resets at every mask-0 token, observation spans too), the only estimator whose code
  differs between those releases;
- :func:`gdpo_verl_loop` takes the reward channels as a (B, K) tensor where verl reads them from
  ``non_tensor_batch`` and puts each on the response's last token; the last model token is the
  same position;
- :func:`grpo_passk_loop` leaves out verl's check that a group has two members or more;
- :func:`otb_loop` and :func:`tir_otb_loop` take no rollout importance-sampling weights;
- :func:`agg_loss_verl` is one process (``dp_size`` 1): its counts come from the batch.

Notation: B trajectories, T token positions, K reward channels; ``index`` holds each
trajectory's group id (verl's ``uid``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    GroupIds = Sequence[Hashable] | npt.NDArray[np.object_] | npt.NDArray[Any]


class AdvantagesReturns(NamedTuple):
    """What verl's token-level estimators return: the advantages and the returns, both (B, T)."""

    advantages: torch.Tensor
    returns: torch.Tensor


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """verl ``verl_F.masked_mean`` over every element: masked positions never leak (0 * NaN)."""
    valid_values = torch.where(mask.bool(), values, 0.0)
    return (valid_values * mask).sum() / (mask.sum() + 1e-8)


def masked_whiten(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """verl ``verl_F.masked_whiten`` (shift_mean=True) with ``masked_var(unbiased=True)``."""
    mean = masked_mean(values, mask)
    centered_values = values - mean
    variance = masked_mean(centered_values**2, mask)
    mask_sum = mask.sum()
    variance = variance * (mask_sum / (mask_sum - 1))  # Bessel's correction over model tokens
    return (values - mean) * torch.rsqrt(variance + 1e-8)


def gae_loop(
    token_rewards: torch.Tensor, values: torch.Tensor, response_mask: torch.Tensor, gamma: float, lam: float
) -> AdvantagesReturns:
    """verl ``compute_gae_advantage_return``, loop over time, without the final whitening.

    Observation tokens (mask 0) carry the next value and the running advantage through unchanged.
    """
    mask = response_mask.to(values.dtype)
    nextvalues: torch.Tensor | int = 0
    lastgaelam: torch.Tensor | int = 0
    advantages_reversed = []
    for t in reversed(range(token_rewards.shape[-1])):
        delta = token_rewards[:, t] + gamma * nextvalues - values[:, t]  # r_t + gamma V_{t+1} - V_t
        lastgaelam_ = delta + gamma * lam * lastgaelam  # A_t = delta_t + gamma lambda A_{t+1}
        # skip values and TD-error on observation tokens
        nextvalues = values[:, t] * mask[:, t] + (1 - mask[:, t]) * nextvalues
        lastgaelam = lastgaelam_ * mask[:, t] + (1 - mask[:, t]) * lastgaelam
        advantages_reversed.append(lastgaelam)
    advantages = torch.stack(advantages_reversed[::-1], dim=1)
    return AdvantagesReturns(advantages, advantages + values)


def returns_loop(token_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """Discounted return-to-go over model tokens, observation tokens carried (no verl function)."""
    out = torch.zeros_like(token_rewards)
    running = torch.zeros(token_rewards.shape[0], dtype=token_rewards.dtype)
    for t in reversed(range(token_rewards.shape[1])):
        updated = token_rewards[:, t] + gamma * running  # G_t = r_t + gamma G_{t+1}
        running = torch.where(response_mask[:, t], updated, running)
        out[:, t] = running
    return out


def grpo_loop(
    token_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: GroupIds,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
) -> torch.Tensor:
    """verl ``compute_grpo_outcome_advantage`` (the loop version): (score - mean) / (std + eps).

    Writes into ``token_rewards.sum(-1)``, a fresh tensor; a group of one gets mean 0, std 1.
    """
    scores = token_rewards.sum(dim=-1)
    id2score: defaultdict[Hashable, list[torch.Tensor]] = defaultdict(list)
    id2mean: dict[Hashable, torch.Tensor] = {}
    id2std: dict[Hashable, torch.Tensor] = {}
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
            scores[i] = scores[i] - id2mean[index[i]]  # Dr.GRPO
    return scores.unsqueeze(-1) * response_mask


def rloo_loop(token_rewards: torch.Tensor, response_mask: torch.Tensor, index: GroupIds) -> torch.Tensor:
    """verl ``compute_rloo_outcome_advantage``: n / (n - 1) (score - group mean); a group of one keeps its score."""
    scores = token_rewards.sum(dim=-1)
    id2score: defaultdict[Hashable, list[torch.Tensor]] = defaultdict(list)
    id2mean: dict[Hashable, torch.Tensor] = {}
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


def gdpo_verl_loop(
    channel_scores: torch.Tensor,
    response_mask: torch.Tensor,
    index: GroupIds,
    weights: Sequence[float] | torch.Tensor,
) -> torch.Tensor:
    """verl ``compute_gdpo_outcome_advantage``: per-channel GRPO, weighted sum, whitened.

    ``channel_scores`` (B, K) float32; each channel's score sits on the last model token, in a
    float32 (B, T) tensor as verl builds it.
    """
    bsz, length = response_mask.shape
    last = length - 1 - response_mask.flip(1).int().argmax(dim=1)

    def normalized(k: int) -> torch.Tensor:
        token_scores = torch.zeros(bsz, length, dtype=torch.float32)
        token_scores[torch.arange(bsz), last] = channel_scores[:, k]
        return grpo_loop(token_scores, response_mask, index)

    new_advantage = weights[0] * normalized(0)  # A = sum_k w_k GRPO(r_k)
    for k in range(1, channel_scores.shape[1]):
        new_advantage += weights[k] * normalized(k)
    return masked_whiten(new_advantage, response_mask) * response_mask


def agg_loss_verl(loss_mat: torch.Tensor, loss_mask: torch.Tensor, loss_agg_mode: str) -> torch.Tensor:
    """verl ``agg_loss`` in one process (``dp_size`` 1, counts from the batch); a scalar."""
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


def reinforce_plus_plus_loop(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float
) -> AdvantagesReturns:
    """verl ``compute_reinforce_plus_plus_outcome_advantage`` from v0.9.0: the return is carried
    through observation tokens (mask 0) unchanged, and their rewards are dropped."""
    returns = torch.zeros_like(token_level_rewards)
    running_return: torch.Tensor | int = 0
    for t in reversed(range(token_level_rewards.shape[1])):
        new_running_return = token_level_rewards[:, t] + gamma * running_return  # G_t = r_t + gamma G_{t+1}
        returns[:, t] = new_running_return * response_mask[:, t]
        # verl: observation tokens carry running_return through unchanged
        running_return = new_running_return * response_mask[:, t] + running_return * (1 - response_mask[:, t])
    advantages = masked_whiten(returns, response_mask)
    return AdvantagesReturns(advantages * response_mask, returns)


def reinforce_plus_plus_reset_loop(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float
) -> AdvantagesReturns:
    """verl ``compute_reinforce_plus_plus_outcome_advantage`` up to v0.8.0: the return resets at every mask-0 token."""
    returns = torch.zeros_like(token_level_rewards)
    running_return: torch.Tensor | int = 0
    for t in reversed(range(token_level_rewards.shape[1])):
        running_return = token_level_rewards[:, t] + gamma * running_return  # G_t = r_t + gamma G_{t+1}
        returns[:, t] = running_return
        running_return = running_return * response_mask[:, t]  # verl: "Reset after EOS"
    advantages = masked_whiten(returns, response_mask)
    return AdvantagesReturns(advantages * response_mask, returns)


def reinforce_plus_plus_baseline_loop(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: GroupIds
) -> torch.Tensor:
    """verl ``compute_reinforce_plus_plus_baseline_outcome_advantage``: score - group mean, whitened."""
    response_length = token_level_rewards.shape[-1]
    scores = token_level_rewards.sum(dim=-1)
    id2score: defaultdict[Hashable, list[torch.Tensor]] = defaultdict(list)
    id2mean: dict[Hashable, torch.Tensor] = {}
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


def grpo_passk_loop(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: GroupIds,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
) -> torch.Tensor:
    """verl ``compute_grpo_passk_outcome_advantage``: only the best member, (r_max - r_second) / (std + eps)."""
    scores = token_level_rewards.sum(dim=-1)
    advantages = torch.zeros_like(scores)
    id2scores: defaultdict[Hashable, list[torch.Tensor]] = defaultdict(list)
    id2indices: defaultdict[Hashable, list[int]] = defaultdict(list)
    for i in range(scores.shape[0]):
        id2scores[index[i]].append(scores[i])
        id2indices[index[i]].append(i)
    for idx in id2scores:
        rewards = torch.stack(id2scores[idx])
        topk, topk_idx = torch.topk(rewards, 2)
        r_max, r_second_max = topk[0], topk[1]
        i_max = id2indices[idx][int(topk_idx[0].item())]
        advantage = r_max - r_second_max
        if norm_adv_by_std_in_grpo:
            std = torch.std(rewards)
            advantage = advantage / (std + epsilon)
        advantages[i_max] = advantage
    return advantages.unsqueeze(-1) * response_mask


def opo_loop(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: GroupIds) -> torch.Tensor:
    """verl ``compute_opo_outcome_advantage``: score - sum L r / sum L over the group (L model tokens)."""
    response_length = response_mask.sum(dim=-1)
    scores = token_level_rewards.sum(dim=-1)
    id2score: defaultdict[Hashable, list[torch.Tensor]] = defaultdict(list)
    id2len: defaultdict[Hashable, list[torch.Tensor]] = defaultdict(list)
    id2bsl: dict[Hashable, torch.Tensor] = {}
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


def gpg_loop(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: GroupIds, f_norm: float = 1.0
) -> torch.Tensor:
    """verl ``compute_gpg_outcome_advantage``: alpha (score - group mean) / f_norm, alpha = B / nonzero scores."""
    scores = token_level_rewards.sum(dim=-1)
    id2score: defaultdict[Hashable, list[torch.Tensor]] = defaultdict(list)
    id2mean: dict[Hashable, torch.Tensor] = {}
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


def remax_loop(
    token_level_rewards: torch.Tensor, reward_baselines: torch.Tensor, response_mask: torch.Tensor
) -> AdvantagesReturns:
    """verl ``compute_remax_outcome_advantage``: reward-to-go minus the greedy response's reward."""
    returns = (token_level_rewards * response_mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])
    return AdvantagesReturns(returns - reward_baselines.unsqueeze(-1) * response_mask, returns)


def otb_loop(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: GroupIds,
    old_log_probs: torch.Tensor,
    sum_pi_squared: torch.Tensor,
    handle_zero_tail: bool = True,
    epsilon: float = 1e-8,
) -> torch.Tensor:
    """verl ``compute_optimal_token_baseline_advantage``, without rollout importance-sampling weights.

    Per position t of a group, b_t = sum_i R_it W_it / sum_i W_it with W the cumulative
    1 - 2 pi + sum pi^2 over model tokens.
    """
    batch_size, _ = token_level_rewards.shape
    returns = (token_level_rewards * response_mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])
    pi_t = torch.exp(old_log_probs)
    w_per_timestep = 1 - 2 * pi_t + sum_pi_squared
    w_cumulative = (w_per_timestep * response_mask).cumsum(dim=-1)
    prompt_groups: defaultdict[Hashable, list[int]] = defaultdict(list)
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


def tir_otb_loop(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: GroupIds,
    old_log_probs: torch.Tensor,
    sum_pi_squared: torch.Tensor,
    handle_zero_tail: bool = True,
    epsilon: float = 1e-8,
) -> torch.Tensor:
    """verl ``compute_multi_turn_optimal_token_baseline_advantage``, without rollout importance-sampling weights.

    The optimal token baseline over each row's model tokens compacted to the left.
    """
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
    prompt_groups: defaultdict[Hashable, list[int]] = defaultdict(list)
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


def group_mean_std_verl(scores: torch.Tensor, gidx: torch.Tensor, eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """verl ``verl.utils.groupwise.group_mean_std``: per-group mean and std in float32, (G,) each."""
    scores = scores.reshape(-1).to(dtype=torch.float32)
    gidx = gidx.reshape(-1).to(dtype=torch.long)
    num_groups = int(torch.max(gidx).item()) + 1
    ones = torch.ones_like(scores, dtype=torch.float32)
    count = torch.zeros(num_groups, dtype=torch.float32).index_add_(0, gidx, ones)
    s1 = torch.zeros(num_groups, dtype=torch.float32).index_add_(0, gidx, scores)
    mean = s1 / count.clamp_min(1.0)
    centered = scores - mean[gidx]
    var_num = torch.zeros(num_groups, dtype=torch.float32).index_add_(0, gidx, centered * centered)
    denom = (count - 1.0).clamp_min(1.0)
    var = var_num / denom
    std = torch.sqrt(torch.clamp(var, min=eps))
    single = count <= 1.0
    if torch.any(single):
        mean = mean.clone()
        std = std.clone()
        mean[single] = 0.0
        std[single] = 1.0
    return mean, std


def grpo_vectorized_verl(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, gidx: torch.Tensor, epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
) -> torch.Tensor:
    """verl ``compute_grpo_vectorized_outcome_advantage`` (``gidx``: verl's ``as_torch_index``)."""
    scores = token_level_rewards.sum(dim=-1)
    mean_g, std_g = group_mean_std_verl(scores, gidx, eps=0.0)
    if norm_adv_by_std_in_grpo:
        scalars = (scores - mean_g[gidx]) / (std_g[gidx] + epsilon)
    else:
        scalars = scores - mean_g[gidx]
    return scalars.unsqueeze(-1) * response_mask


def rloo_vectorized_verl(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: GroupIds) -> torch.Tensor:
    """verl ``compute_rloo_vectorized_outcome_advantage``: a group of one gets 0."""
    import numpy as np

    scores = token_level_rewards.sum(dim=-1)
    inv = torch.from_numpy(np.unique(np.asarray(index), return_inverse=True)[1]).to(scores.device)
    c = torch.bincount(inv)[inv].to(scores.dtype)
    adv = ((c * scores - torch.bincount(inv, weights=scores)[inv]) / (c - 1).clamp_min(1)) * (c > 1)
    return adv.unsqueeze(-1) * response_mask

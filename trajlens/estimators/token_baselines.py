"""Token-level baselines without a critic: ReMax and the optimal token baselines (OTB, TIR-OTB).

Each matches its function in verl 0.9.0 (``verl/trainer/ppo/core_algos.py``).
All start from the undiscounted reward-to-go over the masked rewards,
``G_t = sum_{k >= t} m_k r_k`` (a reverse cumulative sum, as verl computes it), then::

    remax                        A_t = G_t - b * m_t, b the greedy baseline response's reward
    optimal_token_baseline       B_t = sum_g(G_t W_t m_t) / (sum_g(W_t m_t) + eps) per position t
                                 of the padded sequence, A_t = (G_t - B_t) m_t
    tir_optimal_token_baseline   the same, with every trajectory's model tokens compacted to the
                                 left first, so B_k compares the k-th *model* tokens (multi-turn)

where ``W_t = sum_{j <= t} m_j w_j`` with ``w_j = (1 - 2 pi_j + sum_pi_squared_j) * rho_j^2``
(``pi_j = exp(log_prob_j)``, ``rho`` the optional rollout importance weights), summed over the
members of each group. A group of one gets no baseline (A = G). With ``handle_zero_tail``, the
longest member of a group, when it alone is longest, gets baseline 0 past the second-longest
length.

ReMax needs the reward of the greedy response to the same prompt (verl ``reward_baselines``),
and OTB the per-token ``sum_pi_squared`` of the actor (verl ``actor.calculate_sum_pi_squared``):
neither is in a trajectory log unless the trainer wrote it, and then trajlens reads it from the
columns ``reward_baseline`` and ``sum_pi_squared``.

Departures: groups come from any id column. The per-group loop of verl is kept (groups are few
and short compared with T), and the arithmetic follows verl's order, so float32 results match.

Shapes: B trajectories, T token positions, G groups.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from trajlens.estimators import _validate as check
from trajlens.estimators._groups import group_index

OTB_EPS = 1e-8


class TokenBaselineResult(NamedTuple):
    """Advantages of a token-level baseline estimator."""

    advantages: torch.Tensor
    """(B, T) G_t - B_t on model tokens, 0 elsewhere."""
    returns: torch.Tensor
    """(B, T) the reward-to-go G_t."""
    baselines: torch.Tensor
    """(B, T) what was subtracted."""
    normalisation: str = "none"


def _reward_to_go(fn: str, token_rewards: torch.Tensor, response_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    token_rewards = check.float_tensor(fn, "token_rewards", token_rewards, ndim=2)
    response_mask = check.bool_mask(fn, "response_mask", response_mask)
    check.same_shape(fn, token_rewards=token_rewards, response_mask=response_mask)
    check.nonempty_batch(fn, "token_rewards", token_rewards)
    mask = response_mask.to(token_rewards.dtype)
    returns = (token_rewards * mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])  # G_t = sum_{k>=t} m_k r_k
    return returns, mask


def remax(token_rewards: torch.Tensor, response_mask: torch.Tensor, reward_baselines: torch.Tensor) -> TokenBaselineResult:
    """ReMax: ``A_t = G_t - b * m_t``, ``b`` (B,) the reward of the greedy response to the same prompt.

    Matches verl ``compute_remax_outcome_advantage``. Note verl leaves ``G_t`` (not 0) on masked
    positions before the last model token; so does this function.
    """
    fn = "remax"
    returns, mask = _reward_to_go(fn, token_rewards, response_mask)
    reward_baselines = check.float_tensor(fn, "reward_baselines", reward_baselines, ndim=1)
    if reward_baselines.shape[0] != returns.shape[0]:
        raise check.EstimatorInputError(
            f"{fn}: reward_baselines has {reward_baselines.shape[0]} entries but the batch has {returns.shape[0]} trajectories")
    baselines = reward_baselines[:, None] * mask
    return TokenBaselineResult(returns - baselines, returns, baselines, "greedy_baseline")


def optimal_token_baseline(
    token_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    group_ids: Any,
    log_probs: torch.Tensor,
    sum_pi_squared: torch.Tensor,
    rollout_is_weights: torch.Tensor | None = None,
    handle_zero_tail: bool = True,
    epsilon: float = OTB_EPS,
) -> TokenBaselineResult:
    """Optimal token baseline, one baseline per position of the padded sequence.

    Args:
        token_rewards: (B, T) float.
        response_mask: (B, T) bool.
        group_ids: (B,) group of each trajectory (same prompt).
        log_probs: (B, T) behaviour log-probs of the sampled tokens (verl ``old_log_probs``).
        sum_pi_squared: (B, T) sum over the vocabulary of the squared probabilities.
        rollout_is_weights: optional (B, T) importance weights; W is scaled by their square.
        handle_zero_tail: zero the sole longest member's baseline past the second-longest length
            (verl's default True).
        epsilon: added to the denominator (verl 1e-8).

    Matches verl ``compute_optimal_token_baseline_advantage``.
    """
    fn = "optimal_token_baseline"
    check.epsilon(fn, epsilon)
    check.flag(fn, "handle_zero_tail", handle_zero_tail)
    returns, mask, w_cumulative = _otb_inputs(fn, token_rewards, response_mask, log_probs, sum_pi_squared,
                                              rollout_is_weights)
    groups = group_index(fn, group_ids, returns.shape[0], returns.device)
    baselines = torch.zeros_like(returns)
    for members in _groups_in_order(groups):
        if len(members) == 1:
            continue  # a single trajectory: no baseline, A = G
        rows = torch.tensor(members, device=returns.device)
        returns_g, w_g, mask_g = returns[rows], w_cumulative[rows], mask[rows]
        numerator = (returns_g * w_g * mask_g).sum(dim=0)  # sum over the group's trajectories
        denominator = (w_g * mask_g).sum(dim=0) + epsilon
        baselines[rows] = (numerator / denominator).unsqueeze(0).expand(len(members), -1)  # B_t
        if handle_zero_tail:
            _zero_tail(baselines, members, mask_g.sum(dim=-1))
    advantages = (returns - baselines) * mask  # A_t = G_t - B_t
    return TokenBaselineResult(advantages, returns, baselines, "optimal_token_baseline")


def tir_optimal_token_baseline(
    token_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    group_ids: Any,
    log_probs: torch.Tensor,
    sum_pi_squared: torch.Tensor,
    rollout_is_weights: torch.Tensor | None = None,
    handle_zero_tail: bool = True,
    epsilon: float = OTB_EPS,
) -> TokenBaselineResult:
    """The optimal token baseline over compacted model tokens, for multi-turn trajectories.

    As :func:`optimal_token_baseline`, but each trajectory's model tokens are moved to the left
    (order kept) before the per-position baseline, so the k-th model token of one trajectory is
    compared with the k-th model tokens of the others whatever observation spans lie between.
    Matches verl ``compute_multi_turn_optimal_token_baseline_advantage``
    (``tir_optimal_token_baseline``).
    """
    fn = "tir_optimal_token_baseline"
    check.epsilon(fn, epsilon)
    check.flag(fn, "handle_zero_tail", handle_zero_tail)
    returns, mask, w_cumulative = _otb_inputs(fn, token_rewards, response_mask, log_probs, sum_pi_squared,
                                              rollout_is_weights)
    lengths = response_mask.sum(dim=-1)
    width = int(lengths.max())
    rows_total = returns.shape[0]
    slots = torch.arange(width, device=returns.device)[None, :] < lengths[:, None]
    compact_w = w_cumulative.new_zeros((rows_total, width))
    compact_returns = torch.zeros_like(compact_w)
    compact_w[slots] = w_cumulative[response_mask]  # row-major order keeps each row's token order
    compact_returns[slots] = returns[response_mask]
    groups = group_index(fn, group_ids, rows_total, returns.device)
    baselines = torch.zeros_like(compact_returns)
    for members in _groups_in_order(groups):
        if len(members) == 1:
            continue
        rows = torch.tensor(members, device=returns.device)
        w_g, returns_g = compact_w[rows], compact_returns[rows]
        b_star = (returns_g * w_g).sum(dim=0) / (w_g.sum(dim=0) + epsilon)
        baselines[rows] = b_star.to(baselines.dtype)
        if handle_zero_tail:
            _zero_tail(baselines, members, lengths[rows])
    compact_advantages = compact_returns - baselines
    advantages = torch.zeros_like(returns)
    advantages[response_mask] = compact_advantages[slots]
    advantages = advantages * mask
    full_baselines = torch.zeros_like(returns)
    full_baselines[response_mask] = baselines[slots]
    return TokenBaselineResult(advantages, returns, full_baselines, "tir_optimal_token_baseline")


def _otb_inputs(
    fn: str,
    token_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    log_probs: torch.Tensor,
    sum_pi_squared: torch.Tensor,
    rollout_is_weights: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    returns, mask = _reward_to_go(fn, token_rewards, response_mask)
    log_probs = check.float_tensor(fn, "log_probs", log_probs, ndim=2)
    sum_pi_squared = check.float_tensor(fn, "sum_pi_squared", sum_pi_squared, ndim=2)
    check.same_shape(fn, token_rewards=token_rewards, log_probs=log_probs, sum_pi_squared=sum_pi_squared)
    pi = torch.exp(log_probs)  # a response with no model tokens stays in its group (verl): W and G are 0 on it
    w_per_token = 1 - 2 * pi + sum_pi_squared  # ||s_t||^2 = 1 - 2 pi_t + sum pi^2
    if rollout_is_weights is not None:
        rollout_is_weights = check.float_tensor(fn, "rollout_is_weights", rollout_is_weights, ndim=2)
        w_per_token = w_per_token * (rollout_is_weights**2)
    w_cumulative = (w_per_token * mask).cumsum(dim=-1)  # W_t = sum_{j <= t} m_j w_j
    return returns, mask, w_cumulative


def _groups_in_order(groups: Any) -> list[list[int]]:
    """Members of each group in batch order, groups in order of first appearance (verl's dict)."""
    members: list[list[int]] = [[] for _ in range(groups.num_groups)]
    for row, group in enumerate(groups.index.tolist()):
        members[group].append(row)
    return members


def _zero_tail(baselines: torch.Tensor, members: list[int], lengths: torch.Tensor) -> None:
    """verl's ``handle_zero_tail``: the sole longest member gets baseline 0 past the runner-up's length."""
    ordered, _ = torch.sort(lengths)
    longest, second = int(ordered[-1]), int(ordered[-2])
    at_longest = (lengths == longest).nonzero(as_tuple=True)[0]
    if at_longest.numel() == 1 and longest > second:
        baselines[members[int(at_longest[0])], second:] = 0.0

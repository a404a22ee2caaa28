"""More of verl's outcome estimators with a group baseline: REINFORCE++-baseline, GRPO pass@k, OPO, GPG.

Each matches its function in verl 0.9.0 (``verl/trainer/ppo/core_algos.py``),
operation for operation where it matters for float32 results::

    reinforce_plus_plus_baseline  A = masked_whiten((score - mean_g) * mask) * mask
                                  (a group of one: mean 0), whitened over the batch's model tokens
    grpo_passk                    only each group's best member gets an advantage:
                                  (r_max - r_second) / (std_g + eps)  (or undivided)
    opo                           A = score - sum_g(L_j r_j) / sum_g(L_j), the length-weighted
                                  group mean (a group of one: baseline 0)
    gpg                           A = alpha (score - mean_g) / f_norm, alpha = B / #{nonzero scores}

Departures: groups come from any id column and need not be contiguous. verl's pass@k picks the
first of tied best scores (``torch.topk``) and raises for a group of one; so does this module,
with a one-line error naming the group. verl's GPG ignores its ``alpha`` argument and always
recomputes it from the batch; here too (the argument is not offered).

Shapes: B trajectories, T token positions, G groups.
"""

from __future__ import annotations

from typing import Any

import torch

from trajlens.estimators import _validate as check
from trajlens.estimators._groups import group_mean_std, group_sizes
from trajlens.estimators.epsilons import GRPO_EPS
from trajlens.estimators.grpo import OutcomeResult, _scores
from trajlens.estimators.whiten import counts_of, whiten_rows


def reinforce_plus_plus_baseline(
    token_rewards: torch.Tensor, response_mask: torch.Tensor, group_ids: Any, masked_rewards: str = "keep"
) -> OutcomeResult:
    """REINFORCE++-baseline: subtract the group mean, then whiten over the batch's model tokens.

    Args:
        token_rewards: (B, T) float rewards; the score is their sum.
        response_mask: (B, T) bool, True for model tokens; or (B,) integer model-token counts, which
            whiten from the counts (:func:`~trajlens.estimators.whiten.whiten_rows`; ``advantages``
            is then None and ``token_rewards`` may be (B, 1) scores).
        group_ids: (B,) group of each trajectory.
        masked_rewards: ``"keep"`` (verl) or ``"drop"`` rewards on masked tokens.

    Matches verl ``compute_reinforce_plus_plus_baseline_outcome_advantage``: the trajectory's
    advantage is constant over its model tokens, but the whitening weighs each trajectory by its
    model-token count. ``sequence_advantages`` holds the value on the model tokens.
    """
    fn = "reinforce_plus_plus_baseline"
    scores, mask, groups = _scores(fn, token_rewards, response_mask, group_ids, masked_rewards, counts=True)
    mean, _ = group_mean_std(scores, groups)
    mean = torch.where(group_sizes(groups) == 1, torch.zeros_like(mean), mean)  # verl: a group of one, mean 0
    # verl: masked_whiten(scores.unsqueeze(-1).tile([1, T]) * mask) * mask
    sequence, advantages = whiten_rows(scores - mean, mask, fn)
    return OutcomeResult(advantages, sequence, scores, mean, torch.ones_like(scores), "group_mean+token_whiten")


def grpo_passk(
    token_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    group_ids: Any,
    epsilon: float = GRPO_EPS,
    norm_adv_by_std_in_grpo: bool = True,
    masked_rewards: str = "keep",
) -> OutcomeResult:
    """GRPO pass@k: only each group's best member is credited, by how far it beats the runner-up.

    ``A_best = (r_max - r_second_max) / (std_g + epsilon)`` (unbiased std; undivided when
    ``norm_adv_by_std_in_grpo`` is False), every other member 0. Matches verl
    ``compute_grpo_passk_outcome_advantage``; every group needs two or more members.
    """
    fn = "grpo_passk"
    check.epsilon(fn, epsilon)
    check.flag(fn, "norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo)
    scores, mask, groups = _scores(fn, token_rewards, response_mask, group_ids, masked_rewards)
    sizes = group_sizes(groups)
    if bool((sizes < 2).any()):
        row = int((sizes < 2).nonzero()[0])
        raise check.EstimatorInputError(f"{fn}: pass@k needs two or more trajectories per group; trajectory {row} is alone")
    sequence = torch.zeros_like(scores)
    scale = torch.ones_like(scores)
    for bucket in groups.buckets:
        values = scores[bucket.members]  # (G_n, n) in batch order, as verl stacks them
        top, where = torch.topk(values, 2, dim=1)
        gap = top[:, 0] - top[:, 1]  # r_max - r_second_max
        if norm_adv_by_std_in_grpo:
            spread = torch.stack([torch.std(row) for row in values]) + epsilon
            gap = gap / spread
            scale[bucket.members] = spread[:, None].expand_as(values)
        best = bucket.members.gather(1, where[:, :1]).squeeze(1)
        sequence[best] = gap
    return OutcomeResult(sequence[:, None] * mask, sequence, scores, torch.zeros_like(scores), scale, "passk_gap")


def opo(
    token_rewards: torch.Tensor, response_mask: torch.Tensor, group_ids: Any, masked_rewards: str = "keep"
) -> OutcomeResult:
    """OPO: the baseline is the group mean weighted by response length, ``sum L_j r_j / sum L_j``.

    ``L_j`` counts model tokens (``response_mask`` may be (B,) integer counts, as for
    :func:`reinforce_plus_plus_baseline`). A group of one gets baseline 0. Matches verl
    ``compute_opo_outcome_advantage``.
    """
    fn = "opo"
    scores, mask, groups = _scores(fn, token_rewards, response_mask, group_ids, masked_rewards, counts=True)
    lengths = counts_of(mask).to(scores.dtype)
    baseline = torch.zeros_like(scores)
    for bucket in groups.buckets:
        if bucket.size == 1:
            continue
        score_rows, length_rows = scores[bucket.members], lengths[bucket.members]
        group_baseline = (length_rows * score_rows).sum(dim=1) / length_rows.sum(dim=1)  # sum L r / sum L
        baseline[bucket.members] = group_baseline[:, None].expand_as(score_rows)
    sequence = scores - baseline
    advantages = sequence[:, None] * mask if mask.dim() == 2 else None
    return OutcomeResult(advantages, sequence, scores, baseline, torch.ones_like(scores), "length_weighted_mean")


def gpg(
    token_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    group_ids: Any,
    f_norm: float = 1.0,
    masked_rewards: str = "keep",
) -> OutcomeResult:
    """GPG: ``A = alpha (score - mean_g) / f_norm`` with ``alpha = B / max(1, #nonzero scores)``.

    A group of one gets mean 0. Matches verl ``compute_gpg_outcome_advantage``.
    """
    fn = "gpg"
    f_norm = check.positive(fn, "f_norm", f_norm)
    scores, mask, groups = _scores(fn, token_rewards, response_mask, group_ids, masked_rewards)
    alpha = scores.shape[0] / torch.count_nonzero(scores).clamp(min=1)  # alpha = B / m
    mean, _ = group_mean_std(scores, groups)
    mean = torch.where(group_sizes(groups) == 1, torch.zeros_like(mean), mean)
    # A_i = alpha (r_i - mu_g) / f_norm; verl takes it score by score, 0-d tensors that promote a
    # half-precision difference to alpha's float32, so the product is rounded to the score's dtype once
    centred = (scores - mean).to(torch.promote_types(scores.dtype, alpha.dtype))
    sequence = (alpha * centred / f_norm).to(scores.dtype)
    scale = torch.full_like(scores, f_norm) / alpha
    return OutcomeResult(sequence[:, None] * mask, sequence, scores, mean, scale, "gpg_alpha")

"""GDPO: normalise each reward channel in its group, fuse, then normalise over the batch.

GDPO (arXiv 2601.05242) replaces GRPO's sum-then-normalise on several reward channels::

    A^k_i = (r^k_i - mean_g(r^k)) / (std_g(r^k) + eps)      per channel k, within group g
    F_i   = sum_k w_k A^k_i                                  weighted fusion
    A_i   = batch normalisation of F                         over the whole batch

The two published implementations differ in every constant, so both are offered, each matched
operation for operation (float32 results bit-identical):

* :func:`gdpo_verl`, verl's ``compute_gdpo_outcome_advantage`` (verl 0.9.0,
  ``adv_estimator=gdpo``; channels named by ``algorithm.gdpo_reward_keys``, each placed on the
  response's last token, weights ``gdpo_reward_weights`` as a float32 tensor) and the NVlabs
  fork it came from: per channel verl's GRPO (eps 1e-6 on the
  unbiased std, a group of one gets mean 0 and std 1), weighted sum, ``masked_whiten`` over
  every model token of the batch (so long trajectories weigh more in the statistics), times
  the mask. verl reads the channels as float32 whatever the batch's dtype, and so does this
  function (it returns the inputs' dtype).
* :func:`gdpo_trl`, TRL ``GRPOTrainer`` with ``multi_objective_aggregation="normalize_then_sum"``:
  NaN-aware per-channel group z-score (``nanmean``, Bessel ``nanstd``, eps 1e-4; a value that
  is NaN, or alone in its group, contributes nothing), weighted ``nansum``, then a z-score over
  the B sequences (unbiased std, eps 1e-4).

:func:`sum_then_normalize` is GRPO on the weighted sum of the channels (TRL's default
``"sum_then_normalize"``), kept to show the collapse GDPO fixes: channels with different scales
and variances are mixed before normalising, so distinct reward combinations get equal
advantages and one channel's variance swamps the others.

Departures: verl propagates a NaN channel value to the whole batch; :func:`gdpo_verl` refuses it
and names the trajectory and channel (use :func:`gdpo_trl` for missing channel values). TRL needs
contiguous groups of equal size; here groups come from any id column.

TRL versions: from v1.6 (``unscorable_mask`` in ``GRPOTrainer._generate_and_score_completions``)
a completion whose every reward function returned None (NaN) is left out of the statistics and
gets advantage 0; earlier versions summed it to 0 and counted it. ``convention="trl"`` (default)
follows v1.6, ``"trl-1.5"`` the earlier code (:mod:`trajlens.estimators._trl` holds TRL's
arithmetic, shared with the TRL conventions of :mod:`trajlens.estimators.grpo`). TRL computes in
float32 throughout (rewards, ``reward_weights``, every statistic); so do :func:`gdpo_trl` and
:func:`sum_then_normalize` whatever the inputs' dtype, returning the advantages in that dtype,
so a tie that float32 rounding breaks (channel rewards 0, 2, 0 and 1, 0, 1 under weights 0.3,
0.7, 1.1 both sum to 1.4, but not in float32) is broken as TRL breaks it: TRL's eps 1e-4 turns
that gap into advantages near 1e-3, reproduced exactly.

Shapes: B trajectories, T token positions, G groups, K reward channels.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import torch

from trajlens.estimators import _validate as check
from trajlens.estimators._groups import GroupIndex, group_index
from trajlens.estimators._trl import TRL_CONVENTIONS, trl_group_advantages, trl_nanstd, trl_weighted_sum
from trajlens.estimators.epsilons import GRPO_EPS, TRL_EPS
from trajlens.estimators.grpo import group_normalise
from trajlens.estimators.whiten import model_token_counts, whiten_rows

TRLConvention = Literal["trl", "trl-1.5"]


class GDPOResult(NamedTuple):
    """Advantages of a multi-channel estimator and its intermediate quantities."""

    advantages: torch.Tensor | None
    """(B, T) the sequence advantage on model tokens, 0 elsewhere; None without a (B, T) mask."""
    sequence_advantages: torch.Tensor
    """(B,) one advantage per trajectory."""
    fused: torch.Tensor
    """(B,) what the final normalisation saw: sum_k w_k A^k (GDPO) or sum_k w_k r^k (sum first)."""
    channel_advantages: torch.Tensor | None
    """(B, K) per-channel group-normalised advantages A^k (None for sum-then-normalise)."""
    weights: torch.Tensor
    """(K,) channel weights used."""
    normalisation: str
    """How the advantages were normalised, e.g. ``"group_per_channel+token_whiten"``."""


def gdpo_verl(
    channel_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    group_ids: Any,
    weights: Any = None,
    epsilon: float = GRPO_EPS,
    divide_by_std: bool = True,
) -> GDPOResult:
    """GDPO as verl computes it: per-channel GRPO, weighted sum, token-level masked whitening.

    Args:
        channel_rewards: (B, K) float, one score per trajectory and channel; no NaN.
        response_mask: (B, T) bool, True for model tokens; or (B,) integer model-token counts, which
            whiten from the counts (:func:`~trajlens.estimators.whiten.whiten_rows`; ``advantages``
            is then None).
        group_ids: (B,) group of each trajectory.
        weights: (K,) channel weights, ones by default (verl ``gdpo_reward_weights``).
        epsilon: added to each channel's group std (verl 1e-6).
        divide_by_std: False skips the per-channel division (verl ``norm_adv_by_std_in_grpo``).
    """
    fn = "gdpo_verl"
    check.epsilon(fn, epsilon)
    check.flag(fn, "divide_by_std", divide_by_std)
    channel_rewards, groups, w = _channels(fn, channel_rewards, group_ids, weights)
    response_mask = model_token_counts(fn, "response_mask", response_mask, channel_rewards.shape[0])
    check.same_device(fn, channel_rewards=channel_rewards, response_mask=response_mask)
    bad = torch.isnan(channel_rewards).nonzero()
    if bad.numel():
        row, channel = (int(i) for i in bad[0])
        raise check.EstimatorInputError(
            f"{fn}: channel_rewards of shape {check.shape_of(channel_rewards)} is NaN at trajectory {row}, "
            f"channel {channel}; verl would turn the whole batch into NaN. Use gdpo_trl, which skips missing values"
        )
    check.rows_have_tokens(fn, "response_mask", response_mask)
    dtype = channel_rewards.dtype
    channel_rewards, w = channel_rewards.to(torch.float32), w.to(torch.float32)  # verl reads channels as float32
    channel_advantages = torch.stack(
        [
            group_normalise(channel_rewards[:, k], groups, epsilon, divide_by_std)[0]
            for k in range(channel_rewards.shape[1])
        ],
        dim=1,
    )  # A^k_i = (r^k_i - mu^k_g) / (sigma^k_g + eps)
    fused = w[0] * channel_advantages[:, 0]
    for k in range(1, channel_rewards.shape[1]):
        fused = fused + w[k] * channel_advantages[:, k]  # F_i = sum_k w_k A^k_i, in verl's order
    whitened = whiten_rows(fused, response_mask, fn)  # verl: masked_whiten(F_i tiled over the response)
    sequence, fused, channel_advantages, w = (x.to(dtype) for x in (whitened.sequence, fused, channel_advantages, w))
    advantages = None if whitened.advantages is None else whitened.advantages.to(dtype)
    return GDPOResult(advantages, sequence, fused, channel_advantages, w, "group_per_channel+token_whiten")


def gdpo_trl(
    channel_rewards: torch.Tensor,
    group_ids: Any,
    weights: Any = None,
    response_mask: torch.Tensor | None = None,
    epsilon: float = TRL_EPS,
    convention: TRLConvention = "trl",
) -> GDPOResult:
    """GDPO as TRL computes it (``multi_objective_aggregation="normalize_then_sum"``).

    Args:
        channel_rewards: (B, K) float; NaN marks a channel that does not apply to a trajectory.
        group_ids: (B,) group of each trajectory.
        weights: (K,) channel weights (TRL ``reward_weights``), ones by default.
        response_mask: optional (B, T) bool, to broadcast the advantages over model tokens.
        epsilon: added to every std (TRL 1e-4).
        convention: ``"trl"`` (v1.6 on: a trajectory whose every channel is NaN is left out of
            the batch statistics and gets advantage 0; batch ``nanmean``/``nanstd``) or
            ``"trl-1.5"`` (such a trajectory's fused value is 0 and counts; plain ``mean``/``std``).
    """
    fn = "gdpo_trl"
    check.epsilon(fn, epsilon)
    check.choice(fn, "convention", convention, TRL_CONVENTIONS)
    channel_rewards, groups, w = _channels(fn, channel_rewards, group_ids, weights)
    mask = None if response_mask is None else _mask(fn, response_mask, channel_rewards)
    dtype = channel_rewards.dtype
    channel_rewards, w = channel_rewards.to(torch.float32), w.to(torch.float32)  # TRL computes in float32
    channel_advantages = torch.empty_like(channel_rewards)
    for bucket in groups.buckets:
        grouped = channel_rewards[bucket.members]  # (G_n, n, K) as TRL's view(-1, n, K)
        mean_k = torch.nanmean(grouped, dim=1, keepdim=True)
        if bucket.size > 1:
            std_k = trl_nanstd(grouped, dim=1)
        else:
            std_k = torch.zeros_like(mean_k)  # TRL: num_generations == 1
        channel_advantages[bucket.members] = (grouped - mean_k) / (std_k + epsilon)  # z-score per channel
    fused = (channel_advantages * w[None, :]).nansum(dim=1)  # F_i = nansum_k w_k A^k_i
    if convention == "trl":
        fused[torch.isnan(channel_rewards).all(dim=1)] = float("nan")  # unscorable: out of the statistics
        spread = trl_nanstd(fused, dim=None) if fused.numel() > 1 else fused.new_zeros(())
        sequence = (fused - torch.nanmean(fused)) / (spread + epsilon)  # A_i = (F_i - mean F) / (std F + eps)
        sequence = torch.nan_to_num(sequence, nan=0.0)  # TRL: unscorable completions get advantage 0
    else:
        spread = fused.std() if fused.numel() > 1 else torch.zeros((), dtype=fused.dtype, device=fused.device)
        sequence = (fused - fused.mean()) / (spread + epsilon)  # A_i = (F_i - mean F) / (std F + eps)
    sequence, fused, channel_advantages, w = (x.to(dtype) for x in (sequence, fused, channel_advantages, w))
    advantages = None if mask is None else sequence[:, None] * mask
    return GDPOResult(advantages, sequence, fused, channel_advantages, w, "group_per_channel+sequence_zscore")


def sum_then_normalize(
    channel_rewards: torch.Tensor,
    group_ids: Any,
    weights: Any = None,
    response_mask: torch.Tensor | None = None,
    convention: Literal["trl", "trl-1.5", "verl"] = "trl",
    scale_rewards: Literal["group", "batch", "none"] = "group",
) -> GDPOResult:
    """GRPO on the weighted sum of the channels: ``R_i = nansum_k w_k r^k_i``, then group-normalise.

    ``convention="trl"`` matches TRL's default ``multi_objective_aggregation="sum_then_normalize"``
    from v1.6: a trajectory whose every channel is NaN is unscorable, left out of the group and
    batch statistics (``nanmean``, ``nanstd``) and given advantage 0. ``"trl-1.5"`` is the earlier
    TRL: such a trajectory sums to 0 and counts, statistics by ``mean``/``std``. Both divide by
    the group std (``scale_rewards="group"``), the std of the whole batch (``"batch"``, TRL's
    batch-std variant for several reward functions) or nothing (``"none"``), plus eps 1e-4; a
    group of one gets 0. ``"verl"`` applies verl's GRPO (eps 1e-6, a group of one gets mean 0 and
    std 1; ``scale_rewards`` must be ``"group"``).
    """
    fn = "sum_then_normalize"
    check.choice(fn, "convention", convention, ("trl", "trl-1.5", "verl"))
    check.choice(fn, "scale_rewards", scale_rewards, ("group", "batch", "none"))
    channel_rewards, groups, w = _channels(fn, channel_rewards, group_ids, weights)
    mask = None if response_mask is None else _mask(fn, response_mask, channel_rewards)
    if convention == "verl":
        if scale_rewards != "group":
            raise check.EstimatorInputError(f"{fn}: scale_rewards={scale_rewards!r} is TRL's; verl's GRPO scales per group")
        summed = (channel_rewards * w[None, :]).nansum(dim=1)  # R_i = sum_k w_k r^k_i
        sequence = group_normalise(summed, groups, GRPO_EPS)[0]
    else:
        summed = trl_weighted_sum(channel_rewards, w, convention)  # float32, as TRL; NaN where unscorable (v1.6)
        sequence = trl_group_advantages(summed, groups, scale_rewards, convention).advantages.to(channel_rewards.dtype)
        summed = summed.to(channel_rewards.dtype)
    advantages = None if mask is None else sequence[:, None] * mask
    label = f"sum_then_{scale_rewards}_std({convention})" if scale_rewards != "none" else f"sum_then_group_mean({convention})"
    return GDPOResult(advantages, sequence, summed, None, w, label)


def _channels(
    fn: str, channel_rewards: torch.Tensor, group_ids: Any, weights: Any
) -> tuple[torch.Tensor, GroupIndex, torch.Tensor]:
    channel_rewards = check.float_tensor(fn, "channel_rewards", channel_rewards, ndim=2)
    if channel_rewards.shape[0] == 0 or channel_rewards.shape[1] == 0:
        raise check.EstimatorInputError(
            f"{fn}: empty batch: channel_rewards has shape {check.shape_of(channel_rewards)} (B trajectories, K channels)"
        )
    groups = group_index(fn, group_ids, channel_rewards.shape[0], channel_rewards.device)
    w = check.weights_vector(fn, weights, channel_rewards.shape[1], channel_rewards)
    return channel_rewards, groups, w


def _mask(fn: str, response_mask: torch.Tensor, channel_rewards: torch.Tensor) -> torch.Tensor:
    response_mask = check.bool_mask(fn, "response_mask", response_mask)
    if response_mask.shape[0] != channel_rewards.shape[0]:
        raise check.EstimatorInputError(
            f"{fn}: response_mask has shape {check.shape_of(response_mask)} but channel_rewards has shape "
            f"{check.shape_of(channel_rewards)}; both need one row per trajectory"
        )
    check.same_device(fn, channel_rewards=channel_rewards, response_mask=response_mask)
    return response_mask

"""Per-channel diagnostics of multi-reward training (the GDPO digest's watch list).

For reward channels r^k (one score per trajectory and channel, NaN where a channel does not
apply):

* mean and std of each channel over the batch;
* ``rel_gain``: the mean over groups (of two or more) of (max - min) of the channel within the group, the signal
  a group baseline can see (format fell from 0.9 to 0.05 while correctness stayed near 0.5 as
  the format reward saturated);
* dominant channel counts: for each trajectory the argmax over the stacked per-channel
  advantages, counted per channel;
* per-channel advantage std and excess kurtosis;
* the correlation matrix between channels, with a warning for pairs above 0.85 (collinear
  channels avoid collapse under GDPO but give poor diversity: drop one).

Shapes: B trajectories, G groups, K reward channels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from trajlens.estimators import _validate as check
from trajlens.estimators._groups import GroupIndex, group_index, group_max_minus_min
from trajlens.estimators.epsilons import GRPO_EPS
from trajlens.estimators.grpo import group_normalise

COLLINEARITY_THRESHOLD = 0.85


@dataclass(frozen=True)
class ChannelDiagnostics:
    """Per-channel statistics of one batch."""

    names: tuple[str, ...]
    mean: torch.Tensor
    """(K,) NaN-aware mean of each channel."""
    std: torch.Tensor
    """(K,) NaN-aware unbiased std."""
    rel_gain: torch.Tensor
    """(K,) mean over groups of two or more trajectories of (max - min) within the group."""
    dominant_counts: torch.Tensor
    """(K,) trajectories whose largest per-channel advantage is channel k."""
    advantage_std: torch.Tensor
    """(K,) std of the per-channel advantages."""
    advantage_kurtosis: torch.Tensor
    """(K,) excess kurtosis of the per-channel advantages."""
    correlation: torch.Tensor
    """(K, K) Pearson correlation between channels over trajectories (pairwise complete)."""
    collinear_pairs: tuple[tuple[str, str, float], ...]
    """Channel pairs with |correlation| above the threshold."""
    warnings: tuple[str, ...]
    """One readable line per collinear pair."""


def channel_diagnostics(
    channel_rewards: torch.Tensor,
    group_ids: Any,
    channel_advantages: torch.Tensor | None = None,
    names: Sequence[str] | None = None,
    collinearity_threshold: float = COLLINEARITY_THRESHOLD,
) -> ChannelDiagnostics:
    """Diagnostics of K reward channels over one batch.

    Args:
        channel_rewards: (B, K) float, NaN where a channel does not apply.
        group_ids: (B,) group of each trajectory.
        channel_advantages: (B, K) per-channel advantages (e.g. ``GDPOResult.channel_advantages``);
            by default verl's per-channel GRPO of ``channel_rewards`` (NaN stays NaN).
        names: K channel names, ``channel_0``... by default.

    Reference: the GDPO digest's watch list; no trainer logs these.
    """
    fn = "channel_diagnostics"
    channel_rewards = check.float_tensor(fn, "channel_rewards", channel_rewards, ndim=2)
    batch, channels = channel_rewards.shape
    if batch < 2 or channels == 0:
        raise check.EstimatorInputError(
            f"{fn}: channel_rewards has shape {check.shape_of(channel_rewards)}; need two trajectories and a channel"
        )
    names = tuple(names) if names is not None else tuple(f"channel_{k}" for k in range(channels))
    if len(names) != channels:
        raise check.EstimatorInputError(f"{fn}: {len(names)} names for {channels} channels")
    groups = group_index(fn, group_ids, batch, channel_rewards.device)
    values = channel_rewards.double()
    if channel_advantages is None:
        channel_advantages = per_channel_advantages(channel_rewards, groups)
    else:
        channel_advantages = check.float_tensor(fn, "channel_advantages", channel_advantages, ndim=2)
        check.same_shape(fn, channel_rewards=channel_rewards, channel_advantages=channel_advantages)
    advantages = channel_advantages.double()
    rel_gain = torch.nanmean(_in_groups_of_two(group_max_minus_min(values, groups), groups), dim=0)
    dominant = dominant_channels(advantages)
    dominant_counts = torch.bincount(dominant[dominant >= 0], minlength=channels)
    correlation = _pairwise_correlation(values)
    pairs = []
    for j in range(channels):
        for k in range(j + 1, channels):
            r = float(correlation[j, k])
            if abs(r) > collinearity_threshold:
                pairs.append((names[j], names[k], r))
    warnings = tuple(
        f"channels '{a}' and '{b}' are collinear (r = {r:.2f}, above {collinearity_threshold}): "
        "GDPO will not collapse but diversity suffers; consider dropping one"
        for a, b, r in pairs
    )
    return ChannelDiagnostics(
        names=names,
        mean=torch.nanmean(values, dim=0),
        std=_nanstd(values),
        rel_gain=rel_gain,
        dominant_counts=dominant_counts,
        advantage_std=_nanstd(advantages),
        advantage_kurtosis=_nan_excess_kurtosis(advantages),
        correlation=correlation,
        collinear_pairs=tuple(pairs),
        warnings=warnings,
    )


def _in_groups_of_two(spread: torch.Tensor, groups: GroupIndex) -> torch.Tensor:
    """(G, K) ``spread``, NaN for a group of one trajectory: rel_gain is the mean over groups of
    two or more, as the checks, the report and the saved queries take it (a lone rollout's
    max - min is 0 by construction, not a saturated channel)."""
    return torch.where((groups.sizes >= 2)[:, None], spread, torch.full_like(spread, float("nan")))


def per_channel_advantages(channel_rewards: torch.Tensor, groups: GroupIndex) -> torch.Tensor:
    """(B, K) verl's GRPO advantage of each channel alone (NaN stays NaN): GDPO's per-channel stage."""
    return torch.stack(
        [group_normalise(channel_rewards[:, k], groups, GRPO_EPS)[0] for k in range(channel_rewards.shape[1])], dim=1
    )


def dominant_channels(channel_advantages: torch.Tensor) -> torch.Tensor:
    """(B,) each trajectory's dominant channel: the argmax over its stacked per-channel
    advantages (the GDPO digest's watch list; NaN channels skipped), -1 where none has a value or
    two or more share the largest (a group whose every channel ties, all advantages 0, has no
    channel leading it)."""
    scored = torch.nan_to_num(channel_advantages, nan=float("-inf"))
    has_value = ~torch.isnan(channel_advantages).all(dim=1)
    tied = (scored == scored.max(dim=1, keepdim=True).values).sum(dim=1) > 1 if scored.shape[1] else has_value
    return torch.where(has_value & ~tied, scored.argmax(dim=1), torch.full_like(has_value, -1, dtype=torch.long))


def _nanstd(x: torch.Tensor) -> torch.Tensor:
    """Unbiased std of each column ignoring NaN; NaN with fewer than two values."""
    present = ~torch.isnan(x)
    count = present.sum(dim=0).to(x.dtype)
    mean = torch.nanmean(x, dim=0)
    squares = torch.where(present, (x - mean) ** 2, torch.zeros_like(x)).sum(dim=0)
    return torch.where(count > 1, (squares / (count - 1)).sqrt(), torch.full_like(count, float("nan")))


def _nan_excess_kurtosis(x: torch.Tensor) -> torch.Tensor:
    present = ~torch.isnan(x)
    mean = torch.nanmean(x, dim=0)
    centred = torch.where(present, x - mean, torch.zeros_like(x))
    count = present.sum(dim=0).to(x.dtype)
    m2 = (centred**2).sum(dim=0) / count
    m4 = (centred**4).sum(dim=0) / count
    return torch.where(m2 > 0, m4 / m2**2 - 3.0, torch.full_like(m2, float("nan")))


def _pairwise_correlation(x: torch.Tensor) -> torch.Tensor:
    """Pearson correlation of every pair of columns over the rows where both are present."""
    channels = x.shape[1]
    out = torch.full((channels, channels), float("nan"), dtype=x.dtype, device=x.device)
    for j in range(channels):
        for k in range(channels):
            both = ~torch.isnan(x[:, j]) & ~torch.isnan(x[:, k])
            if int(both.sum()) < 2:
                continue
            a = x[both, j] - x[both, j].mean()
            b = x[both, k] - x[both, k].mean()
            denominator = float((a.square().sum() * b.square().sum()).sqrt())
            if denominator > 0:
                out[j, k] = (a * b).sum() / denominator
    return out

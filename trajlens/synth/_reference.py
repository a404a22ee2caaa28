"""Small NumPy references the generator uses to write its truth: GAE, explained variance, group
normalisations and per-channel statistics.

They follow the formulas of :mod:`trajlens.estimators` (verl and TRL conventions, named per
function) in float64 on per-trajectory arrays, so the generator needs neither torch nor padded
(B, T) tensors. The tests recompute the same quantities from the written Parquet files with the
torch estimators and compare.

Notation: B trajectories, G groups, K reward channels; ``lengths`` are model-token counts.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from trajlens.estimators.epsilons import EXPLAINED_VARIANCE_EPS, GRPO_EPS, TRL_EPS, WHITEN_EPS


def explained_variance(returns: np.ndarray, values: np.ndarray) -> float:
    """verl's ``critic/vf_explained_var`` over model tokens: ``1 - var(R - V) / (var(R) + 1e-5)``.

    Both arguments are 1-D over the model tokens of the batch; variances are unbiased.
    """
    if returns.size < 2:
        return float("nan")
    return float(1.0 - np.var(returns - values, ddof=1) / (np.var(returns, ddof=1) + EXPLAINED_VARIANCE_EPS))


def group_zscore(scores: np.ndarray, groups: np.ndarray, eps: float = GRPO_EPS) -> np.ndarray:
    """verl GRPO: ``(r - mean_g) / (std_g + eps)`` with the unbiased group std (B,)."""
    out = np.empty_like(scores, dtype=np.float64)
    for g in np.unique(groups):
        members = groups == g
        r = scores[members]
        if r.size == 1:
            out[members] = r / (1.0 + eps)  # verl: a group of one gets mean 0 and std 1
            continue
        out[members] = (r - r.mean()) / (r.std(ddof=1) + eps)
    return out


def group_centred(scores: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """``r - mean_g`` (B,): the group baseline without a scale (Dr.GRPO)."""
    out = np.empty_like(scores, dtype=np.float64)
    for g in np.unique(groups):
        members = groups == g
        out[members] = scores[members] - scores[members].mean()
    return out


def batch_std(scores: np.ndarray, groups: np.ndarray, eps: float = TRL_EPS) -> np.ndarray:
    """TRL ``scale_rewards="batch"``: ``(r - mean_g) / (std over the batch + eps)`` (B,)."""
    return group_centred(scores, groups) / (scores.std(ddof=1) + eps)


def token_whiten(sequence: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """verl ``masked_whiten`` of per-sequence advantages broadcast over their model tokens.

    Every model token counts once, so a trajectory weighs by its length; the result is again
    constant per trajectory (B,).
    """
    count = lengths.sum()
    mean = (sequence * lengths).sum() / (count + WHITEN_EPS)
    var = ((sequence - mean) ** 2 * lengths).sum() / (count + WHITEN_EPS) * count / (count - 1)
    return (sequence - mean) / np.sqrt(var + WHITEN_EPS)


def sequence_zscore(sequence: np.ndarray, eps: float = TRL_EPS) -> np.ndarray:
    """A z-score over the B sequences (TRL's batch normalisation of the fused GDPO advantage)."""
    return (sequence - sequence.mean()) / (sequence.std(ddof=1) + eps)


def gdpo_channels(channels: np.ndarray, groups: np.ndarray, weights: np.ndarray, eps: float) -> np.ndarray:
    """``sum_k w_k (r^k - mean_g) / (std_g + eps)`` (B,), the fused GDPO advantage before batch normalisation."""
    return sum(weights[k] * group_zscore(channels[:, k], groups, eps) for k in range(channels.shape[1]))


def rel_gain(channel: np.ndarray, groups: np.ndarray) -> float:
    """The seed's ``rel_gain`` of one channel: mean over groups of ``max - min``, over the groups
    of two or more, as the checks' ``rel_gain`` (a group of one has no spread to lose)."""
    spans = [channel[groups == g].max() - channel[groups == g].min() for g in np.unique(groups)
             if np.count_nonzero(groups == g) >= 2]
    return float(np.mean(spans))


class AdvantageStats(NamedTuple):
    """Shape of one step's per-trajectory advantages."""

    std: float
    """Unbiased std over the B trajectories."""
    max_abs: float
    """Largest |A|."""
    max_sigma: float
    """Largest |A - mean| in units of ``std``: how far the worst outlier sits."""
    kurtosis: float
    """Excess kurtosis (0 for a normal distribution)."""
    near_zero: float
    """Share of trajectories with |A| < 0.1: how much of the batch gives no signal."""


def advantage_stats(advantages: np.ndarray) -> AdvantageStats:
    mean = advantages.mean()
    std = advantages.std(ddof=1) if advantages.size > 1 else 0.0
    centred = advantages - mean
    if std > 0:
        max_sigma = float(np.abs(centred).max() / std)
        kurtosis = float((centred**4).mean() / (centred**2).mean() ** 2 - 3.0)
    else:
        max_sigma = kurtosis = 0.0
    return AdvantageStats(float(std), float(np.abs(advantages).max()), max_sigma, kurtosis,
                          float((np.abs(advantages) < 0.1).mean()))

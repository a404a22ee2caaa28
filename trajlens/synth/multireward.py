"""What sum-then-normalise GRPO and GDPO make of the multireward run's rewards, normalisation by
normalisation.

The seed (002) reports that after format saturates, summed-reward GRPO shows an advantage std
jumping from about 0.6 to above 4 near step 300, with single samples beyond 8 std, while GDPO
stays healthy. Which of those a trainer would actually log depends on how it normalises, so
every step of the run is scored under each of :data:`NORMALISATIONS`, all applied to the same
rewards, and the truth file keeps the statistics each one produces. Nothing here is tuned to
hit the seed's numbers; the run's README says which of them each normalisation reproduces.

The statistics are computed in float64 (:mod:`trajlens.synth._reference`). verl's float32 GRPO
differs in one visible way: a group of equal rewards that float32 cannot hold exactly (1 + 2/3)
gets advantages of about 0.1 instead of 0, because the float32 mean is an ulp off and the group
std (about 1e-7) sits below the eps of 1e-6.

Bounds worth knowing (n = 8 per group):

* per-group z-score: every |A| <= (n - 1) / sqrt(n) = 2.47, and the batch std <= 1 (it is
  sqrt((n - 1) / n) = 0.94 when no group is degenerate);
* batch-level std (TRL ``scale_rewards="batch"``): std = sqrt(within-group / total variance) <= 1;
* token-level whitening: the token-weighted std is 1 by construction; the std over
  trajectories is sqrt(mean length / (A^2-weighted mean length)), above 1 only when the
  advantage mass sits in short responses.
"""

from __future__ import annotations

import numpy as np

from trajlens.synth import _reference as ref

NORMALISATIONS: dict[str, str] = {
    "group_std": "sum, then per-group z-score (verl GRPO, TRL scale_rewards='group')",
    "batch_std": "sum, then group mean and the batch std (TRL scale_rewards='batch')",
    "group_mean_token_whiten": "sum, then group mean, then masked whitening over all model tokens (verl reinforce_plus_plus_baseline)",
    "group_std_token_whiten": "sum, then per-group z-score, then masked whitening over all model tokens",
    "gdpo_verl": "per-channel z-score, weighted sum, masked whitening over model tokens (verl gdpo)",
    "gdpo_trl": "per-channel z-score, weighted sum, z-score over the batch's trajectories (TRL normalize_then_sum)",
}
"""Normalisations compared on the multireward run, by name."""

DECLARED = "batch_std"
"""The normalisation the generated run declares in its config (see the README for why)."""

STATS: tuple[str, ...] = ("std", "max_abs", "max_sigma", "kurtosis", "near_zero")


def advantages(name: str, channels: np.ndarray, groups: np.ndarray, lengths: np.ndarray,
               weights: np.ndarray) -> np.ndarray:
    """Per-trajectory advantages (B,) of ``channels`` (B, K) under normalisation ``name``."""
    summed = channels @ weights
    if name == "group_std":
        return ref.group_zscore(summed, groups, ref.GRPO_EPS)
    if name == "batch_std":
        return ref.batch_std(summed, groups)
    if name == "group_mean_token_whiten":
        return ref.token_whiten(ref.group_centred(summed, groups), lengths)
    if name == "group_std_token_whiten":
        return ref.token_whiten(ref.group_zscore(summed, groups, ref.GRPO_EPS), lengths)
    if name == "gdpo_verl":
        return ref.token_whiten(ref.gdpo_channels(channels, groups, weights, ref.GRPO_EPS), lengths)
    if name == "gdpo_trl":
        return ref.sequence_zscore(ref.gdpo_channels(channels, groups, weights, ref.TRL_EPS))
    raise KeyError(name)


def step_statistics(channels: np.ndarray, groups: np.ndarray, lengths: np.ndarray,
                    weights: np.ndarray, names: tuple[str, str]) -> dict[str, float]:
    """Per-channel and per-normalisation statistics of one step, flat ``{key: value}``."""
    out: dict[str, float] = {}
    for k, channel in enumerate(names):
        out[f"{channel}/mean"] = float(channels[:, k].mean())
        out[f"{channel}/std"] = float(channels[:, k].std(ddof=1))
        out[f"{channel}/rel_gain"] = ref.rel_gain(channels[:, k], groups)
    for name in NORMALISATIONS:
        stats = ref.advantage_stats(advantages(name, channels, groups, lengths, weights))
        for stat in STATS:
            out[f"{name}/{stat}"] = getattr(stats, stat)
    return out

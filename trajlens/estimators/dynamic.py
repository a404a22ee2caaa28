"""GDPO with dynamic channel weights and a per-channel advantage clip (the digest's recipe).

One call is one training step::

    A^k_i  = clip((r^k_i - mean_g) / (std_g + eps), -c, c)     per channel, within its group
    s_k    = std over the batch of the unclipped A^k            the channel's live signal
    e_k    = (1 - alpha) e_k(prev) + alpha s_k                  EMA (e_k = s_k on the first step)
    p_k    = softmax(e / temperature)_k
    w_k    = bound(p_k, [w_min, w_max])
    F_i    = sum_k w_k A^k_i,  then normalised over the batch (token or sequence level)

The weight follows the channel's advantage *std*, not its inverse. The source article's prose
says a channel whose group variance goes to zero is saturated (every rollout gets the same
score, e.g. a format reward once learned) and must lose weight; its code snippet applied the
softmax to 1 / std, which does the opposite and hands the largest weight to the dead channel.
The prose is the intent and is what this module does: a saturated channel has A^k = 0 in every
group, s_k = 0, and its weight decays towards ``w_min``.

How bounding interacts with normalisation. ``bound="clamp"`` (default) clips each softmax share
to [w_min, w_max] *without* renormalising, so the weights need not sum to one. That is harmless
here because F is normalised over the batch afterwards: only the ratios w_k / w_j matter, and
clamping guarantees w_k / w_j <= w_max / w_min (5 with the digest's 0.1 and 0.5), so no channel
is ever weighted less than w_min / (w_min + (K - 1) w_max) of the total. Renormalising after
clamping would push weights back outside the bounds. ``bound="project"`` instead projects the
softmax onto {w_min <= w_k <= w_max, sum_k w_k = 1} (a capped simplex; feasible only when
K w_min <= 1 <= K w_max), which keeps a sum of one and the bounds at once; with K = 2 and
bounds [0.1, 0.5] that set is the single point (0.5, 0.5), so ``"clamp"`` is the default.

No reference trainer implements this; it follows the digest's description and config.

Shapes: B trajectories, T token positions, G groups, K reward channels.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal, NamedTuple, cast

import torch

from trajlens.estimators import _validate as check
from trajlens.estimators._groups import group_index
from trajlens.estimators.epsilons import GRPO_EPS
from trajlens.estimators.grpo import group_normalise
from trajlens.estimators.whiten import model_token_counts, whiten_rows
from trajlens.limits import FLOAT32_NUMBER, float32_number


@dataclass(frozen=True)
class DynamicWeightConfig:
    """Settings of GDPO with dynamic weights; defaults are the digest's config skeleton."""

    ema_alpha: float = 0.05
    """Weight of the current step in the EMA of each channel's advantage std."""
    temperature: float = 0.5
    """Softmax temperature over the EMA stds (0.7 early, 0.3-0.5 later in the digest)."""
    min_weight: float = 0.1
    """Lower bound of every channel weight, so no channel (a safety reward, say) is ignored."""
    max_weight: float = 0.5
    """Upper bound of every channel weight."""
    advantage_clip: float = 2.0
    """Per-channel advantages are clipped to [-advantage_clip, advantage_clip] (3.0 was too loose)."""
    epsilon: float = GRPO_EPS
    """Added to each channel's group std."""
    bound: Literal["clamp", "project"] = "clamp"
    """How weights are bounded; see the module docstring."""
    batch_normalisation: Literal["token", "sequence"] = "token"
    """Normalise the fused advantage over model tokens (verl) or over trajectories (TRL-like)."""

    def problems(self) -> list[str]:
        """Why these settings cannot run, one line each (empty when they can)."""
        numbers = ("ema_alpha", "temperature", "min_weight", "max_weight", "advantage_clip", "epsilon")
        found = [
            f"{name} must be {FLOAT32_NUMBER}, got {getattr(self, name)!r}"
            for name in numbers if not float32_number(getattr(self, name))
        ]
        for name in ("bound", "batch_normalisation"):
            if not isinstance(getattr(self, name), str):
                found.append(f"{name} must be a text, got {getattr(self, name)!r}")
        if found:
            return found
        if self.epsilon < 0.0:
            found.append(f"epsilon must be >= 0, got {self.epsilon}")
        if not 0.0 < self.ema_alpha <= 1.0:
            found.append(f"ema_alpha must lie in (0, 1], got {self.ema_alpha}")
        if self.temperature <= 0.0:
            found.append(f"temperature must be > 0, got {self.temperature}")
        if not 0.0 <= self.min_weight <= self.max_weight:
            found.append(f"need 0 <= min_weight <= max_weight, got {self.min_weight} and {self.max_weight}")
        elif self.max_weight == 0.0:
            found.append("max_weight must be > 0: every channel weighted 0 gives every trajectory an advantage of 0")
        if self.advantage_clip <= 0.0:
            found.append(f"advantage_clip must be > 0, got {self.advantage_clip}")
        if self.bound not in ("clamp", "project"):
            found.append(f"bound must be 'clamp' or 'project', got {self.bound!r}")
        if self.batch_normalisation not in ("token", "sequence"):
            found.append(f"batch_normalisation must be 'token' or 'sequence', got {self.batch_normalisation!r}")
        return found


class DynamicWeights(NamedTuple):
    """Channel weights of one step and the EMA state to pass to the next."""

    weights: torch.Tensor
    """(K,) bounded weights."""
    ema_std: torch.Tensor
    """(K,) EMA of each channel's advantage std, the state for the next step."""
    softmax: torch.Tensor
    """(K,) weights before bounding."""


class DynamicGDPOResult(NamedTuple):
    """One step of GDPO with dynamic weights."""

    advantages: torch.Tensor | None
    """(B, T) advantages on model tokens (None without a (B, T) mask)."""
    sequence_advantages: torch.Tensor
    """(B,) one advantage per trajectory."""
    channel_advantages: torch.Tensor
    """(B, K) per-channel group-normalised advantages, after the clip."""
    channel_std: torch.Tensor
    """(K,) this step's std of each channel's unclipped advantages."""
    clip_share: torch.Tensor
    """(K,) share of trajectories whose channel advantage the clip changed."""
    weights: DynamicWeights
    """Weights used and the EMA state for the next step."""
    normalisation: str


def dynamic_weights(
    channel_std: torch.Tensor, previous_ema: torch.Tensor | None, config: DynamicWeightConfig = DynamicWeightConfig()
) -> DynamicWeights:
    """Update the EMA of each channel's advantage std and turn it into bounded weights.

    Args:
        channel_std: (K,) this step's std of each channel's advantages.
        previous_ema: (K,) the previous step's ``ema_std``, or None on the first step.

    Reference: the digest's description; see the module docstring for the softmax direction and
    for how the bounds interact with the batch normalisation that follows.
    """
    fn = "dynamic_weights"
    _check_config(fn, config)
    channel_std = check.float_tensor(fn, "channel_std", channel_std, ndim=1)
    if previous_ema is None:
        ema = channel_std.clone()
    else:
        previous_ema = check.float_tensor(fn, "previous_ema", previous_ema, ndim=1)
        check.same_shape(fn, channel_std=channel_std, previous_ema=previous_ema)
        ema = (1 - config.ema_alpha) * previous_ema + config.ema_alpha * channel_std  # e_k EMA
    shares = torch.softmax(ema / config.temperature, dim=0)  # p_k = exp(e_k / tau) / sum_j exp(e_j / tau)
    if config.bound == "clamp":
        weights = shares.clamp(config.min_weight, config.max_weight)
    else:
        weights = _project_capped_simplex(fn, shares, config.min_weight, config.max_weight)
    return DynamicWeights(weights, ema, shares)


def gdpo_dynamic(
    channel_rewards: torch.Tensor,
    group_ids: Any,
    response_mask: torch.Tensor | None = None,
    previous_ema: torch.Tensor | None = None,
    config: DynamicWeightConfig | dict[str, Any] | None = None,
) -> DynamicGDPOResult:
    """One step of GDPO with EMA-softmax channel weights and a per-channel clip.

    Args:
        channel_rewards: (B, K) float, one score per trajectory and channel; no NaN.
        group_ids: (B,) group of each trajectory.
        response_mask: (B, T) bool, or (B,) integer model-token counts (the token whitening then
            comes from the counts: :func:`~trajlens.estimators.whiten.whiten_rows`); required with
            ``batch_normalisation="token"``.
        previous_ema: (K,) ``weights.ema_std`` of the previous step's result, None at the start.
        config: :class:`DynamicWeightConfig`, or a dict of its fields; None: the defaults.

    Reference: none in code; follows the digest's recipe (EMA, softmax, bounds, clip) with the
    weights increasing in each channel's advantage std, as its prose intends (its snippet used
    1 / std). The per-channel normalisation is verl's GRPO; the final one verl's token-level
    whitening or a sequence z-score.
    """
    fn = "gdpo_dynamic"
    config = weight_config(fn, config)
    _check_config(fn, config)
    channel_rewards = check.float_tensor(fn, "channel_rewards", channel_rewards, ndim=2)
    if channel_rewards.shape[0] < 2 or channel_rewards.shape[1] == 0:
        raise check.EstimatorInputError(
            f"{fn}: channel_rewards has shape {check.shape_of(channel_rewards)}; need at least two trajectories "
            "and one channel"
        )
    check.finite_where(fn, "channel_rewards", channel_rewards)
    if response_mask is not None:
        response_mask = model_token_counts(fn, "response_mask", response_mask, channel_rewards.shape[0])
        check.rows_have_tokens(fn, "response_mask", response_mask)
    elif config.batch_normalisation == "token":
        raise check.EstimatorInputError(f"{fn}: batch_normalisation='token' needs response_mask")
    groups = group_index(fn, group_ids, channel_rewards.shape[0], channel_rewards.device)
    raw = torch.stack(
        [group_normalise(channel_rewards[:, k], groups, config.epsilon)[0] for k in range(channel_rewards.shape[1])],
        dim=1,
    )  # A^k_i = (r^k_i - mu^k_g) / (sigma^k_g + eps)
    channel_std = raw.std(dim=0)  # s_k, unbiased over the batch
    clip = config.advantage_clip
    clipped = raw.clamp(-clip, clip)  # A^k_i <- clip(A^k_i, -c, c)
    clip_share = (raw.abs() > clip).to(raw.dtype).mean(dim=0)
    weights = dynamic_weights(channel_std, previous_ema, config)
    fused = clipped @ weights.weights  # F_i = sum_k w_k A^k_i
    advantages: torch.Tensor | None
    if config.batch_normalisation == "token":
        sequence, advantages = whiten_rows(fused, cast(torch.Tensor, response_mask), fn)
        label = "dynamic_gdpo+token_whiten"
    else:
        sequence = (fused - fused.mean()) / (fused.std() + config.epsilon)  # z-score over trajectories
        advantages = None if response_mask is None or response_mask.dim() == 1 else sequence[:, None] * response_mask
        label = "dynamic_gdpo+sequence_zscore"
    return DynamicGDPOResult(advantages, sequence, clipped, channel_std, clip_share, weights, label)


def weight_config(fn: str, value: DynamicWeightConfig | dict[str, Any] | None) -> DynamicWeightConfig:
    """The ``config`` option of ``gdpo_dynamic`` as given (a config, its fields as a dict, or
    None for the defaults) turned into a :class:`DynamicWeightConfig`."""
    if value is None:
        return DynamicWeightConfig()
    if not isinstance(value, (dict, DynamicWeightConfig)):
        raise check.EstimatorInputError(f"{fn}: config must be a DynamicWeightConfig or a dict of its fields, "
                                        f"got {value!r}")
    if isinstance(value, dict):
        known = [field.name for field in fields(DynamicWeightConfig)]
        unknown = [key for key in value if key not in known]
        if unknown:
            raise check.EstimatorInputError(
                f"{fn}: gdpo_dynamic option 'config': unknown field {unknown[0]!r} (fields: {', '.join(known)})"
            )
        return DynamicWeightConfig(**value)
    return value


def _check_config(fn: str, config: DynamicWeightConfig) -> None:
    problems = config.problems()
    if problems:
        raise check.EstimatorInputError(f"{fn}: invalid DynamicWeightConfig: " + "; ".join(problems))


def _project_capped_simplex(fn: str, shares: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """Euclidean projection of ``shares`` onto {low <= w <= high, sum w = 1}, by bisection on a shift."""
    k = shares.shape[0]
    if k * low > 1.0 + 1e-12 or k * high < 1.0 - 1e-12:
        raise check.EstimatorInputError(
            f"{fn}: bound='project' needs K * min_weight <= 1 <= K * max_weight, got K={k}, "
            f"bounds [{low}, {high}]; use bound='clamp'"
        )
    x = shares.double()
    lo = float((low - x).min()) - 1.0
    hi = float((high - x).max()) + 1.0
    for _ in range(100):  # sum(clamp(x + tau, low, high)) is monotone in tau
        tau = 0.5 * (lo + hi)
        if float((x + tau).clamp(low, high).sum()) > 1.0:
            hi = tau
        else:
            lo = tau
    return (x + 0.5 * (lo + hi)).clamp(low, high).to(shares.dtype)

"""Token arrays of a step: the response mask, rewards on the last model token, critic values.

Layout of one trajectory: for each call, its model tokens (reasoning and the call) then its
observation tokens; the last call has no observation, so the last token is the model's and
carries the reward.

Critic values (GAE runs) are calibrated to the scenario's explained variance. With gamma =
lambda = 1 and the reward on the last model token, GAE gives ``A_t = R - V_t`` and the return
``R`` on every model token, so with per-trajectory values ``V_i = c + k x_i + s z_i`` (``x`` the
centred return, ``z`` a noise orthogonal to ``x``, both weighted by model tokens):

    EV = 1 - var(R - V) / var(R) = 1 - (1 - k)^2 - s^2 / var(R)

``s^2 = value_noise * var(R)`` and ``k`` solves for the target. On top, the values wobble a
little inside a trajectory (a linear drift and a step at every call, bounded, about 0.1% of the
return variance), so the written EV is the target within about 0.01. The values are smooth
within a call, as a critic's are, and written on a 1/1024 grid, which keeps the files small.
The offset ``c`` (the critic's bias) moves the batch-mean advantage and not EV; it is what makes
a batch all-negative (every model token valued above its return) at an injected event, and
guards the other steps from becoming all-negative or all-positive by chance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from trajlens.synth import _reference as ref
from trajlens.synth._episodes import StepCalls

VALUE_QUANTUM = 1.0 / 1024.0  # values are written on this grid (exact in float32, compresses well)
LOG_PROB_QUANTUM = 1.0 / 256.0
WOBBLE = 0.1  # wobble amplitude inside a trajectory, in units of the return std
_WOBBLE_VAR = WOBBLE**2 * (1.0 / 36.0 + 1.0 / 12.0)  # drift of slope U(-a, a) plus a step U(-a/2, a/2) per call
GUARD = 0.02


@dataclass
class StepTokens:
    """Flat token arrays of one step and where each trajectory's slice starts."""

    offsets: np.ndarray
    """(B + 1,) start of each trajectory in the flat arrays."""
    response_mask: np.ndarray
    token_rewards: np.ndarray
    values: np.ndarray | None
    log_probs: np.ndarray | None
    token_start: np.ndarray
    """Per call: offset of its first model token within its trajectory."""
    token_end: np.ndarray
    segment_lengths: np.ndarray
    """Lengths of the alternating model and observation segments, over the whole step."""

    def list_arrays(self) -> dict[str, pa.Array]:
        offsets = pa.array(self.offsets.astype(np.int32))
        out = {
            "response_mask": pa.ListArray.from_arrays(offsets, pa.array(self.response_mask, pa.bool_())),
            "token_rewards": pa.ListArray.from_arrays(offsets, pa.array(self.token_rewards, pa.float32())),
        }
        for name in ("values", "log_probs"):
            array = getattr(self, name)
            out[name] = (pa.nulls(self.offsets.size - 1, pa.list_(pa.float32())) if array is None
                         else pa.ListArray.from_arrays(offsets, pa.array(array, pa.float32())))
        return out


@dataclass(frozen=True)
class AdvantageCheck:
    """Unwhitened GAE advantages of a step, as written (gamma = lambda = 1)."""

    token_mean: float
    """Mean advantage over the model tokens of the batch."""
    negative_share: float
    """Share of model tokens with a negative advantage."""
    all_negative: bool
    """Every model token of the batch has a negative advantage."""
    all_positive: bool
    trajectory_signs: tuple[int, int]
    """(trajectories with a negative mean advantage, with a positive one)."""
    explained_variance: float
    """verl's formula on the written values and returns."""


def layout(calls: StepCalls, rewards: np.ndarray, log_probs: bool, rng: np.random.Generator) -> StepTokens:
    n = calls.calls_per_trajectory
    segments = np.empty(2 * calls.codes.size, dtype=np.int64)
    segments[0::2] = calls.model_tokens
    segments[1::2] = calls.observation_tokens
    is_model = np.zeros(segments.size, dtype=bool)
    is_model[0::2] = True
    lengths = np.add.reduceat(segments, 2 * _starts(n)) if n.size else np.zeros(0, np.int64)
    lengths = np.where(n > 0, lengths, 0)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    mask = np.repeat(is_model, segments)
    segment_start = np.concatenate([[0], np.cumsum(segments)[:-1]])
    trajectory_of_call = np.repeat(np.arange(n.size), n)
    token_start = segment_start[0::2] - offsets[trajectory_of_call]
    token_end = token_start + calls.model_tokens
    token_rewards = np.zeros(offsets[-1], dtype=np.float32)
    token_rewards[offsets[1:][lengths > 0] - 1] = rewards[lengths > 0]
    lp = None
    if log_probs:
        lp = np.where(mask, -np.round(rng.exponential(0.3, mask.size) / LOG_PROB_QUANTUM) * LOG_PROB_QUANTUM, 0.0)
        lp = lp.astype(np.float32)
    return StepTokens(offsets, mask, token_rewards, None, lp, token_start, token_end, segments)


def critic_values(tokens: StepTokens, rewards: np.ndarray, target_ev: float, value_noise: float, bias: float,
                  all_negative: bool, rng: np.random.Generator) -> None:
    """Fill ``tokens.values`` for a GAE run (see the module docstring)."""
    lengths = np.diff(tokens.offsets)
    traj = np.repeat(np.arange(lengths.size), lengths)
    weights = np.bincount(traj[tokens.response_mask], minlength=lengths.size).astype(np.float64)
    total = weights.sum()
    mean_return = (weights * rewards).sum() / total
    x = rewards - mean_return
    var_return = (weights * x**2).sum() / total
    std_return = np.sqrt(var_return) if var_return > 0 else 0.05
    z = _orthogonal_noise(rng.standard_normal(lengths.size), x, weights)
    noise = min(value_noise, max(0.0, 1.0 - target_ev - _WOBBLE_VAR)) if z is not None else 0.0
    k = 1.0 - np.sqrt(max(1.0 - target_ev - noise - _WOBBLE_VAR, 0.0))
    level = mean_return + bias + rng.normal(0.0, 0.02)
    per_trajectory = level + k * x + (np.sqrt(noise) * std_return * z if z is not None else 0.0)

    a = WOBBLE * std_return
    position = (np.arange(tokens.offsets[-1]) - tokens.offsets[traj]) / np.maximum(lengths[traj], 1)
    drift = rng.uniform(-a, a, lengths.size)
    segments = np.repeat(rng.uniform(-a / 2, a / 2, tokens.segment_lengths.size), tokens.segment_lengths)
    values = per_trajectory[traj] + drift[traj] * (position - 0.5) + segments

    # the offset: the injected all-negative batch, and guards on every other step
    excess = values - rewards[traj]  # V_t - R = -A_t
    model = tokens.response_mask
    if all_negative:
        values += max(0.0, GUARD - excess[model].min())
    else:
        mean_advantage = -np.bincount(traj[model], excess[model], minlength=lengths.size) / np.maximum(weights, 1)
        if mean_advantage.max() < GUARD:
            values -= GUARD - mean_advantage.max()
        elif mean_advantage.min() > -GUARD:
            values += GUARD + mean_advantage.min()
    tokens.values = (np.round(values / VALUE_QUANTUM) * VALUE_QUANTUM).astype(np.float32)


def check_advantages(tokens: StepTokens, rewards: np.ndarray) -> AdvantageCheck:
    """Unwhitened GAE (gamma = lambda = 1: ``A_t = R - V_t``) on the written arrays."""
    lengths = np.diff(tokens.offsets)
    traj = np.repeat(np.arange(lengths.size), lengths)
    model = tokens.response_mask
    returns = rewards[traj][model].astype(np.float32).astype(np.float64)
    values = tokens.values[model].astype(np.float64)
    advantages = returns - values
    per_trajectory = np.bincount(traj[model], advantages, minlength=lengths.size) / np.maximum(
        np.bincount(traj[model], minlength=lengths.size), 1)
    return AdvantageCheck(
        token_mean=float(advantages.mean()),
        negative_share=float((advantages < 0).mean()),
        all_negative=bool((advantages < 0).all()),
        all_positive=bool((advantages > 0).all()),
        trajectory_signs=(int((per_trajectory < 0).sum()), int((per_trajectory > 0).sum())),
        explained_variance=ref.explained_variance(returns, values),
    )


def _orthogonal_noise(z: np.ndarray, x: np.ndarray, weights: np.ndarray) -> np.ndarray | None:
    """``z`` with its weighted mean and its component along ``x`` removed, scaled to weighted variance 1."""
    total = weights.sum()
    z = z - (weights * z).sum() / total
    xx = (weights * x * x).sum()
    if xx > 0:
        z = z - x * (weights * x * z).sum() / xx
    var = (weights * z * z).sum() / total
    if var < 1e-12:
        return None
    return z / np.sqrt(var)


def _starts(n: np.ndarray) -> np.ndarray:
    starts = np.concatenate([[0], np.cumsum(n)[:-1]])
    return np.minimum(starts, max(int(n.sum()) - 1, 0))

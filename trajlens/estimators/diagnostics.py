"""Batch diagnostics of advantages and of the critic, as numbers a report can plot.

* :func:`explained_variance` is verl's ``critic/vf_explained_var``
  (``compute_data_metrics`` in ``verl/trainer/ppo/metric_utils.py``):
  ``1 - var(R - V) / (var(R) + 1e-5)``, unbiased ``torch.var`` over model tokens.
* :func:`advantage_stats` describes one batch's advantage distribution over model tokens:
  mean, std, skew, excess kurtosis, the bimodality coefficient, the share of positive tokens,
  and whether the whole batch was negative or positive (the r6 collapse: unwhitened batch means
  drifting by +/-0.25 made whole batches one-signed).
* :func:`sign_streaks` finds runs of consecutive all-negative or all-positive batches (r6 had
  three all-negative batches in a row, steps 119-121).
* :func:`advantage_outliers` counts advantages beyond k standard deviations (the GRPO collapse's
  8-sigma outliers).
* :func:`clip_share` is the share of advantages a clip to [-c, c] changes.
* :func:`critic_grad_clip` says how far gradient clipping shrank the critic's update
  (grad_norm / clip: 7-68 in r6 under clip 1.0) and flags runs of steps above an alarm level.

Per-channel diagnostics live in :mod:`trajlens.estimators.channels`.

Shapes: B trajectories, T token positions, S steps.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from trajlens.estimators import _validate as check
from trajlens.estimators.epsilons import EXPLAINED_VARIANCE_EPS

# Bimodality coefficient of a uniform distribution; above it a distribution is read as bimodal.
BIMODALITY_THRESHOLD = 5.0 / 9.0


def explained_variance(returns: torch.Tensor, values: torch.Tensor, response_mask: torch.Tensor) -> float:
    """verl's ``critic/vf_explained_var``: 1 - var(R - V) / (var(R) + 1e-5) over model tokens.

    Args:
        returns: (B, T) value targets (GAE advantages + values, before whitening).
        values: (B, T) critic values.
        response_mask: (B, T) bool, True for model tokens; two or more needed.
    """
    fn = "explained_variance"
    returns = check.float_tensor(fn, "returns", returns, ndim=2)
    values = check.float_tensor(fn, "values", values, ndim=2)
    response_mask = check.bool_mask(fn, "response_mask", response_mask)
    check.same_shape(fn, returns=returns, values=values, response_mask=response_mask)
    _at_least(fn, "response_mask", response_mask, 2)
    valid_returns = torch.masked_select(returns, response_mask)
    valid_values = torch.masked_select(values, response_mask)
    return_diff_var = torch.var(valid_returns - valid_values)  # unbiased
    return_var = torch.var(valid_returns)
    return float(1.0 - return_diff_var / (return_var + EXPLAINED_VARIANCE_EPS))


@dataclass(frozen=True)
class AdvantageStats:
    """Shape of one batch's advantage distribution over model tokens."""

    count: int
    """Model tokens (or values) described."""
    mean: float
    std: float
    """Unbiased."""
    skew: float
    """Sample skewness m3 / m2^1.5."""
    kurtosis: float
    """Sample excess kurtosis m4 / m2^2 - 3 (0 for a normal distribution)."""
    bimodality: float
    """Bimodality coefficient (skew^2 + 1) / (kurtosis + 3 (n-1)^2 / ((n-2)(n-3))); > 5/9 reads bimodal."""
    positive_share: float
    """Share of values > 0."""
    negative_share: float
    """Share of values < 0."""
    all_negative: bool
    """Every value < 0: the batch pushes every behaviour down."""
    all_positive: bool
    """Every value > 0."""

    @property
    def bimodal(self) -> bool:
        return self.bimodality > BIMODALITY_THRESHOLD


def moment_shape(n: int, m2: float, m3: float, m4: float) -> tuple[float, float, float]:
    """Skew, excess kurtosis and the bimodality coefficient of ``n`` values from their central
    moments (population: ``m_k = mean((x - mean)^k)``); NaN where they are undefined."""
    if m2 > 0.0:
        skew = m3 / m2**1.5
        kurtosis = m4 / m2**2 - 3.0
    else:
        skew, kurtosis = float("nan"), float("nan")
    if n > 3 and not math.isnan(skew):
        bimodality = (skew**2 + 1.0) / (kurtosis + 3.0 * (n - 1) ** 2 / ((n - 2) * (n - 3)))
    else:
        bimodality = float("nan")
    return skew, kurtosis, bimodality


def advantage_stats(
    advantages: torch.Tensor, response_mask: torch.Tensor | None = None, repeats: torch.Tensor | None = None
) -> AdvantageStats:
    """Distribution statistics of ``advantages`` over the model tokens of one batch.

    Args:
        advantages: (B, T) token advantages with ``response_mask``, or (N,) values without.
        response_mask: (B, T) bool, True for model tokens; None to use every value.
        repeats: (N,) non-negative integers, with (N,) values and no mask: how many model tokens
            each value stands for (a trajectory's advantage over its tokens). The statistics are
            those of the values so repeated, as count-weighted sums (a few ulp from the repeated
            values' own), without building them.

    Reference: verl logs only mean, max and min of the advantages; the moments here are the
    population ones (m3 / m2^1.5, m4 / m2^2 - 3) and the bimodality coefficient SAS's formula.
    """
    fn = "advantage_stats"
    if repeats is None:
        values = _selected(fn, advantages, response_mask).double()
        weights = None
        n = values.numel()
    else:
        values, weights = _repeated(fn, advantages, response_mask, repeats)
        n = int(weights.sum())

    def mean_of(x: torch.Tensor) -> torch.Tensor:
        return x.mean() if weights is None else (weights * x).sum() / n

    def count_of(chosen: torch.Tensor) -> int:
        return int(chosen.sum()) if weights is None else int(weights[chosen].sum())

    mean = mean_of(values)
    centred = values - mean
    m2 = mean_of(centred**2)
    m3 = mean_of(centred**3)
    m4 = mean_of(centred**4)
    if n < 2:
        std = float("nan")
    else:
        std = float(values.std()) if weights is None else math.sqrt(float(m2) * n / (n - 1))  # unbiased
    skew, kurtosis, bimodality = moment_shape(n, float(m2), float(m3), float(m4))
    positive = count_of(values > 0)
    negative = count_of(values < 0)
    return AdvantageStats(
        count=n,
        mean=float(mean),
        std=std,
        skew=skew,
        kurtosis=kurtosis,
        bimodality=bimodality,
        positive_share=positive / n,
        negative_share=negative / n,
        all_negative=negative == n,
        all_positive=positive == n,
    )


@dataclass(frozen=True)
class SignStreaks:
    """All-negative and all-positive batches over a run, and their streaks."""

    negative_steps: tuple[int, ...]
    positive_steps: tuple[int, ...]
    negative_streaks: tuple[tuple[int, int], ...]
    """(first step, last step) of each run of consecutive all-negative batches."""
    positive_streaks: tuple[tuple[int, int], ...]
    longest_negative: int
    """Length (in batches) of the longest all-negative streak."""
    longest_positive: int


def sign_streaks(
    steps: Sequence[int], all_negative: Sequence[bool], all_positive: Sequence[bool] | None = None
) -> SignStreaks:
    """Runs of consecutive all-negative (and all-positive) batches.

    ``steps`` are the batches' step numbers; batches are taken in step order and two are
    consecutive when they follow each other at the run's cadence (:func:`flagged_runs`: a run
    logged every step, or every k steps; a missing step breaks a streak). Build the flags with
    :func:`advantage_stats` per step.
    """
    fn = "sign_streaks"
    steps = [int(s) for s in steps]
    negative = [bool(x) for x in all_negative]
    positive = [False] * len(steps) if all_positive is None else [bool(x) for x in all_positive]
    if not (len(steps) == len(negative) == len(positive)):
        raise check.EstimatorInputError(
            f"{fn}: steps, all_negative and all_positive must have one entry per step, "
            f"got {len(steps)}, {len(negative)} and {len(positive)}"
        )
    order = sorted(range(len(steps)), key=steps.__getitem__)
    ordered = [steps[i] for i in order]
    neg_runs = flagged_runs(ordered, [negative[i] for i in order])
    pos_runs = flagged_runs(ordered, [positive[i] for i in order])
    return SignStreaks(
        negative_steps=tuple(s for s, flag in zip(ordered, (negative[i] for i in order)) if flag),
        positive_steps=tuple(s for s, flag in zip(ordered, (positive[i] for i in order)) if flag),
        negative_streaks=tuple((first, last) for first, last, _ in neg_runs),
        positive_streaks=tuple((first, last) for first, last, _ in pos_runs),
        longest_negative=max((n for *_, n in neg_runs), default=0),
        longest_positive=max((n for *_, n in pos_runs), default=0),
    )


def flagged_runs(steps: Sequence[int], flags: Sequence[bool]) -> list[tuple[int, int, int]]:
    """(first step, last step, length) of each run of flagged steps that follow each other at
    the run's cadence: ``steps`` ascending and distinct, two steps consecutive when they are
    adjacent and their gap is the run's most common gap between neighbouring steps (the smaller
    of two as common; 1 for a run logged every step, k for one logged every k steps, whatever a
    few odd steps do). A step missing from the cadence breaks a run.

    The one definition of "consecutive steps": :func:`sign_streaks`, :func:`critic_grad_clip`
    and the checks' ``consecutive`` condition use it.
    """
    steps = [int(s) for s in steps]
    gaps = [b - a for a, b in zip(steps, steps[1:])]
    if any(gap <= 0 for gap in gaps):
        raise check.EstimatorInputError(f"flagged_runs: steps must ascend without repeats, got {steps[:10]}")
    counts = Counter(gaps)
    cadence = min(counts, key=lambda gap: (-counts[gap], gap), default=1)
    runs: list[tuple[int, int, int]] = []
    start = None
    for i, flag in enumerate(flags):
        follows = start is not None and steps[i] - steps[i - 1] == cadence
        if flag and follows:
            continue
        if start is not None:
            runs.append((steps[start], steps[i - 1], i - start))
        start = i if flag else None
    if start is not None:
        runs.append((steps[start], steps[-1], len(steps) - start))
    return runs


@dataclass(frozen=True)
class Outliers:
    """Advantages beyond k standard deviations of the batch mean."""

    k: float
    count: int
    share: float
    """count / values described."""
    max_abs_z: float
    """Largest |A - mean| / std seen (8+ in the GRPO collapse)."""
    mask: torch.Tensor
    """Same shape as the advantages: True at an outlier."""
    per_trajectory: torch.Tensor | None
    """(B,) outlier tokens per trajectory for (B, T) input, else None."""


def advantage_outliers(
    advantages: torch.Tensor, response_mask: torch.Tensor | None = None, k: float = 3.0
) -> Outliers:
    """Advantages with |A - mean| > k * std, mean and unbiased std over the model tokens."""
    fn = "advantage_outliers"
    k = check.positive(fn, "k", k)
    values = _selected(fn, advantages, response_mask).double()
    if values.numel() < 2:
        raise check.EstimatorInputError(f"{fn}: need at least two values, got {values.numel()}")
    mean, std = values.mean(), values.std()
    z = (advantages.double() - mean).abs() / std
    if response_mask is not None:
        z = torch.where(response_mask, z, torch.zeros_like(z))
    flagged = z > k
    count = int(flagged.sum())
    max_z = float(z.max()) if float(std) > 0 else float("nan")
    per_trajectory = flagged.sum(dim=1) if advantages.dim() == 2 else None
    return Outliers(k, count, count / values.numel(), max_z, flagged, per_trajectory)


def clip_share(advantages: torch.Tensor, clip: float, response_mask: torch.Tensor | None = None) -> float:
    """Share of advantages (on model tokens) that a clip to [-clip, clip] changes: |A| > clip."""
    fn = "clip_share"
    clip = check.positive(fn, "clip", clip)
    values = _selected(fn, advantages, response_mask)
    return float((values.abs() > clip).double().mean())


@dataclass(frozen=True)
class GradClipReport:
    """How far gradient clipping shrank each step's update."""

    ratio: torch.Tensor
    """(S,) grad_norm / clip; above 1 the update was scaled down by this factor."""
    shrink: torch.Tensor
    """(S,) max(ratio, 1): the factor the update was actually divided by."""
    clipped_share: float
    """Share of steps whose gradient was clipped."""
    median_ratio: float
    alarm_runs: tuple[tuple[int, int], ...]
    """(first index, last index) of runs of at least ``alarm_run`` steps with grad_norm > alarm_above."""


def critic_grad_clip(
    grad_norm: Any, clip: float, alarm_above: float | None = None, alarm_run: int = 3
) -> GradClipReport:
    """Shrink factor of the critic's gradient under its clip, from per-step scalars.

    Args:
        grad_norm: (S,) the critic's pre-clip gradient norm per step (tensor or sequence).
        clip: the gradient clip (max norm) the trainer used.
        alarm_above: flag runs of ``alarm_run`` consecutive steps with grad_norm above it
            (the digest alarms at 3 steps above 30); None for no alarm.
    """
    fn = "critic_grad_clip"
    clip = check.positive(fn, "clip", clip)
    norms = torch.as_tensor(grad_norm, dtype=torch.float64).flatten()
    if norms.numel() == 0:
        raise check.EstimatorInputError(f"{fn}: grad_norm is empty")
    ratio = norms / clip  # how many times too long the gradient was
    shrink = ratio.clamp(min=1.0)
    runs: tuple[tuple[int, int], ...] = ()
    if alarm_above is not None:
        above = (norms > alarm_above).tolist()
        found = flagged_runs(range(norms.numel()), above)
        runs = tuple((first, last) for first, last, n in found if n >= alarm_run)
    return GradClipReport(ratio, shrink, float((ratio > 1.0).double().mean()), float(ratio.median()), runs)


def _selected(fn: str, advantages: torch.Tensor, response_mask: torch.Tensor | None) -> torch.Tensor:
    advantages = check.float_tensor(fn, "advantages", advantages)
    if response_mask is None:
        values = advantages.flatten()
    else:
        response_mask = check.bool_mask(fn, "response_mask", response_mask, ndim=advantages.dim())
        check.same_shape(fn, advantages=advantages, response_mask=response_mask)
        values = torch.masked_select(advantages, response_mask)
    if values.numel() == 0:
        raise check.EstimatorInputError(
            f"{fn}: nothing to describe: advantages has shape {check.shape_of(advantages)} and no model tokens"
        )
    return values


def _repeated(fn: str, advantages: torch.Tensor, response_mask: torch.Tensor | None,
              repeats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(N,) float64 values and their (N,) float64 repeat counts, checked."""
    if response_mask is not None:
        raise check.EstimatorInputError(f"{fn}: give response_mask or repeats, not both")
    values = check.float_tensor(fn, "advantages", advantages, ndim=1)
    if not isinstance(repeats, torch.Tensor) or repeats.dtype.is_floating_point or repeats.dtype == torch.bool:
        raise check.EstimatorInputError(f"{fn}: repeats must be an integer torch.Tensor")
    check.same_shape(fn, advantages=values, repeats=repeats)
    if bool((repeats < 0).any()):
        raise check.EstimatorInputError(f"{fn}: repeats holds a negative count")
    if int(repeats.sum()) == 0:
        raise check.EstimatorInputError(
            f"{fn}: nothing to describe: advantages has shape {check.shape_of(values)} and no model tokens")
    counted = repeats > 0  # a value that stands for no token is not described
    return values[counted].double(), repeats[counted].to(torch.float64)


def _at_least(fn: str, name: str, mask: torch.Tensor, n: int) -> None:
    count = int(mask.sum())
    if count < n:
        raise check.EstimatorInputError(
            f"{fn}: {name} of shape {check.shape_of(mask)} has {count} model tokens; need at least {n}"
        )

"""Critic-free outcome estimators with a group baseline: GRPO, Dr.GRPO, batch-std GRPO, RLOO.

Each trajectory gets one score, the sum of its token rewards, compared with the other members of
its group (same prompt, same step). Groups come from any id column and need not be contiguous.
The sequence advantage is broadcast over the response mask.

References, matched operation for operation so float32 results are bit-identical
(verl 0.9.0, ``verl/trainer/ppo/core_algos.py``, the same in 0.8.0 and 0.9.1; TRL
``GRPOTrainer`` and ``RLOOTrainer`` at trl 1.16.0, the same from 1.6.0, and at trl 1.5.0):

* :func:`grpo` and :func:`dr_grpo`: verl ``compute_grpo_outcome_advantage`` (the loop version):
  ``(score - mean_g) / (std_g + eps)``, ``std_g`` unbiased (``torch.std``), eps 1e-6 added to
  the std; a group of one gets mean 0 and std 1, so its advantage is ``score / (1 + eps)``.
  Dr.GRPO (``norm_adv_by_std_in_grpo=False``) skips the division. ``vectorized=True`` is verl's
  ``grpo_vectorized``: the group statistics in float32 (``verl.utils.group_mean_std``: sums by
  ``index_add_``, a two-pass variance, no variance floor). ``convention="trl"``/``"trl-1.5"``
  is TRL's ``scale_rewards="group"`` / ``"none"`` (:mod:`trajlens.estimators._trl`).
* :func:`grpo_batch_std`: TRL ``GRPOTrainer`` with ``scale_rewards="batch"``: group mean, the
  unbiased std of all scores in the batch (TRL's ``nanstd`` from 1.6, ``Tensor.std`` before),
  eps 1e-4.
* :func:`rloo`: verl ``compute_rloo_outcome_advantage``:
  ``score * n / (n - 1) - mean_g * n / (n - 1)``, which equals ``score - mean of the others``;
  a group of one keeps its raw score (verl's documented choice, no baseline available).
  ``vectorized=True`` is verl's ``rloo_vectorized`` (a group of one gets 0).
  ``convention="trl"`` follows TRL ``RLOOTrainer``: ``score - (sum_g - score) / (n - 1)``, a
  group of one gets 0, and ``normalize_advantages=True`` then z-scores over the batch
  (``(A - mean) / (std + 1e-4)``, unbiased std).

TRL's conventions compute in float32, as TRL does, and take a NaN score for TRL's unscorable
completion (left out and given 0 from trl 1.6; 0 and counted before). verl has no such
completion: a NaN score is refused. A response with no model tokens is kept, as verl keeps it:
it counts in its group and its token advantages are 0 (its ``sequence_advantages`` entry holds
the value its score was given; :func:`~trajlens.estimators.recompute` gives such a trajectory 0).

Dtypes: verl holds a group of one's std as a float32 ``torch.tensor(1.0)``, so with float64
scores it divides by float32(1 + 1e-6) = 1.00000095367..., not 1.000001 (4.6e-8 relative). That
is reproduced here: a group of one is divided by ``float32(1) + epsilon`` in every dtype.

Departures: ``singleton="zero"`` gives groups of one an advantage of 0 instead (a baseline of
itself); ``masked_rewards="drop"`` sums only rewards on model tokens. verl sums every position of
``token_level_rewards`` (its rewards sit on the last model token), and so does the default here.

Shapes: B trajectories, T token positions, G groups.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, cast

import torch

from trajlens.estimators import _validate as check
from trajlens.estimators._groups import GroupIndex, group_index, group_mean_std, group_mean_std_float32, group_sizes
from trajlens.estimators._trl import (
    TRL_CONVENTIONS,
    TRLAdvantages,
    TRLConvention,
    trl_group_advantages,
    trl_rloo_advantages,
    trl_scores,
)
from trajlens.estimators.epsilons import GRPO_EPS, TRL_EPS
from trajlens.estimators.whiten import model_token_counts

Singleton = Literal["raw", "zero"]
Convention = Literal["verl", "trl", "trl-1.5"]
MaskedRewards = Literal["keep", "drop"]


class OutcomeResult(NamedTuple):
    """Advantages of an outcome estimator, per token and per trajectory."""

    advantages: torch.Tensor | None
    """(B, T) the sequence advantage on model tokens, 0 elsewhere; None where the estimator was
    given model-token counts for the mask."""
    sequence_advantages: torch.Tensor
    """(B,) one advantage per trajectory."""
    scores: torch.Tensor
    """(B,) the score each trajectory was judged by (sum of its token rewards)."""
    baseline: torch.Tensor
    """(B,) what was subtracted: the group mean (GRPO) or the leave-one-out mean (RLOO)."""
    scale: torch.Tensor
    """(B,) what the difference was divided by (std + eps), 1 where nothing was."""
    normalisation: str
    """Which normalisation produced the advantages, e.g. ``"group_std"``."""


def grpo(
    token_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    group_ids: Any,
    epsilon: float | None = None,
    singleton: Singleton = "raw",
    masked_rewards: MaskedRewards = "keep",
    convention: Convention = "verl",
    vectorized: bool = False,
) -> OutcomeResult:
    """GRPO: ``A_i = (score_i - mean_g) / (std_g + epsilon)`` broadcast over the mask.

    Args:
        token_rewards: (B, T) float rewards; the score is their sum.
        response_mask: (B, T) bool, True for model tokens.
        group_ids: (B,) group of each trajectory: int tensor, or any sequence of hashable ids.
        epsilon: added to the unbiased group std; None: the convention's (verl 1e-6, TRL 1e-4).
        singleton: ``"raw"`` (verl: mean 0, std 1) or ``"zero"`` for groups of one.
        masked_rewards: ``"keep"`` (verl: sum every position) or ``"drop"`` rewards on masked tokens.
        convention: ``"verl"``, or TRL's ``GRPOTrainer`` with ``scale_rewards="group"``: ``"trl"``
            (trl >= 1.6: a NaN score is unscorable, left out of the statistics, advantage 0) or
            ``"trl-1.5"`` (a NaN score counts as 0); under TRL's a group of one gets 0 whatever
            ``singleton`` says.
        vectorized: verl's ``grpo_vectorized``: group statistics in float32
            (``verl.utils.group_mean_std``); a group of one gets mean 0 and std 1, ``singleton`` aside.

    Matches verl ``compute_grpo_outcome_advantage`` with ``norm_adv_by_std_in_grpo=True``.
    """
    if epsilon is None:
        epsilon = GRPO_EPS if convention == "verl" else TRL_EPS
    return _group_baseline("grpo", token_rewards, response_mask, group_ids, epsilon, True, singleton, masked_rewards,
                           convention, vectorized)


def dr_grpo(
    token_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    group_ids: Any,
    singleton: Singleton = "raw",
    masked_rewards: MaskedRewards = "keep",
    convention: Convention = "verl",
    vectorized: bool = False,
) -> OutcomeResult:
    """Dr.GRPO: ``A_i = score_i - mean_g``, no division by the std.

    Matches verl ``compute_grpo_outcome_advantage`` with ``norm_adv_by_std_in_grpo=False``
    (a group of one keeps its raw score, mean 0), or with ``convention="trl"``/``"trl-1.5"``
    TRL's ``scale_rewards="none"``. Arguments as :func:`grpo`.
    """
    return _group_baseline("dr_grpo", token_rewards, response_mask, group_ids, 0.0, False, singleton, masked_rewards,
                           convention, vectorized)


def grpo_batch_std(
    token_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    group_ids: Any,
    epsilon: float = TRL_EPS,
    masked_rewards: MaskedRewards = "keep",
    convention: Literal["trl", "trl-1.5"] = "trl",
) -> OutcomeResult:
    """GRPO with the group mean and the batch std: ``A_i = (score_i - mean_g) / (std_batch + epsilon)``.

    Matches TRL ``GRPOTrainer`` with ``scale_rewards="batch"`` (std over all B scores, unbiased,
    eps 1e-4). A group of one has mean equal to its score (TRL), so advantage 0.
    ``convention="trl"`` (trl >= 1.6): ``nanmean`` and TRL's ``nanstd``, a NaN score left out
    and given 0; ``"trl-1.5"``: ``mean`` and ``Tensor.std``, a NaN score counts as 0.
    """
    fn = "grpo_batch_std"
    check.choice(fn, "convention", convention, TRL_CONVENTIONS)
    check.epsilon(fn, epsilon)
    scores, mask, groups = _scores(fn, token_rewards, response_mask, group_ids, masked_rewards, allow_nan=True)
    found = _as_dtype(trl_group_advantages(trl_scores(scores, convention), groups, "batch", convention, epsilon), scores)
    sequence = found.advantages
    return OutcomeResult(sequence[:, None] * mask, sequence, scores, found.baseline, found.scale, "batch_std")


def rloo(
    token_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    group_ids: Any,
    singleton: Singleton = "raw",
    masked_rewards: MaskedRewards = "keep",
    convention: Convention = "verl",
    normalize_advantages: bool = False,
    vectorized: bool = False,
    reward_clip_range: Sequence[float] | None = None,
) -> OutcomeResult:
    """RLOO: ``A_i = score_i - mean of the other members`` of the group.

    ``convention="verl"``: computed as verl does, ``score * n / (n - 1) - mean_g * n / (n - 1)``;
    a group of one has no other member: ``singleton="raw"`` keeps its score (verl), ``"zero"``
    gives 0. ``convention="trl"``: TRL ``RLOOTrainer`` (trl >= 1.6),
    ``score - (sum_g - score) / (n - 1)`` over the scorable members (a NaN score is left out and
    gets 0, as does the one scorable member of a group), a group of one 0, and with
    ``normalize_advantages`` a batch z-score ``(A - nanmean) / (nanstd + 1e-4)`` (0 for a batch
    of one). ``"trl-1.5"``: the earlier ``RLOOTrainer`` (a NaN score counts as 0, ``Tensor.std``).
    TRL's ``RLOOTrainer`` first subtracts its KL penalty from each score, ``beta`` (``RLOOConfig``
    default 0.05) times the sequence's summed ``old - ref`` log-ratio; logs hold no reference
    log-probabilities, so the score here is the logged reward alone: a TRL run with ``beta != 0``
    differs by that penalty's leave-one-out.
    ``vectorized=True``: verl's ``rloo_vectorized``, ``(n r_i - sum_g) / (n - 1)``, a group of
    one 0 whatever ``singleton`` says. ``reward_clip_range=(low, high)``: TRL's
    ``RLOOConfig.reward_clip_range``, each score clamped to it before the leave-one-out (TRL
    1.5.0 to 1.16.0, ``RLOOTrainer._generate_and_score_completions``); a TRL option only.
    """
    fn = "rloo"
    check.flag(fn, "normalize_advantages", normalize_advantages)
    check.flag(fn, "vectorized", vectorized)
    check.choice(fn, "singleton", singleton, ("raw", "zero"))
    check.choice(fn, "convention", convention, ("verl", *TRL_CONVENTIONS))
    scores, mask, groups = _scores(fn, token_rewards, response_mask, group_ids, masked_rewards,
                                   allow_nan=convention != "verl")
    if reward_clip_range is not None and convention == "verl":
        raise check.EstimatorInputError(f"{fn}: reward_clip_range is TRL's option; pass convention='trl' with it")
    if convention != "verl":
        held = trl_scores(scores, convention)
        if reward_clip_range is not None:
            low, high = _clip_range(fn, reward_clip_range)
            held = held.clamp(min=low, max=high)  # TRL: rewards.clamp(min=range[0], max=range[1]); NaN stays NaN
        found = _as_dtype(trl_rloo_advantages(held, groups, normalize_advantages, convention), scores)
        label = "leave_one_out(trl)" + ("+batch_zscore" if normalize_advantages else "")
        sequence = found.advantages
        return OutcomeResult(sequence[:, None] * mask, sequence, scores, found.baseline, found.scale, label)
    if normalize_advantages:
        raise check.EstimatorInputError(f"{fn}: normalize_advantages is TRL's option; pass convention='trl' with it")
    if vectorized:
        n = group_sizes(groups).to(scores.dtype)
        totals = torch.bincount(groups.index, weights=scores)[groups.index]
        # verl: A_i = (n r_i - sum_g) / max(n - 1, 1), times (n > 1)
        sequence = ((n * scores - totals) / (n - 1).clamp_min(1)) * (n > 1)
        sequence = sequence.to(scores.dtype)
        return OutcomeResult(sequence[:, None] * mask, sequence, scores, scores - sequence, torch.ones_like(scores),
                             "leave_one_out(vectorized)")
    mean, _ = group_mean_std(scores, groups)
    n = group_sizes(groups).to(scores.dtype)
    several = n > 1
    # A_i = r_i n/(n-1) - mu_g n/(n-1) = r_i - (sum_g - r_i)/(n-1)
    loo = scores * n / (n - 1) - mean * n / (n - 1)
    single = scores if singleton == "raw" else torch.zeros_like(scores)
    sequence = torch.where(several, loo, single)
    baseline = torch.where(several, scores - sequence, torch.zeros_like(scores))
    return OutcomeResult(sequence[:, None] * mask, sequence, scores, baseline, torch.ones_like(scores), "leave_one_out")


def _clip_range(fn: str, value: Sequence[float]) -> tuple[float, float]:
    """``reward_clip_range`` as (low, high): two finite numbers, low at most high."""
    bounds = list(value)
    if len(bounds) != 2 or not all(isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b)
                                   for b in bounds) or bounds[0] > bounds[1]:
        raise check.EstimatorInputError(f"{fn}: reward_clip_range must be two finite numbers, low then high, "
                                        f"got {value!r}")
    return float(bounds[0]), float(bounds[1])


def _group_baseline(
    fn: str,
    token_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    group_ids: Any,
    epsilon: float,
    divide: bool,
    singleton: str,
    masked_rewards: str,
    convention: str,
    vectorized: bool = False,
) -> OutcomeResult:
    check.choice(fn, "singleton", singleton, ("raw", "zero"))
    check.choice(fn, "convention", convention, ("verl", *TRL_CONVENTIONS))
    check.epsilon(fn, epsilon)
    check.flag(fn, "divide", divide)
    check.flag(fn, "vectorized", vectorized)
    trl = convention != "verl"
    scores, mask, groups = _scores(fn, token_rewards, response_mask, group_ids, masked_rewards, allow_nan=trl)
    if vectorized and trl:
        raise check.EstimatorInputError(f"{fn}: vectorized is verl's grpo_vectorized; it takes convention='verl'")
    if vectorized:
        mean_g, std_g = group_mean_std_float32(scores, groups)
        mean = mean_g[groups.index]
        if divide:
            scale = std_g[groups.index] + epsilon
            sequence = (scores - mean) / scale  # A_i = (r_i - mu_g) / (sigma_g + eps), float32 statistics
        else:
            scale = torch.ones_like(scores)
            sequence = scores - mean
        label = ("group_std" if divide else "group_mean_only") + "(vectorized)"
        return OutcomeResult(sequence[:, None] * mask, sequence, scores, mean.to(scores.dtype), scale.to(scores.dtype),
                             label)
    if trl:
        rule = cast(TRLConvention, convention)
        found = trl_group_advantages(trl_scores(scores, rule), groups, "group" if divide else "none", rule,
                                     epsilon if divide else TRL_EPS)
        sequence, mean, scale = _as_dtype(found, scores)
    else:
        sequence, mean, scale = group_normalise(scores, groups, epsilon, divide, singleton)
    label = ("group_std" if divide else "group_mean_only") + (f"({convention})" if trl else "")
    return OutcomeResult(sequence[:, None] * mask, sequence, scores, mean, scale, label)


def group_normalise(
    scores: torch.Tensor, groups: GroupIndex, epsilon: float, divide: bool = True, singleton: str = "raw"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """verl's per-group normalisation of (B,) scores: (advantage, mean, std + eps), each (B,)."""
    mean, std = group_mean_std(scores, groups)
    alone = group_sizes(groups) == 1
    if singleton == "raw":
        mean = torch.where(alone, torch.zeros_like(mean), mean)  # verl: mean 0, std 1 for a group of one
    std = torch.where(alone, torch.ones_like(std), std)
    if divide:
        # verl's group-of-one std is a float32 tensor(1.0): (1 + eps) is rounded in float32
        one_plus_eps = (torch.ones((), dtype=torch.float32, device=scores.device) + epsilon).to(scores.dtype)
        scale = torch.where(alone, one_plus_eps, std + epsilon)
        advantage = (scores - mean) / scale  # A_i = (r_i - mu_g) / (sigma_g + eps)
    else:
        scale = torch.ones_like(scores)
        advantage = scores - mean  # Dr.GRPO: A_i = r_i - mu_g
    if singleton == "zero":
        advantage = torch.where(alone, torch.zeros_like(advantage), advantage)
    return advantage, mean, scale


def _as_dtype(found: TRLAdvantages, like: torch.Tensor) -> TRLAdvantages:
    """TRL's float32 results in the scores' dtype."""
    return TRLAdvantages(*(value.to(like.dtype) for value in found))


def _scores(
    fn: str, token_rewards: torch.Tensor, response_mask: torch.Tensor, group_ids: Any, masked_rewards: str,
    allow_nan: bool = False, counts: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, GroupIndex]:
    """Validated scores (B,), mask (B, T) and groups of an outcome estimator.

    A response with no model tokens is kept, as verl keeps it: it counts in its group's
    statistics and its advantage row is all zeros. ``allow_nan``: a NaN score (TRL's unscorable
    completion) passes; an infinite one never does. ``counts``: the estimator reads only how many
    model tokens each response has, so ``response_mask`` may be (B,) integer counts instead (then
    ``token_rewards`` is (B, L) for any L, and every reward counts)."""
    token_rewards = check.float_tensor(fn, "token_rewards", token_rewards, ndim=2)
    check.choice(fn, "masked_rewards", masked_rewards, ("keep", "drop"))
    if counts:
        response_mask = model_token_counts(fn, "response_mask", response_mask, token_rewards.shape[0])
    else:
        response_mask = check.bool_mask(fn, "response_mask", response_mask)
    if response_mask.dim() == 1:
        if masked_rewards == "drop":
            raise check.EstimatorInputError(f"{fn}: masked_rewards='drop' needs the (B, T) response_mask, not counts")
    else:
        check.same_shape(fn, token_rewards=token_rewards, response_mask=response_mask)
    check.same_device(fn, token_rewards=token_rewards, response_mask=response_mask)
    check.nonempty_batch(fn, "token_rewards", token_rewards)
    if masked_rewards == "drop":
        token_rewards = torch.where(response_mask, token_rewards, 0.0)
    scores = token_rewards.sum(dim=-1)  # score_i = sum_t r_{i,t}
    check.finite_where(fn, "scores (sum of token_rewards)", scores, ~torch.isnan(scores) if allow_nan else None)
    groups = group_index(fn, group_ids, scores.shape[0], scores.device)
    return scores, response_mask, groups

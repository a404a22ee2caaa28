"""Advantage estimators and their diagnostics, in torch.

Recompute, for the same trajectories, the advantages each estimator would have given, as the
reference trainers (verl, TRL) compute them. Every estimator is a pure function of tensors;
estimation and normalisation are separate calls, and each result records its normalisation.

Notation in docstrings: B trajectories, T token positions, G groups, K reward channels.

Token level, with a critic or none:
    :func:`gae`, :func:`reinforce`, :func:`discounted_returns`, :func:`masked_whiten`
Outcome level, group baselines:
    :func:`grpo`, :func:`dr_grpo`, :func:`grpo_batch_std`, :func:`rloo`
Several reward channels:
    :func:`gdpo_verl`, :func:`gdpo_trl`, :func:`sum_then_normalize`, :func:`gdpo_dynamic`,
    :func:`dynamic_weights`
Loss aggregation:
    :func:`aggregation_weights`
Diagnostics:
    :func:`explained_variance`, :func:`advantage_stats`, :func:`sign_streaks`,
    :func:`advantage_outliers`, :func:`clip_share`, :func:`critic_grad_clip`,
    :func:`channel_diagnostics`
Tables:
    :func:`recompute` (Polars frames in the trajlens schema)

This package imports torch; ``import trajlens`` does not.
"""

from __future__ import annotations

from trajlens.estimators._validate import EstimatorInputError
from trajlens.estimators.aggregation import AGGREGATION_MODES, AggregationWeights, aggregation_weights
from trajlens.estimators.channels import ChannelDiagnostics, channel_diagnostics
from trajlens.estimators.diagnostics import (
    AdvantageStats,
    GradClipReport,
    Outliers,
    SignStreaks,
    advantage_outliers,
    advantage_stats,
    clip_share,
    critic_grad_clip,
    explained_variance,
    sign_streaks,
)
from trajlens.estimators.dynamic import (
    DynamicGDPOResult,
    DynamicWeightConfig,
    DynamicWeights,
    dynamic_weights,
    gdpo_dynamic,
)
from trajlens.estimators.frame import ESTIMATORS, recompute
from trajlens.estimators.gae import GAEResult, discounted_returns, gae
from trajlens.estimators.gdpo import GDPOResult, gdpo_trl, gdpo_verl, sum_then_normalize
from trajlens.estimators.grpo import OutcomeResult, dr_grpo, grpo, grpo_batch_std, rloo
from trajlens.estimators.reinforce import ReinforceResult, reinforce
from trajlens.estimators.whiten import WhitenResult, masked_mean, masked_whiten


__all__ = [
    "AGGREGATION_MODES",
    "AdvantageStats",
    "AggregationWeights",
    "ChannelDiagnostics",
    "DynamicGDPOResult",
    "DynamicWeightConfig",
    "DynamicWeights",
    "ESTIMATORS",
    "EstimatorInputError",
    "GAEResult",
    "GDPOResult",
    "GradClipReport",
    "OutcomeResult",
    "Outliers",
    "ReinforceResult",
    "SignStreaks",
    "WhitenResult",
    "advantage_outliers",
    "advantage_stats",
    "aggregation_weights",
    "channel_diagnostics",
    "clip_share",
    "critic_grad_clip",
    "discounted_returns",
    "dr_grpo",
    "dynamic_weights",
    "explained_variance",
    "gae",
    "gdpo_dynamic",
    "gdpo_trl",
    "gdpo_verl",
    "grpo",
    "grpo_batch_std",
    "masked_mean",
    "masked_whiten",
    "recompute",
    "reinforce",
    "rloo",
    "sign_streaks",
    "sum_then_normalize",
]

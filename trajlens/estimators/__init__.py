"""Advantage estimators and their diagnostics, in torch.

Recompute, for the same trajectories, the advantages each estimator would have given, as the
reference trainers (verl, TRL) compute them. Every estimator is a pure function of tensors;
estimation and normalisation are separate calls, and each result records its normalisation.

Notation in docstrings: B trajectories, T token positions, G groups, K reward channels.

Token level, with a critic or none:
    :func:`gae`, :func:`reinforce`, :func:`reinforce_plus_plus`, :func:`discounted_returns`,
    :func:`masked_whiten`, :func:`whitening_of_moments`
Token level, baselines per position:
    :func:`remax`, :func:`optimal_token_baseline`, :func:`tir_optimal_token_baseline`
Outcome level, group baselines:
    :func:`grpo`, :func:`dr_grpo`, :func:`grpo_batch_std`, :func:`rloo`, :func:`grpo_passk`,
    :func:`opo`, :func:`gpg`, :func:`reinforce_plus_plus_baseline`
Several reward channels:
    :func:`gdpo_verl`, :func:`gdpo_trl`, :func:`sum_then_normalize`, :func:`gdpo_dynamic`,
    :func:`dynamic_weights`
Loss aggregation:
    :func:`aggregation_weights`
Diagnostics:
    :func:`explained_variance`, :func:`advantage_stats`, :func:`sign_streaks`, :func:`flagged_runs`,
    :func:`advantage_outliers`, :func:`clip_share`, :func:`critic_grad_clip`,
    :func:`channel_diagnostics`
Tables:
    :func:`recompute` (Polars frames in the trajlens schema; :class:`Recomputer` for several
    estimators on the same frames), :func:`identify_advantages` (which estimator and convention
    produced a run's logged advantages)
The registry (what each estimator needs, its options, reference and version):
    :data:`ESTIMATOR_REGISTRY`, :func:`estimator_spec`, :class:`EstimatorSpec`, :class:`RunFacts`,
    :func:`run_facts`, :func:`declared_estimators`; :class:`EstimatorChoice` (an estimator under
    a label, with options)
What a run trained with:
    :func:`trained_with` (its estimator as an :class:`EstimatorChoice`, and its loss aggregation,
    from its config or an identify verdict)

Slow loop references transcribed from the trainers (verl, TRL), to check the kernels against:
    :mod:`trajlens.estimators.reference`

Names are imported on first use: the registry (``trajlens.estimators.registry``) reads without
torch; every tensor function imports it. ``import trajlens`` imports neither.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "AGGREGATION_MODES": "spec",
    "AggregationWeights": "aggregation",
    "aggregation_weights": "aggregation",
    "ChannelDiagnostics": "channels",
    "channel_diagnostics": "channels",
    "AdvantageStats": "diagnostics",
    "GradClipReport": "diagnostics",
    "Outliers": "diagnostics",
    "SignStreaks": "diagnostics",
    "advantage_outliers": "diagnostics",
    "advantage_stats": "diagnostics",
    "clip_share": "diagnostics",
    "critic_grad_clip": "diagnostics",
    "explained_variance": "diagnostics",
    "sign_streaks": "diagnostics",
    "flagged_runs": "diagnostics",
    "DynamicGDPOResult": "dynamic",
    "DynamicWeightConfig": "dynamic",
    "DynamicWeights": "dynamic",
    "dynamic_weights": "dynamic",
    "gdpo_dynamic": "dynamic",
    "EstimatorInputError": "_errors",
    "ESTIMATORS": "adapters",
    "recompute": "adapters",
    "Recomputer": "adapters",
    "GAEResult": "gae",
    "discounted_returns": "gae",
    "gae": "gae",
    "GDPOResult": "gdpo",
    "gdpo_trl": "gdpo",
    "gdpo_verl": "gdpo",
    "sum_then_normalize": "gdpo",
    "OutcomeResult": "grpo",
    "dr_grpo": "grpo",
    "grpo": "grpo",
    "grpo_batch_std": "grpo",
    "rloo": "grpo",
    "ReinforceResult": "reinforce",
    "reinforce": "reinforce",
    "reinforce_plus_plus": "reinforce",
    "reinforce_plus_plus_baseline": "group_variants",
    "grpo_passk": "group_variants",
    "opo": "group_variants",
    "gpg": "group_variants",
    "TokenBaselineResult": "token_baselines",
    "remax": "token_baselines",
    "optimal_token_baseline": "token_baselines",
    "tir_optimal_token_baseline": "token_baselines",
    "Identification": "identify",
    "identify_advantages": "identify",
    "ESTIMATOR_REGISTRY": "registry",
    "EstimatorChoice": "spec",
    "EstimatorSpec": "registry",
    "Input": "registry",
    "Option": "registry",
    "RunFacts": "registry",
    "Statistics": "registry",
    "declared_estimators": "registry",
    "estimator_spec": "registry",
    "run_facts": "registry",
    "trainer_choice": "registry",
    "Releases": "spec",
    "TrainerRelease": "spec",
    "parse_trainer": "spec",
    "run_release": "trained",
    "AGGREGATION_KEYS": "trained",
    "TrainedWith": "trained",
    "trained_with": "trained",
    "WhitenResult": "whiten",
    "Whitening": "whiten",
    "whitening_of_moments": "whiten",
    "masked_mean": "whiten",
    "masked_whiten": "whiten",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'trajlens.estimators' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"trajlens.estimators.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


class _Package(types.ModuleType):
    """Keeps a function bound where its submodule shares its name (``gae``, ``grpo``, ``reinforce``).

    Importing a submodule binds it on the package; an exported function of the same name wins, as
    it did when this package imported its names eagerly.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _EXPORTS.get(name) == name and hasattr(value, name):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

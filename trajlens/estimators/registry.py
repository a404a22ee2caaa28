"""The estimator registry: one declarative entry per advantage estimator.

Everything trajlens knows about an estimator is written here once, as data, and read by
:func:`trajlens.estimators.adapters` (which inputs to join, which options to accept), the
``trajlens advantages`` command (choices and help), the report (which estimators a run allows,
under which labels, and how their statistics are summarised) and ``docs/estimators.md``
(rendered by :func:`render_markdown`; regenerate with
``python -m trajlens.estimators.registry docs/estimators.md``).

The public surface is small:

* :data:`ESTIMATOR_REGISTRY` — name -> :class:`EstimatorSpec`, in display order;
* :func:`estimator_spec` — the spec of one name, with a one-line error for an unknown one;
* :class:`RunFacts` and :func:`run_facts` — what a run's frames hold, for :meth:`EstimatorSpec.applies`;
* :func:`declared_estimators` — the estimator a run's logged config says it trained with
  (:func:`trajlens.estimators.trained_with` gives its label, options and loss aggregation).

The types live in :mod:`trajlens.estimators.spec`. Neither module imports torch or the tensor
functions: an entry names its function by ``"module:attribute"`` and
:meth:`EstimatorSpec.tensor_function` imports it on demand, so the CLI and the docs read the
registry without loading torch.

Adding an estimator: its tensor function (with its reference and version in the docstring, and
a test against a loop transcribed from that reference), one entry here, and, when it reads
inputs no existing adapter feeds it, an adapter in ``trajlens.estimators.adapters.ADAPTERS``.
Its entry is all the rest of trajlens reads: the adapter, whether it carries state across
steps, its flat attribution kernel, its option defaults, its report labels, the trainers'
conventions :func:`~trajlens.estimators.identify_advantages` tries, and the config values that
declare it (read by :func:`trajlens.estimators.trained_with`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any, cast

from trajlens.estimators._errors import EstimatorInputError
from trajlens.estimators.spec import (
    _INPUT_CHECKS,
    COMPARED_RELEASES,
    Declaration,
    EstimatorChoice,
    EstimatorSpec,
    FlatScan,
    InReport,
    Input,
    Kind,
    Option,
    Releases,
    RunFacts,
    Statistics,
    TrainerRelease,
    UNSCORED_CONVENTIONS,
    parse_trainer,
    recomputation_label,
)

__all__ = [
    "ESTIMATOR_NAMES", "ESTIMATOR_REGISTRY", "REPORT_VARIANTS", "Declaration", "EstimatorChoice", "EstimatorSpec",
    "FlatScan", "InReport", "Input", "Kind", "Option", "RunFacts", "Statistics", "convention_options",
    "declared_estimators", "estimator_spec",
    "label_mismatch", "named_computation", "reads_tokens", "release_conventions", "render_markdown",
    "render_readme_table", "run_facts", "saved_label", "trainer_choice",
]


# Options shared by several estimators.
_SCORE = Option("score", "str", "reward", "Judge each trajectory by its `reward`, or by the sum of its `token_rewards`.",
                ("reward", "token_rewards"))
_MASKED = Option("masked_rewards", "str", "keep",
                 "`keep` sums every position of the token rewards (verl); `drop` only model tokens.", ("keep", "drop"))
_SINGLETON = Option("singleton", "str", "raw",
                    "A group of one: `raw` keeps verl's rule (mean 0, std 1); `zero` gives advantage 0.", ("raw", "zero"))
_CHANNELS = Option("channels", "list", None, "Reward channels to use, in order (default: every channel seen).",
                   items="name")
_WEIGHTS = Option("weights", "list|dict", None, "Channel weights, a list in channel order or {name: weight}; ones by default.",
                  items="weight")
_GAMMA = Option("gamma", "float", 1.0, "Discount in [0, 1].")
_TRL_VERSION = Option("convention", "str", "trl",
                      "`trl`: trl >= 1.6, a trajectory whose every channel is NaN is left out of the "
                      "statistics and gets 0; `trl-1.5`: trl <= 1.5, it sums to 0 and counts.", ("trl", "trl-1.5"))
_GROUP_CONVENTION = Option(
    "convention", "str", "verl", "`verl`, or TRL's GRPOTrainer: `trl` (trl >= 1.6: a NaN score is unscorable, left out "
    "of the statistics and given 0) or `trl-1.5` (trl <= 1.5: a NaN score counts as 0); under TRL's a group of one "
    "gets 0.", ("verl", "trl", "trl-1.5"))
_VECTORIZED = Option("vectorized", "bool", False, "verl's vectorised estimator (`grpo_vectorized`: group statistics in "
                     "float32; `rloo_vectorized`: a group of one gets 0).")
_OTB_OPTIONS = (Option("handle_zero_tail", "bool", True, "Zero the sole longest member's baseline past the "
                       "second-longest length (verl's default)."),
                Option("epsilon", "float", 1e-8, "Added to the baseline's denominator."))
_RETURNS = Option("convention", "str", "carry",
                   "`carry`: verl >= 0.9, the running return carried through observation spans to the next model "
                   "token; `reset`: verl <= 0.8, reset at every mask-0 token (observation spans too).", ("carry", "reset"))
_VERL = "verl 0.9.0 (verl/trainer/ppo/core_algos.py; identical to main 1dda039b, estimators unchanged in 0.9.1)"
_TRL_GRPO = "trl 1.16.0 (trl/trainer/grpo_trainer.py; advantage code unchanged since 1.6.0)"
_TRL_RLOO = "trl 1.16.0 (trl/trainer/rloo_trainer.py; advantage code unchanged since 1.6.0)"
# The release ranges the conventions reproduce (bounds inclusive; compared: verl 0.8.0, 0.9.0,
# 0.9.1 and trl 1.5.0, 1.6.0, 1.16.0; an unbounded side holds the releases compared on that side)
_ANY_VERL = (Releases("verl"),)
_VERL_08 = (Releases("verl", last="0.8"),)
_VERL_09 = (Releases("verl", first="0.9"),)
_TRL_15 = (Releases("trl", last="1.5"),)
_TRL_16 = (Releases("trl", first="1.6"),)
_ADV = "algorithm.adv_estimator"
_NO_STD = ("algorithm.norm_adv_by_std_in_grpo", "false")
"""verl's trainer hands this flag to ``grpo`` alone, and ``grpo_passk`` reads it from its config;
``grpo_vectorized`` and ``gdpo`` never see it and divide by the std whatever it says
(``compute_advantage`` in verl 0.8.0 to 0.9.1, ``trainer/ppo/ray_trainer.py``)."""


def _verl(value: str, label: str | None = None) -> Declaration:
    """``algorithm.adv_estimator=value`` declares the entry (under ``label``, its name by default)."""
    return Declaration(((_ADV, value),), label or value)

_SPECS: tuple[EstimatorSpec, ...] = (
    EstimatorSpec(
        name="gae",
        summary="Generalised advantage estimation with the critic, observation tokens skipped; optionally whitened.",
        function="trajlens.estimators.gae:gae",
        kind=Kind.TOKEN,
        inputs=Input.TOKEN_ARRAYS | Input.CRITIC_VALUES,
        options=(
            _GAMMA,
            Option("lam", "float", 1.0, "GAE lambda in [0, 1]."),
            Option("whiten", "bool", True, "Whiten over the batch's model tokens afterwards, as verl's estimator does."),
        ),
        reference="verl `compute_gae_advantage_return` (+ `masked_whiten`)",
        reference_version=_VERL,
        statistics=Statistics.MODEL_TOKENS,
        adapter="critic",
        flat_scans=(FlatScan(critic=True),),
        report_variants=(EstimatorChoice("gae_raw", "gae", {"gamma": 1.0, "lam": 1.0, "whiten": False}),
                         EstimatorChoice("gae_whitened", "gae", {"gamma": 1.0, "lam": 1.0, "whiten": True})),
        conventions=(EstimatorChoice("gae_whitened", "gae", {"whiten": True}, "verl GAE (gamma 1, lambda 1), whitened",
                                     _ANY_VERL),
                     EstimatorChoice("gae_raw", "gae", {"whiten": False}, "GAE (gamma 1, lambda 1), not whitened")),
        declared_by=(_verl("gae", "gae_whitened"),
                     Declaration(((_ADV, "gae"), ("algorithm.whiten_advantages", "false")), "gae_raw")),
        config_options=(("gamma", "algorithm.gamma"), ("lam", "algorithm.lam")),
    ),
    EstimatorSpec(
        name="reinforce",
        summary="Discounted return-to-go over model tokens, no baseline; raw unless whitened.",
        function="trajlens.estimators.reinforce:reinforce",
        kind=Kind.TOKEN,
        inputs=Input.TOKEN_ARRAYS,
        options=(
            _GAMMA,
            Option("whiten", "bool", False, "Whiten over the batch's model tokens afterwards."),
            _RETURNS,
        ),
        reference="the discounted sum of verl `compute_reinforce_plus_plus_outcome_advantage`, not whitened",
        reference_version=_VERL,
        statistics=Statistics.MODEL_TOKENS,
        report=InReport.NEVER,
        adapter="returns",
        flat_scans=(FlatScan(critic=False, when=(("convention", "carry"),)),),
        conventions=(EstimatorChoice("reinforce_raw", "reinforce", {}, "REINFORCE, raw returns"),),
    ),
    EstimatorSpec(
        name="grpo",
        summary="Group-relative: (score - group mean) / (group std + eps).",
        function="trajlens.estimators.grpo:grpo",
        kind=Kind.OUTCOME,
        inputs=Input.GROUPS | Input.REWARDS,
        options=(_SCORE, Option("epsilon", "float", None, "Added to the unbiased group std (default: the convention's, "
                                "verl 1e-6, TRL 1e-4)."), _SINGLETON, _MASKED, _GROUP_CONVENTION, _VECTORIZED),
        reference="verl `compute_grpo_outcome_advantage` (loop version)",
        reference_version=_VERL,
        statistics=Statistics.TRAJECTORIES,
        conventions=(EstimatorChoice("verl_grpo", "grpo", {}, "verl GRPO (group std, eps 1e-6)", _ANY_VERL),
                     EstimatorChoice("trl_grpo_group", "grpo", {"epsilon": 1e-4, "singleton": "zero", "convention": "trl"},
                                     "TRL >= 1.6 GRPO, scale_rewards=group, eps 1e-4", _TRL_16),
                     EstimatorChoice("trl_grpo_group_1.5", "grpo",
                                     {"epsilon": 1e-4, "singleton": "zero", "convention": "trl-1.5"},
                                     "TRL <= 1.5 GRPO, scale_rewards=group, eps 1e-4", _TRL_15),
                     EstimatorChoice("verl_grpo_vectorized", "grpo", {"vectorized": True},
                                     "verl GRPO, grpo_vectorized (float32 group statistics)", _ANY_VERL),
                     EstimatorChoice("verl_grpo_eps_1e-4", "grpo", {"epsilon": 1e-4}, "verl GRPO with epsilon 1e-4")),
        declared_by=(_verl("grpo"), _verl("grpo_vectorized", "verl_grpo_vectorized"),
                     # verl ignores the flag here (see _NO_STD): still the std-dividing estimator
                     Declaration(((_ADV, "grpo_vectorized"), _NO_STD), "verl_grpo_vectorized"),
                     Declaration((("scale_rewards", "group"),), "trl_grpo_group"),
                     Declaration((("scale_rewards", "true"),), "trl_grpo_group")),
    ),
    EstimatorSpec(
        name="dr_grpo",
        summary="Dr.GRPO: score - group mean, no division by the std.",
        function="trajlens.estimators.grpo:dr_grpo",
        kind=Kind.OUTCOME,
        inputs=Input.GROUPS | Input.REWARDS,
        options=(_SCORE, _SINGLETON, _MASKED, _GROUP_CONVENTION, _VECTORIZED),
        reference="verl `compute_grpo_outcome_advantage` with `norm_adv_by_std_in_grpo=False`",
        reference_version=_VERL,
        statistics=Statistics.TRAJECTORIES,
        conventions=(EstimatorChoice("trl_grpo_none", "dr_grpo", {"singleton": "zero", "convention": "trl"},
                                     "TRL >= 1.6 GRPO, scale_rewards=none", _TRL_16),
                     EstimatorChoice("trl_grpo_none_1.5", "dr_grpo", {"singleton": "zero", "convention": "trl-1.5"},
                                     "TRL <= 1.5 GRPO, scale_rewards=none", _TRL_15),
                     EstimatorChoice("verl_dr_grpo", "dr_grpo", {}, "verl Dr.GRPO (norm_adv_by_std_in_grpo=False)", _ANY_VERL)),
        declared_by=(Declaration(((_ADV, "grpo"), _NO_STD), "dr_grpo"),
                     Declaration((("scale_rewards", "none"),), "trl_grpo_none"),
                     Declaration((("scale_rewards", "false"),), "trl_grpo_none")),
    ),
    EstimatorSpec(
        name="grpo_batch_std",
        summary="Group mean, batch std: (score - group mean) / (std of all scores + eps).",
        function="trajlens.estimators.grpo:grpo_batch_std",
        kind=Kind.OUTCOME,
        inputs=Input.GROUPS | Input.REWARDS,
        options=(_SCORE, Option("epsilon", "float", 1e-4, "Added to the batch std (TRL 1e-4)."), _MASKED,
                 Option("convention", "str", "trl", "`trl` (trl >= 1.6: `nanmean` and TRL's `nanstd`, a NaN score "
                        "left out and given 0) or `trl-1.5` (trl <= 1.5: `mean`, `Tensor.std`, a NaN score counts as 0).",
                        ("trl", "trl-1.5"))),
        reference='TRL GRPOTrainer `scale_rewards="batch"`',
        reference_version=_TRL_GRPO,
        statistics=Statistics.TRAJECTORIES,
        report=InReport.WHEN_DECLARED,
        conventions=(EstimatorChoice("trl_grpo_batch", "grpo_batch_std", {}, "TRL >= 1.6 GRPO, scale_rewards=batch, eps 1e-4",
                                     _TRL_16),
                     EstimatorChoice("trl_grpo_batch_1.5", "grpo_batch_std", {"convention": "trl-1.5"},
                                     "TRL <= 1.5 GRPO, scale_rewards=batch, eps 1e-4", _TRL_15)),
        declared_by=(Declaration(((_ADV, "grpo"), ("algorithm.norm_adv", "batch_std")), "grpo_batch_std"),
                     Declaration((("scale_rewards", "batch"),), "trl_grpo_batch"),
                     Declaration((("algorithm.scale_rewards", "batch"),), "grpo_batch_std")),
    ),
    EstimatorSpec(
        name="rloo",
        summary="Leave-one-out: score - mean of the other members of the group.",
        function="trajlens.estimators.grpo:rloo",
        kind=Kind.OUTCOME,
        inputs=Input.GROUPS | Input.REWARDS,
        options=(_SCORE, _SINGLETON, _MASKED,
                 Option("convention", "str", "verl", "`verl` (a group of one keeps its score), `trl` (RLOOTrainer, "
                        "trl >= 1.6: a group of one, a NaN score and a group's one scorable member get 0) or `trl-1.5` "
                        "(trl <= 1.5: a NaN score counts as 0); the logged reward alone, without TRL's KL penalty "
                        "(`beta`, default 0.05), which needs reference log-probabilities.", ("verl", "trl", "trl-1.5")),
                 Option("normalize_advantages", "bool", False,
                        "TRL `normalize_advantages`: z-score over the batch, eps 1e-4 (with convention `trl` or `trl-1.5`)."),
                 _VECTORIZED,
                 Option("reward_clip_range", "list", None, "TRL `reward_clip_range`: [low, high] each score is clamped "
                        "to before the leave-one-out (with convention `trl` or `trl-1.5`).", items="weight")),
        reference="verl `compute_rloo_outcome_advantage`; TRL `RLOOTrainer` (convention `trl`)",
        reference_version=_VERL + "; " + _TRL_RLOO,
        statistics=Statistics.TRAJECTORIES,
        conventions=(EstimatorChoice("verl_rloo", "rloo", {}, "verl RLOO", _ANY_VERL),
                     EstimatorChoice("verl_rloo_vectorized", "rloo", {"vectorized": True},
                                     "verl RLOO, rloo_vectorized (a group of one gets 0)", _ANY_VERL),
                     EstimatorChoice("trl_rloo", "rloo", {"convention": "trl"}, "TRL >= 1.6 RLOO", _TRL_16),
                     EstimatorChoice("trl_rloo_1.5", "rloo", {"convention": "trl-1.5"}, "TRL <= 1.5 RLOO", _TRL_15),
                     EstimatorChoice("trl_rloo_normalized", "rloo", {"convention": "trl", "normalize_advantages": True},
                                     "TRL >= 1.6 RLOO, normalize_advantages=True", _TRL_16)),
        declared_by=(_verl("rloo"), _verl("rloo_vectorized", "verl_rloo_vectorized")),
    ),
    EstimatorSpec(
        name="reinforce_plus_plus",
        summary="REINFORCE++: discounted returns whitened over the batch's model tokens.",
        function="trajlens.estimators.reinforce:reinforce_plus_plus",
        kind=Kind.TOKEN,
        inputs=Input.TOKEN_ARRAYS,
        options=(_GAMMA, _RETURNS),
        reference="verl `compute_reinforce_plus_plus_outcome_advantage`",
        reference_version=_VERL,
        statistics=Statistics.MODEL_TOKENS,
        report=InReport.WHEN_DECLARED,
        adapter="returns",
        flat_scans=(FlatScan(critic=False, when=(("convention", "carry"),), whitened=True, compared_by_default=False),
                    FlatScan(critic=False, when=(("convention", "reset"),), reset=True, whitened=True,
                             compared_by_default=False)),
        conventions=(EstimatorChoice("verl_reinforce_pp", "reinforce_plus_plus", {},
                                     "verl >= 0.9 REINFORCE++ (return carried through observation spans)", _VERL_09),
                     EstimatorChoice("verl_0.8_reinforce_pp", "reinforce_plus_plus", {"convention": "reset"},
                                     "verl <= 0.8 REINFORCE++ (return reset at every mask-0 token)", _VERL_08)),
        declared_by=(_verl("reinforce_plus_plus"),),
        config_options=(("gamma", "algorithm.gamma"),),
    ),
    EstimatorSpec(
        name="reinforce_plus_plus_baseline",
        summary="REINFORCE++-baseline: score - group mean, whitened over the batch's model tokens.",
        function="trajlens.estimators.group_variants:reinforce_plus_plus_baseline",
        kind=Kind.OUTCOME,
        inputs=Input.GROUPS | Input.REWARDS | Input.TOKEN_COUNTS,
        options=(_SCORE,),
        reference="verl `compute_reinforce_plus_plus_baseline_outcome_advantage`",
        reference_version=_VERL,
        statistics=Statistics.MODEL_TOKENS,
        report=InReport.WHEN_DECLARED,
        conventions=(EstimatorChoice("verl_reinforce_pp_baseline", "reinforce_plus_plus_baseline", {}, "verl REINFORCE++-baseline",
                                     _ANY_VERL),),
        declared_by=(_verl("reinforce_plus_plus_baseline"),),
    ),
    EstimatorSpec(
        name="grpo_passk",
        summary="GRPO pass@k: only each group's best member is credited, (r_max - r_second) / (std + eps).",
        function="trajlens.estimators.group_variants:grpo_passk",
        kind=Kind.OUTCOME,
        inputs=Input.FULL_GROUPS | Input.REWARDS,
        options=(_SCORE, Option("epsilon", "float", 1e-6, "Added to the group std."),
                 Option("norm_adv_by_std_in_grpo", "bool", True, "Divide the gap by the group std."), _MASKED),
        reference="verl `compute_grpo_passk_outcome_advantage`",
        reference_version=_VERL,
        statistics=Statistics.TRAJECTORIES,
        report=InReport.WHEN_DECLARED,
        conventions=(EstimatorChoice("verl_grpo_passk", "grpo_passk", {}, "verl GRPO pass@k", _ANY_VERL),
                     EstimatorChoice("verl_grpo_passk_no_std", "grpo_passk", {"norm_adv_by_std_in_grpo": False},
                                     "verl GRPO pass@k, norm_adv_by_std_in_grpo=False")),
        declared_by=(_verl("grpo_passk"), Declaration(((_ADV, "grpo_passk"), _NO_STD), "verl_grpo_passk_no_std")),
    ),
    EstimatorSpec(
        name="opo",
        summary="OPO: score - the length-weighted group mean, sum L r / sum L.",
        function="trajlens.estimators.group_variants:opo",
        kind=Kind.OUTCOME,
        inputs=Input.GROUPS | Input.REWARDS | Input.TOKEN_COUNTS,
        options=(_SCORE,),
        reference="verl `compute_opo_outcome_advantage`",
        reference_version=_VERL,
        statistics=Statistics.TRAJECTORIES,
        report=InReport.WHEN_DECLARED,
        conventions=(EstimatorChoice("verl_opo", "opo", {}, "verl OPO", _ANY_VERL),),
        declared_by=(_verl("opo"),),
    ),
    EstimatorSpec(
        name="gpg",
        summary="GPG: alpha (score - group mean) / f_norm, alpha = batch size / nonzero scores.",
        function="trajlens.estimators.group_variants:gpg",
        kind=Kind.OUTCOME,
        inputs=Input.GROUPS | Input.REWARDS,
        options=(_SCORE, Option("f_norm", "float", 1.0, "Divisor of every advantage."), _MASKED),
        reference="verl `compute_gpg_outcome_advantage`",
        reference_version=_VERL,
        statistics=Statistics.TRAJECTORIES,
        report=InReport.WHEN_DECLARED,
        conventions=(EstimatorChoice("verl_gpg", "gpg", {}, "verl GPG", _ANY_VERL),),
        declared_by=(_verl("gpg"),),
    ),
    EstimatorSpec(
        name="remax",
        summary="ReMax: reward-to-go minus the greedy response's reward.",
        function="trajlens.estimators.token_baselines:remax",
        kind=Kind.TOKEN,
        inputs=Input.TOKEN_ARRAYS | Input.BASELINE_REWARDS,
        options=(),
        reference="verl `compute_remax_outcome_advantage`",
        reference_version=_VERL,
        statistics=Statistics.MODEL_TOKENS,
        report=InReport.WHEN_DECLARED,
        adapter="baseline_rewards",
        declared_by=(_verl("remax"),),
    ),
    EstimatorSpec(
        name="optimal_token_baseline",
        summary="Optimal token baseline: per position, the group's path-variance-weighted mean return.",
        function="trajlens.estimators.token_baselines:optimal_token_baseline",
        kind=Kind.TOKEN,
        inputs=Input.TOKEN_ARRAYS | Input.GROUPS | Input.LOG_PROBS | Input.SUM_PI_SQUARED,
        options=_OTB_OPTIONS,
        reference="verl `compute_optimal_token_baseline_advantage`",
        reference_version=_VERL,
        statistics=Statistics.MODEL_TOKENS,
        report=InReport.WHEN_DECLARED,
        adapter="token_baseline",
        declared_by=(_verl("optimal_token_baseline"),),
    ),
    EstimatorSpec(
        name="tir_optimal_token_baseline",
        summary="The optimal token baseline over compacted model tokens (multi-turn).",
        function="trajlens.estimators.token_baselines:tir_optimal_token_baseline",
        kind=Kind.TOKEN,
        inputs=Input.TOKEN_ARRAYS | Input.GROUPS | Input.LOG_PROBS | Input.SUM_PI_SQUARED,
        options=_OTB_OPTIONS,
        reference="verl `compute_multi_turn_optimal_token_baseline_advantage`",
        reference_version=_VERL,
        statistics=Statistics.MODEL_TOKENS,
        report=InReport.WHEN_DECLARED,
        adapter="token_baseline",
        declared_by=(_verl("tir_optimal_token_baseline"),),
    ),
    EstimatorSpec(
        name="gdpo_verl",
        summary="GDPO as verl: per-channel GRPO, weighted sum, whitened over the batch's model tokens.",
        function="trajlens.estimators.gdpo:gdpo_verl",
        kind=Kind.CHANNEL,
        inputs=Input.CHANNELS | Input.FULL_CHANNELS | Input.TOKEN_COUNTS,
        options=(_CHANNELS, _WEIGHTS, Option("epsilon", "float", 1e-6, "Added to each channel's group std."),
                 Option("divide_by_std", "bool", True, "False skips the per-channel division (the function's "
                        "`norm_adv_by_std_in_grpo` argument, which verl's trainer never passes it).")),
        reference="verl `compute_gdpo_outcome_advantage` (and the NVlabs GDPO fork)",
        reference_version=_VERL,
        statistics=Statistics.MODEL_TOKENS,
        adapter="channel_tokens",
        conventions=(EstimatorChoice("verl_gdpo", "gdpo_verl", {}, "verl GDPO (token whitening)", _ANY_VERL),),
        # verl ignores the flag here (see _NO_STD): still the std-dividing estimator
        declared_by=(_verl("gdpo", "gdpo_verl"), Declaration(((_ADV, "gdpo"), _NO_STD), "gdpo_verl")),
        config_options=(("channels", "algorithm.gdpo_reward_keys"), ("weights", "algorithm.gdpo_reward_weights")),
    ),
    EstimatorSpec(
        name="gdpo_trl",
        summary="GDPO as TRL: NaN-aware per-channel z-score, weighted nansum, z-score over trajectories.",
        function="trajlens.estimators.gdpo:gdpo_trl",
        kind=Kind.CHANNEL,
        inputs=Input.CHANNELS,
        options=(_CHANNELS, _WEIGHTS, Option("epsilon", "float", 1e-4, "Added to every std (TRL 1e-4)."), _TRL_VERSION),
        reference='TRL GRPOTrainer `multi_objective_aggregation="normalize_then_sum"`',
        reference_version=_TRL_GRPO,
        statistics=Statistics.TRAJECTORIES,
        report=InReport.WHEN_DECLARED,
        conventions=(EstimatorChoice("trl_gdpo", "gdpo_trl", {}, "TRL >= 1.6 GDPO, normalize_then_sum", _TRL_16),
                     EstimatorChoice("trl_gdpo_1.5", "gdpo_trl", {"convention": "trl-1.5"},
                                     "TRL <= 1.5 GDPO, normalize_then_sum", _TRL_15)),
        # TRL's normalize_then_sum ignores scale_rewards: it outranks the scale_rewards declarations
        declared_by=(Declaration((("multi_objective_aggregation", "normalize_then_sum"),), "trl_gdpo", rank=2),
                     Declaration((("reward.aggregation", "normalize_then_sum"),), "gdpo_trl")),
        config_options=(("weights", "reward_weights"),),
    ),
    EstimatorSpec(
        name="sum_then_normalize",
        summary="GRPO on the weighted sum of the channels (the collapse GDPO fixes).",
        function="trajlens.estimators.gdpo:sum_then_normalize",
        kind=Kind.CHANNEL,
        inputs=Input.CHANNELS,
        options=(_CHANNELS, _WEIGHTS,
                 Option("convention", "str", "trl", "`trl` (TRL v1.6 on), `trl-1.5` (earlier TRL: an all-NaN "
                        "trajectory sums to 0 and counts) or `verl` (verl GRPO on the sum).", ("trl", "trl-1.5", "verl")),
                 Option("scale_rewards", "str", "group", "TRL `scale_rewards`: divide by the group std, the batch std "
                        "(TRL's batch-std variant for several reward functions) or nothing.", ("group", "batch", "none"))),
        reference='TRL GRPOTrainer `multi_objective_aggregation="sum_then_normalize"`',
        reference_version=_TRL_GRPO,
        statistics=Statistics.TRAJECTORIES,
        conventions=(EstimatorChoice("trl_sum_group", "sum_then_normalize", {"scale_rewards": "group"},
                                     "TRL >= 1.6 GRPO on the summed reward functions, scale_rewards=group, eps 1e-4", _TRL_16),
                     EstimatorChoice("trl_sum_batch", "sum_then_normalize", {"scale_rewards": "batch"},
                                     "TRL >= 1.6 GRPO on the summed reward functions, scale_rewards=batch, eps 1e-4"),
                     EstimatorChoice("verl_sum_grpo", "sum_then_normalize", {"convention": "verl"}, "verl GRPO on the summed channels",
                                     _ANY_VERL),
                     EstimatorChoice("trl_1.5_grpo_group", "sum_then_normalize", {"convention": "trl-1.5"},
                                     "TRL <= 1.5 GRPO on the summed reward functions, scale_rewards=group", _TRL_15)),
        declared_by=(Declaration((("reward.aggregation", "sum_then_normalize"),), "sum_then_normalize"),),
        config_options=(("weights", "reward_weights"),),
    ),
    EstimatorSpec(
        name="gdpo_dynamic",
        summary="GDPO with EMA-softmax channel weights and a per-channel clip, the EMA carried step to step.",
        function="trajlens.estimators.dynamic:gdpo_dynamic",
        kind=Kind.CHANNEL,
        inputs=Input.CHANNELS | Input.FULL_CHANNELS | Input.TOKEN_COUNTS,
        options=(_CHANNELS, Option("config", "config", None,
                                   "A `DynamicWeightConfig`, or a dict of its fields (defaults: the digest's config).")),
        reference="no trainer ships it; the GDPO digest's recipe (EMA, softmax, bounds, clip)",
        reference_version="trajlens",
        statistics=Statistics.MODEL_TOKENS,
        adapter="channel_dynamic",
        stateful=True,
    ),
)

ESTIMATOR_REGISTRY: Mapping[str, EstimatorSpec] = {spec.name: spec for spec in _SPECS}
"""Every estimator trajlens can recompute, by name, in display order."""

ESTIMATOR_NAMES: tuple[str, ...] = tuple(ESTIMATOR_REGISTRY)


REPORT_VARIANTS: tuple[tuple[EstimatorSpec, EstimatorChoice], ...] = tuple(
    (spec, variant) for spec in ESTIMATOR_REGISTRY.values() if spec.report is not InReport.NEVER
    for variant in spec.variants()
)
"""Every labelled recomputation the report (and the checks' ``advantage:<label>``) can make, in display order."""


def named_computation(label: str) -> EstimatorChoice | None:
    """The computation ``label`` stands for wherever a saved label is read (the report, the checks'
    ``advantage:<label>``, ``trajlens compare``'s ``RUN:LABEL``): a report variant's, or an
    estimator's name for that estimator with its defaults; None for any other label."""
    variant = next((v for _, v in REPORT_VARIANTS if v.label == label), None)
    if variant is None and label in ESTIMATOR_REGISTRY:
        return EstimatorChoice(label, label)
    return variant


def label_mismatch(label: str, estimator: str, options: Mapping[str, Any]) -> str | None:
    """Why a recomputation of ``estimator`` with ``options`` (every option that decides it, a
    trainer convention's included) may not be saved as ``label``: the label names another
    computation (:func:`named_computation`), so its numbers would be read as that one's. None
    when the label names no computation, or this one."""
    named = named_computation(label)
    if named is None:
        return None
    if named.estimator == estimator and _decided(named.spec(), named.options) == _decided(named.spec(), options):
        return None
    settings = ", ".join(f"{k}={v}" for k, v in sorted(named.options.items())) or "its defaults"
    return (f"{label!r} names {named.estimator} with {settings} (the report, the checks and compare read it so), "
            "not this recomputation")


def _decided(spec: EstimatorSpec, options: Mapping[str, Any]) -> dict[str, Any]:
    """The settings ``options`` give, each ``config`` option as the :class:`DynamicWeightConfig` it
    stands for (None, ``{}`` and the defaults' fields are one config)."""
    from trajlens.estimators.dynamic import weight_config

    settings = spec.settings(options)
    for option in spec.options:
        if option.type == "config":
            settings[option.name] = weight_config(spec.name, settings[option.name])
    return settings


def saved_label(estimator: str, options: Mapping[str, Any], release: TrainerRelease | None,
                own: TrainerRelease) -> str:
    """The label a recomputation of ``estimator`` is saved under when it is given none: the
    estimator's name when ``options`` over the convention of ``release`` (the run's own release,
    ``own``, when None) give what the report reads under that name (:func:`named_computation`);
    else the name, the release (when asked for, or when the run's own convention is not the
    estimator's defaults) and the options (:func:`recomputation_label`), so that its numbers
    never pass for the report's."""
    if label_mismatch(estimator, estimator, convention_options(estimator, options, release or own)) is None:
        return estimator
    spec = estimator_spec(estimator)
    own_differs = spec.settings(convention_options(estimator, {}, own)) != spec.settings({})
    return recomputation_label(estimator, options, release if release is not None else own if own_differs else None)


def convention_options(estimator: str, options: Mapping[str, Any], release: TrainerRelease) -> dict[str, Any]:
    """``options`` over those of the convention by which ``release`` computes ``estimator``: what a
    recomputation as that release runs with (the registry's defaults fill the rest)."""
    convention = estimator_spec(estimator).convention_of(release)
    return {**(convention.options if convention is not None else {}), **options}


def trainer_choice(name: str, release: TrainerRelease) -> EstimatorChoice | None:
    """The convention by which ``release`` (``parse_trainer("verl==0.8.0")``) computes estimator
    ``name``; None when the registry names none of that trainer's for it (its defaults stand)."""
    return estimator_spec(name).convention_of(release)


def release_conventions() -> list[str]:
    """One line per convention that only some releases compute, ``name option=value: range``:
    what ``--trainer`` changes from the defaults (the current verl)."""
    lines = []
    for spec in _SPECS:
        for convention in spec.conventions:
            bounded = [r for r in convention.releases if r.first or r.last]
            changed = {k: v for k, v in convention.options.items() if spec.defaults().get(k) != v}
            if bounded and changed:
                options = " ".join(f"{k}={v}" for k, v in changed.items())
                lines.append(f"{spec.name} {options}: {', '.join(map(str, bounded))}")
    return lines


def reads_tokens(name: str) -> bool:
    """Whether estimator ``name`` reads a run's token arrays (or token counts from them)."""
    return bool(estimator_spec(name).inputs & (Input.TOKEN_ARRAYS | Input.TOKEN_COUNTS))


def reads_counts_alone(name: str, settings: Mapping[str, Any]) -> bool:
    """Whether estimator ``name`` with ``settings`` (its options over the registry's defaults)
    reads each response's model-token count and nothing else of its tokens: an estimator of whole
    responses, scored by the trajectory's reward, that whitens over model tokens."""
    inputs = estimator_spec(name).inputs
    return bool(inputs & Input.TOKEN_COUNTS) and not inputs & Input.TOKEN_ARRAYS \
        and settings.get("score") != "token_rewards"


def estimator_spec(name: str) -> EstimatorSpec:
    """The registry entry of ``name``; an unknown name is a one-line :class:`EstimatorInputError`."""
    spec = ESTIMATOR_REGISTRY.get(name)
    if spec is None:
        raise EstimatorInputError(f"estimator must be one of {', '.join(map(repr, ESTIMATOR_NAMES))}, got {name!r}")
    return spec


def declared_estimators(config: Mapping[str, Any] | str | None, estimator_column: str | None = None) -> frozenset[str]:
    """The registry name a run's logged config (a dict or its JSON) and its ``runs.estimator``
    (``estimator_column``, read where the config lacks ``algorithm.adv_estimator``) say it
    trained with, as a set (empty when neither names one): the estimator of
    :func:`trajlens.estimators.trained_with`."""
    if not config and not estimator_column:  # None, {} or "": one empty config, whose answer never changes
        return _declared_without_config()
    return _declared_by(config, estimator_column)


def _declared_by(config: Mapping[str, Any] | str | None, estimator_column: str | None = None) -> frozenset[str]:
    from trajlens.estimators.trained import trained_with

    trained = trained_with(config, estimator_column)
    return frozenset({trained.estimator}) if trained.source == "config" and trained.estimator else frozenset()


@lru_cache(maxsize=1)
def _declared_without_config() -> frozenset[str]:
    """What an empty config declares, read once (the facts of each step of a run ask it)."""
    return _declared_by(None)


def run_facts(trajectories: Any, tokens: Any = None, config: Mapping[str, Any] | str | None = None,
              estimator_column: str | None = None) -> RunFacts:
    """The :class:`RunFacts` of a run's ``trajectories`` and ``tokens`` frames (Polars), config and
    ``runs.estimator`` (``estimator_column``)."""
    import polars as pl

    from trajlens.frames import as_frame

    trajectories = as_frame(trajectories, "run_facts: trajectories")
    tokens = None if tokens is None else as_frame(tokens, "run_facts: tokens")
    height = trajectories.height
    token_ids: set[Any] = set()
    token_rows: set[Any] = set()
    critic_values = log_probs = sum_pi_squared = False
    if tokens is not None and tokens.height:
        token_rows = set(tokens["trajectory_id"].to_list())
        # a token row counts only when its response mask holds a model token (read through the
        # mask: filtering the frame would copy every array of the step)
        held = tokens["response_mask"].list.any().fill_null(False)
        kept = int(held.sum())
        token_ids = set(tokens["trajectory_id"].filter(held).to_list())

        def nulls(name: str) -> int:
            return int(tokens[name].is_null().filter(held).sum())

        critic_values = "values" in tokens.columns and nulls("values") < kept
        log_probs = "log_probs" in tokens.columns and nulls("log_probs") == 0
        sum_pi_squared = "sum_pi_squared" in tokens.columns and nulls("sum_pi_squared") == 0
    ids = trajectories["trajectory_id"].to_list()
    lacking = next((i for i in ids if i not in token_ids), None)
    token_arrays = height > 0 and lacking is None
    token_gap = "" if lacking is None else (
        f"trajectory {lacking!r} has no model token" if lacking in token_rows else f"trajectory {lacking!r} has no row in tokens")
    counted = trajectories["model_tokens"].is_not_null().to_list() if "model_tokens" in trajectories.columns else [False] * height
    token_counts = height > 0 and all(c or i in token_ids for c, i in zip(counted, ids))
    sizes = trajectories.group_by("step", "group_id").len()["len"] if height else pl.Series([], dtype=pl.UInt32)
    channels, channel_gap = 0, ""
    if "reward_channels" in trajectories.columns and height:
        channels, channel_gap = _channel_facts(trajectories.select("trajectory_id", "reward_channels"))
    return RunFacts(
        trajectories=height,
        token_arrays=token_arrays,
        token_gap=token_gap,
        critic_values=critic_values,
        token_counts=token_counts,
        largest_group=int(cast(int, sizes.max()) or 0) if len(sizes) else 0,
        smallest_group=int(cast(int, sizes.min()) or 0) if len(sizes) else 0,
        all_rewarded=height > 0 and "reward" in trajectories.columns and trajectories["reward"].null_count() == 0,
        any_rewarded="reward" in trajectories.columns and trajectories["reward"].null_count() < height,
        channels=channels,
        channel_gap=channel_gap,
        log_probs=log_probs,
        sum_pi_squared=sum_pi_squared,
        baseline_rewards="reward_baseline" in trajectories.columns and trajectories["reward_baseline"].null_count() == 0,
        declared=declared_estimators(config, estimator_column),
    )


def _channel_facts(frame: Any) -> tuple[int, str]:
    """The number of reward channel names in ``frame`` (``trajectory_id``, ``reward_channels``),
    and where the first trajectory (in row order) lacks a value (null or NaN) of one of them."""
    import polars as pl

    if not frame["reward_channels"].list.len().sum():  # every list empty or null: no channel at all
        return 0, ""
    values = frame.with_row_index("row").explode("reward_channels").unnest("reward_channels")
    names = sorted(values["name"].drop_nulls().unique().to_list())
    if len(names) < 2:
        return len(names), ""
    scored = values.filter(pl.col("name").is_not_null() & pl.col("value").is_not_null() & pl.col("value").is_not_nan())
    held = scored.group_by("row").agg(pl.col("name").unique())
    short = (frame.with_row_index("row").join(held, on="row", how="left")
             .filter(pl.col("name").list.len().fill_null(0) < len(names)).sort("row").head(1))
    if short.height:
        present = short["name"][0]
        lacking = next(name for name in names if present is None or name not in present.to_list())
        return len(names), f"trajectory {short['trajectory_id'][0]!r} lacks channel {lacking!r}"
    return len(names), ""


def _unscored_note(spec: EstimatorSpec) -> str:
    """After "a reward for every trajectory": the conventions that do without one, if any."""
    unscored = [value for option in spec.options if option.name == "convention"
                for value in option.choices if value in UNSCORED_CONVENTIONS]
    if not unscored:
        return ""
    return f" (not with convention {' or '.join(f'`{v}`' for v in unscored)}: a trajectory without one is TRL's unscorable completion)"


def render_markdown() -> str:
    """The estimator tables of ``docs/estimators.md``, from the registry."""
    lines = ["| estimator | what it computes | reference | version | statistics over | report |",
             "|---|---|---|---|---|---|"]
    for spec in _SPECS:
        lines.append(f"| `{spec.name}` | {spec.summary} | {spec.reference} | {spec.reference_version} | "
                     f"{spec.statistics.value} | {spec.report.value} |")
    for spec in _SPECS:
        needs = ", ".join(what + (_unscored_note(spec) if flag is Input.REWARDS else "")
                          for flag, _, what in _INPUT_CHECKS if flag in spec.inputs) or "nothing beyond keys"
        lines += ["", f"### `{spec.name}`", "", spec.summary, "",
                  f"- tensor function: `{spec.function.replace(':', '.')}`",
                  f"- needs: {needs}",
                  f"- reference: {spec.reference}, {spec.reference_version}",
                  f"- statistics summarised over {spec.statistics.value}; in the report: {spec.report.value}"
                  + (f" (labels {', '.join(v.label for v in spec.variants())})" if spec.report is not InReport.NEVER else "")]
        if spec.conventions:
            lines.append("- trainers' conventions (what `--identify` tries, and `--trainer` picks by release): "
                         + "; ".join(f"`{c.label}` ({c.doc}" + (f"; {_release_text(c)}" if c.releases else "") + ")"
                                     for c in spec.conventions))
        if spec.declared_by:
            lines.append("- declared by config: " + "; ".join(
                " and ".join(f"`{k}={v}`" for k, v in d.when) + f" ({d.label})" for d in spec.declared_by))
        if spec.config_options:
            lines.append("- the run's own estimator takes from its config: " + ", ".join(
                f"`{option}` = `{key}`" for option, key in spec.config_options)
                + " (where that differs from the label's, under `LABEL+option=value`)")
        if spec.options:
            lines += ["", "| option | type | default | meaning |", "|---|---|---|---|"]
            lines += [f"| `{o.name}` | {o.type} | `{o.default!r}` | {o.doc}"
                      + (f" One of: {', '.join(o.choices)}." if o.choices else "") + " |" for o in spec.options]
    return "\n".join(lines)


def render_readme_table() -> str:
    """The short estimator table of the README: name, reference, version, and the conventions
    that reproduce each trainer release range."""
    lines = ["| estimator | reference | version | conventions by trainer release |", "|---|---|---|---|"]
    for s in _SPECS:
        ranged = "; ".join(f"`{c.label}`: {_release_text(c)}" for c in s.conventions if c.releases)
        lines.append(f"| `{s.name}` | {s.reference} | {s.reference_version} | {ranged or 'defaults'} |")
    return "\n".join(lines)


def _release_text(choice: EstimatorChoice) -> str:
    """The ranges of a convention with the compared releases in them: ``verl >= 0.9 (0.9.0, 0.9.1)``."""
    parts = []
    for r in choice.releases:
        held = ", ".join(v for v in COMPARED_RELEASES[r.trainer] if r.holds(parse_trainer(f"{r.trainer}=={v}")))
        parts.append(f"{r} ({held})" if r.first or r.last else f"{r} {held}")
    return "; ".join(parts)


def write_docs(path: str) -> None:
    """Rewrite the generated part of ``path`` (everything after its first ``---`` line)."""
    from pathlib import Path

    text = Path(path).read_text()
    head, rule, _ = text.partition("\n---\n")
    if not rule:
        raise EstimatorInputError(f"{path}: no '---' line to put the generated tables under")
    Path(path).write_text(head + rule + "\n" + render_markdown() + "\n")


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 1:
        write_docs(sys.argv[1])
    else:
        print(render_markdown())

"""Which estimator recomputations attribution compares, as one data table.

Each :class:`Recomputation` is a label, an estimator of :data:`trajlens.estimators.ESTIMATORS`,
its options for :func:`trajlens.estimators.recompute`, and what a run's data must hold for it.
:func:`own_recomputation` finds the one the run trained with from its logged configuration
(verl's key layout: ``algorithm.adv_estimator``, ``algorithm.whiten_advantages``,
``actor_rollout_ref.actor.loss_agg_mode``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from trajlens.errors import ConfigError
from trajlens.estimators.registry import ESTIMATOR_REGISTRY, Input


@dataclass(frozen=True)
class Recomputation:
    """One estimator recomputation to credit calls under."""

    label: str
    """Name in every output (``estimator`` column)."""
    estimator: str
    """Name in :data:`trajlens.estimators.ESTIMATORS`."""
    options: dict[str, Any] = field(default_factory=dict)
    """Keyword options of :func:`trajlens.estimators.recompute`."""
    needs: str = "groups"
    """'values' (token arrays with critic values), 'tokens' (token arrays), 'rewards' (every
    trajectory rewarded), 'groups' (groups of two or more), 'channels' (two or more reward channels)."""
    doc: str = ""


RECOMPUTATIONS: tuple[Recomputation, ...] = (
    Recomputation("gae_raw", "gae", {"gamma": 1.0, "lam": 1.0, "whiten": False}, "values",
                  "token-level GAE (gamma 1, lambda 1), no whitening"),
    Recomputation("gae_whitened", "gae", {"gamma": 1.0, "lam": 1.0, "whiten": True}, "values",
                  "token-level GAE (gamma 1, lambda 1), whitened over the batch's model tokens"),
    Recomputation("reinforce", "reinforce", {"gamma": 1.0}, "tokens", "REINFORCE: the return, no baseline"),
    Recomputation("grpo", "grpo", {}, "groups", "GRPO: reward minus group mean, over group std"),
    Recomputation("dr_grpo", "dr_grpo", {}, "groups", "Dr.GRPO: reward minus group mean"),
    Recomputation("rloo", "rloo", {}, "groups", "RLOO: reward minus the mean of the others in the group"),
    Recomputation("sum_then_normalize", "sum_then_normalize", {}, "channels",
                  "channels summed, then normalised in the group (GRPO on the sum)"),
    Recomputation("gdpo_verl", "gdpo_verl", {}, "channels",
                  "GDPO as verl: each channel normalised in its group, summed, whitened over the batch"),
    Recomputation("gdpo_trl", "gdpo_trl", {}, "channels",
                  "GDPO as TRL: each channel normalised in its group, summed, normalised over the batch"),
    Recomputation("gdpo_dynamic", "gdpo_dynamic", {}, "channels", "GDPO with EMA-driven channel weights"),
)
"""Every recomputation attribution compares by default, where the run's data allows it."""

AGGREGATIONS: tuple[str, ...] = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
"""verl's loss aggregation modes (``loss_agg_mode``); each call's push is computed under each."""

TOKEN_ESTIMATORS: tuple[str, ...] = tuple(
    name for name, spec in ESTIMATOR_REGISTRY.items() if Input.TOKEN_ARRAYS in spec.inputs)
"""Estimators that need the token arrays, from the registry (so a new token-level one is one too)."""


@dataclass(frozen=True)
class RunEstimator:
    """What a run trained with, as far as its configuration says."""

    label: str | None
    """Label of the matching recomputation; None when unknown."""
    aggregation: str
    """Its loss aggregation (``token-mean`` when the config does not say)."""
    aggregation_logged: bool


def own_recomputation(estimator: str | None, config: str | dict[str, Any] | None,
                      recomputations: tuple[Recomputation, ...]) -> RunEstimator:
    """The recomputation a run trained with, from ``runs.estimator`` and ``runs.config``."""
    if isinstance(config, str):
        try:
            config = json.loads(config or "{}")
        except json.JSONDecodeError:
            config = {}
    config = config if isinstance(config, dict) else {}
    algorithm = config.get("algorithm", {}) if isinstance(config.get("algorithm"), dict) else {}
    name = algorithm.get("adv_estimator") or estimator
    agg = ((config.get("actor_rollout_ref") or {}).get("actor") or {}).get("loss_agg_mode")
    label = None
    if name == "gae":
        whiten = algorithm.get("whiten_advantages", True)
        wanted = "gae_whitened" if whiten else "gae_raw"
        label = next((r.label for r in recomputations if r.label == wanted), None)
    elif name is not None:
        label = next((r.label for r in recomputations if r.estimator == name and not r.options), None)
        label = label or next((r.label for r in recomputations if r.estimator == name), None)
    return RunEstimator(label, agg if isinstance(agg, str) else "token-mean", isinstance(agg, str))


def parse_recomputations(pairs: list[str], options: dict[str, dict[str, Any]]) -> tuple[Recomputation, ...]:
    """``LABEL=NAME`` pairs with their options (``{label: {name: value}}``) as recomputations."""
    from trajlens.estimators import ESTIMATORS

    problems, out = [], []
    for pair in pairs:
        label, sep, name = pair.partition("=")
        if not sep:
            label, name = pair, pair
        if name not in ESTIMATORS:
            problems.append(f"--estimator {pair!r}: unknown estimator {name!r} (known: {', '.join(ESTIMATORS)})")
            continue
        needs = {"gae": "values", "reinforce": "tokens"}.get(name, "channels" if name.startswith(("gdpo", "sum_")) else "groups")
        out.append(Recomputation(label, name, dict(options.get(label, {})), needs, f"{name} {options.get(label, {})}"))
    labels = [r.label for r in out]
    problems += [f"--estimator label {label!r} given twice" for label in sorted({x for x in labels if labels.count(x) > 1})]
    problems += [f"--option for {label!r}, which no --estimator names" for label in options if label not in labels]
    if problems:
        raise ConfigError(problems)
    return tuple(out)

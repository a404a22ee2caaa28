"""Which estimator (a label with options) and which loss aggregation a run trained with.

One answer that every surface reads: attribution's own estimator, the checks'
``advantage:run:<stat>``, the registry's :func:`~trajlens.estimators.registry.declared_estimators`.
:func:`trained_with` takes it from the run's logged config, through the registry entries'
``declared_by`` declarations (verl's ``algorithm.adv_estimator`` with its companion keys, TRL's
``scale_rewards`` and ``multi_objective_aggregation``): of the declarations whose every key holds,
the one of highest weight wins (the most specific; registry order breaks ties). An entry's own
name as ``algorithm.adv_estimator`` declares it too. When the config
is silent it takes the verdict of :func:`~trajlens.estimators.identify_advantages` on the run's
logged advantages, when that verdict is a match. It says which of the two it was.

The loss aggregation comes from :data:`AGGREGATION_KEYS` (verl's ``loss_agg_mode``, TRL's
``loss_type``); ``token-mean`` (verl's default) when the config does not say.

No torch here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from trajlens.estimators.registry import ESTIMATOR_REGISTRY
from trajlens.estimators.spec import (
    CURRENT_RELEASES, Declaration, EstimatorChoice, EstimatorSpec, Releases, TrainerRelease, label_problem, parse_trainer,
    recomputation_label,
)

if TYPE_CHECKING:
    from trajlens.estimators.identify import Identification

__all__ = ["AGGREGATION_KEYS", "DEFAULT_AGGREGATION", "ESTIMATOR_KEY", "FORCED_AGGREGATIONS", "TRAINER_SIGNS", "AggregationKey",
           "ForcedAggregation", "TrainedWith",
           "config_at", "config_value", "run_release", "trained_with"]

Source = Literal["config", "identified", "unknown"]

ESTIMATOR_KEY = "algorithm.adv_estimator"
"""The config key a run's ``runs.estimator`` column stands in for when the config lacks it."""

CONVENTION = "convention"
"""The option in which an estimator's trainer conventions differ (``trl`` or ``trl-1.5``,
``carry`` or ``reset``): a release named in the config sets it over a declared label's."""

DEFAULT_AGGREGATION = "token-mean"
"""The loss aggregation taken when the config names none (verl's default)."""


@dataclass(frozen=True)
class AggregationKey:
    """A config key that names the loss aggregation."""

    key: str
    """Dotted config key."""
    modes: Mapping[str, str] | None = None
    """The key's values -> aggregation mode; None: the value is the mode's own name (verl)."""


AGGREGATION_KEYS: tuple[AggregationKey, ...] = (
    AggregationKey("actor_rollout_ref.actor.loss_agg_mode"),
    AggregationKey("loss_type", {"grpo": "seq-mean-token-mean", "sapo": "seq-mean-token-mean", "bnpo": "token-mean",
                                 "dapo": "token-mean", "cispo": "token-mean", "vespo": "token-mean",
                                 "dr_grpo": "dr-grpo", "luspo": "luspo"}),
)
"""Where a run's config says its loss aggregation, first found wins: verl's ``loss_agg_mode``, and
TRL's ``loss_type`` in the names of :data:`trajlens.estimators.AGGREGATION_MODES` (TRL 1.5.0 to
1.16.0 ``GRPOTrainer._compute_loss``: ``grpo`` and ``sapo`` average each sequence's tokens then the
sequences; ``bnpo``, ``dapo``, ``cispo`` and ``vespo`` average every token of the batch)."""


@dataclass(frozen=True)
class ForcedAggregation:
    """A config value under which a trainer release aggregates the loss one way whatever its
    aggregation key says."""

    key: str
    value: str
    mode: str
    releases: Releases


POLICY_LOSS_KEY = "actor_rollout_ref.actor.policy_loss.loss_mode"

FORCED_AGGREGATIONS: tuple[ForcedAggregation, ...] = (
    ForcedAggregation(POLICY_LOSS_KEY, "sapo", "seq-mean-token-mean", Releases("verl")),
    ForcedAggregation(POLICY_LOSS_KEY, "gspo", "seq-mean-token-mean", Releases("verl", last="0.9.0")),
)
"""verl's policy losses that ignore ``loss_agg_mode`` (``compute_policy_loss_sapo`` in verl 0.8.0
to 0.9.1, ``compute_policy_loss_gspo`` up to 0.9.0; 0.9.1's GSPO reads ``loss_agg_mode``): the
run's aggregation is theirs, under the release its config names (the current verl otherwise)."""


TRAINER_SIGNS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "trl": (("trl",), ("num_generations", "scale_rewards", "multi_objective_aggregation", "loss_type")),
    "verl": (("verl",), (ESTIMATOR_KEY, "actor_rollout_ref.actor.loss_agg_mode")),
}
"""Trainer -> (the ``source_format`` values of its loaders, config keys only it writes): how
:func:`run_release` tells which trainer a run came from."""


RELEASE_KEY = "trainer"
"""A config's top-level key naming the trainer release it ran (``"verl==0.8.0"``, as
:mod:`trajlens.synth` writes it, or as a user adds it): the run is recomputed as that release."""


def _named_release(config: Mapping[str, Any]) -> TrainerRelease | None:
    value = config.get(RELEASE_KEY) if isinstance(config, Mapping) else None
    if not isinstance(value, str):
        return None
    try:
        return parse_trainer(value)
    except ValueError:
        return None


def run_release(config: Mapping[str, Any] | str | None, source_format: str | None = None) -> TrainerRelease:
    """The trainer release a run's advantages are recomputed as when nothing else is asked: the
    current release (:data:`~trajlens.estimators.spec.CURRENT_RELEASES`) of the trainer its loader
    or its config names (:data:`TRAINER_SIGNS`), else the current verl."""
    parsed = _as_mapping(config)
    named = _named_release(parsed)
    if named is not None:
        return named
    for trainer, (formats, keys) in TRAINER_SIGNS.items():
        if source_format in formats:
            return parse_trainer(trainer)
    for trainer, (_, keys) in TRAINER_SIGNS.items():
        if any(config_value(parsed, key) is not None for key in keys):
            return parse_trainer(trainer)
    return parse_trainer(f"verl=={CURRENT_RELEASES['verl']}")


@dataclass(frozen=True)
class TrainedWith:
    """What a run trained with, and where that answer came from."""

    choice: EstimatorChoice | None
    """The estimator under its label and options; None when neither the config nor identify says."""
    source: Source
    """``config``, ``identified`` (the logged advantages matched it) or ``unknown``."""
    aggregation: str
    """Its loss aggregation (:data:`DEFAULT_AGGREGATION` when the config does not say)."""
    aggregation_logged: bool
    """Whether the config names the aggregation."""
    evidence: str = ""
    """What said so: the config values, or identify's verdict."""
    stand_in: str = ""
    """The run's ``runs.estimator`` value where it stood in for a config without
    ``algorithm.adv_estimator``; empty otherwise."""

    @property
    def label(self) -> str | None:
        return self.choice.label if self.choice is not None else None

    @property
    def estimator(self) -> str | None:
        return self.choice.estimator if self.choice is not None else None

    def among(self, choices: Iterable[EstimatorChoice]) -> EstimatorChoice | None:
        """Of ``choices``, the run's own: the one that computes as the estimator it trained with,
        preferring one of the same label; None when its estimator is unknown or none is."""
        return self.choice.among(choices) if self.choice is not None else None


def trained_with(
    config: Mapping[str, Any] | str | None,
    estimator_column: str | None = None,
    identified: Identification | None = None,
) -> TrainedWith:
    """The estimator and loss aggregation a run trained with.

    Args:
        config: the run's logged config (a dict, or its JSON text; anything else counts as empty).
        estimator_column: the run's ``runs.estimator`` value; read as ``algorithm.adv_estimator``
            when the config lacks that key.
        identified: :func:`~trajlens.estimators.identify_advantages` on the run's logged
            advantages; its best candidate is the answer when the config declares nothing and
            the verdict is a match.
    """
    parsed = _as_mapping(config)
    aggregation, logged = _aggregation(parsed)
    found = _declared(parsed, estimator_column)
    forced = _forced_aggregation(parsed)
    if forced is not None:
        aggregation, logged = forced.mode, True
    if found is not None:
        declaration, spec = found
        # where the config lacks the estimator's key, the runs table's column named it: say so
        column = config_value(parsed, ESTIMATOR_KEY) is None and bool(estimator_column)
        evidence = ", ".join(f"{ESTIMATOR_COLUMN if key == ESTIMATOR_KEY and column else key}={value}"
                             for key, value in declaration.when)
        choice = spec.choice(declaration.label)
        release = _named_release(parsed)
        convention = spec.convention_of(release) if release is not None else None
        if convention is not None:
            options = {**convention.options, **choice.options}
            relabel = CONVENTION in convention.options and any(c.label == choice.label for c in spec.conventions)
            if relabel:  # a label of another release's convention: the named release's, under its label if it has one
                options[CONVENTION] = convention.options[CONVENTION]
            choice = convention if relabel and options == dict(convention.options) else replace(choice, options=options)
            evidence += f", {RELEASE_KEY}={release}"
        choice, logged_settings = _with_logged_options(choice, spec, parsed)
        evidence += "".join(f", {key}={value}" for key, value in logged_settings)
        return TrainedWith(choice, "config", aggregation, logged, evidence,
                           stand_in=estimator_column if column and estimator_column else "")
    if identified is not None and identified.matched:
        return TrainedWith(identified.best.candidate, "identified", aggregation, logged, identified.verdict)
    return TrainedWith(None, "unknown", aggregation, logged)


def _with_logged_options(choice: EstimatorChoice, spec: EstimatorSpec, config: Mapping[str, Any]
                         ) -> tuple[EstimatorChoice, list[tuple[str, Any]]]:
    """``choice`` with the options the run's config sets (the entry's ``config_options``: verl's
    ``algorithm.gamma``, ``algorithm.gdpo_reward_keys``), and the (key, value) pairs that changed
    it. A value of the wrong kind is left out, as an unknown key is. Settings that differ from
    the choice's own give it a label of its own, spelled as every recomputation's options are
    (:func:`~trajlens.estimators.spec.recomputation_label`: ``gae_raw+gamma=0.99+lam=0.95``), so the
    report's ``gae_raw`` stays gamma 1, lambda 1."""
    settings = choice.settings()
    changed: dict[str, Any] = {}
    evidence: list[tuple[str, Any]] = []
    for option, key in spec.config_options:
        value = config_value(config, key)
        if value is None or spec.option_problems({option: value}):
            continue
        if spec.settings({option: value})[option] != settings[option]:
            changed[option] = value
            evidence.append((key, value))
    if not changed:
        return choice, []
    label = recomputation_label(choice.label, changed)
    if label_problem(label) is not None:  # a channel name with a blank, say
        label = f"{choice.label}+config"
    return replace(choice, label=label, options={**choice.options, **changed}, releases=()), evidence


def config_at(config: Any, path: Sequence[str]) -> Any:
    """The value at a key path of a nested config, or None."""
    node: Any = config
    for part in path:
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def config_value(config: Mapping[str, Any], key: str) -> Any:
    """The value at a dotted key of a nested config, or None."""
    return config_at(config, key.split("."))


def _as_mapping(config: Mapping[str, Any] | str | None) -> Mapping[str, Any]:
    if isinstance(config, str):
        try:
            config = json.loads(config or "{}")
        except json.JSONDecodeError:
            return {}
    return config if isinstance(config, Mapping) else {}


def _text(value: Any) -> str | None:
    return None if value is None else str(value).lower()


ESTIMATOR_COLUMN = "runs.estimator"
"""How the evidence names the runs table's estimator, read where the config lacks :data:`ESTIMATOR_KEY`."""


def _declared(config: Mapping[str, Any], estimator_column: str | None) -> tuple[Declaration, EstimatorSpec] | None:
    """The declaration of highest weight whose every key holds (the first in registry order on a tie)."""

    def value(key: str) -> str | None:
        found = config_value(config, key)
        if found is None and key == ESTIMATOR_KEY and estimator_column:
            found = estimator_column
        return _text(found)

    best: tuple[Declaration, EstimatorSpec] | None = None
    for spec in ESTIMATOR_REGISTRY.values():
        for declaration in _declarations(spec):
            if all(value(key) == wanted for key, wanted in declaration.when):
                if best is None or declaration.weight > best[0].weight:
                    best = (declaration, spec)
    return best


def _declarations(spec: EstimatorSpec) -> tuple[Declaration, ...]:
    """The entry's declarations, and, where none reads its own name under ``algorithm.adv_estimator``
    (how trajlens's synthetic runs and a ``runs.estimator`` column may name it), that name, under
    its first report label and below every other declaration."""
    own = (ESTIMATOR_KEY, spec.name)
    if any(own in declaration.when for declaration in spec.declared_by):
        return spec.declared_by
    return (*spec.declared_by, Declaration((own,), spec.variants()[0].label, rank=0))


def _forced_aggregation(config: Mapping[str, Any]) -> ForcedAggregation | None:
    """The rule of :data:`FORCED_AGGREGATIONS` the config's policy loss falls under, at the verl
    release it names (the current one when it names none); None when none does."""
    release = _named_release(config) or parse_trainer(f"verl=={CURRENT_RELEASES['verl']}")
    return next((rule for rule in FORCED_AGGREGATIONS
                 if _text(config_value(config, rule.key)) == rule.value and rule.releases.holds(release)), None)


def _aggregation(config: Mapping[str, Any]) -> tuple[str, bool]:
    for source in AGGREGATION_KEYS:
        found = config_value(config, source.key)
        if not isinstance(found, str):
            continue
        if source.modes is None:
            return found, True
        if found.lower() in source.modes:
            return source.modes[found.lower()], True
    return DEFAULT_AGGREGATION, False

"""Which estimator recomputations attribution compares, read from the estimator registry.

Each recomputation is an :class:`~trajlens.estimators.EstimatorChoice`: a label, an estimator of
:data:`trajlens.estimators.registry.ESTIMATOR_REGISTRY` and its options for
:func:`trajlens.estimators.adapters`. The default table :data:`RECOMPUTATIONS` is the registry
itself: every estimator under each of its labelled variants (the report's labels and options,
``gae_raw`` and ``gae_whitened`` for GAE; the estimator's name otherwise). What a run's data must
hold for each comes from the registry entry's inputs (:meth:`EstimatorSpec.missing`), and which
estimators are token-level from its ``Input.TOKEN_ARRAYS``. Of the token-level estimators, those
without a flat step kernel (:func:`trajlens.run.step_advantages.flat_kernel`) cost a padded
recomputation per step, and REINFORCE++'s flat scan is marked not to be compared by default
(``FlatScan.compared_by_default``); the default compares these only when the run's config
declares them (name them with ``--estimator`` to add them).

:func:`own_recomputation` finds the one the run trained with: what
:func:`trajlens.estimators.trained_with` reads from its logged configuration, matched to a
compared recomputation by estimator and settings (:meth:`EstimatorChoice.among`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trajlens.errors import ConfigError
from trajlens.estimators import EstimatorInputError
from trajlens.estimators.registry import ESTIMATOR_REGISTRY, estimator_spec, label_mismatch
from trajlens.estimators.spec import EstimatorChoice, label_problem
from trajlens.estimators.trained import TrainedWith


def registry_recomputations() -> tuple[EstimatorChoice, ...]:
    """Every estimator of the registry under each of its labelled variants, in registry order."""
    return tuple(variant if variant.doc else EstimatorChoice(variant.label, spec.name, dict(variant.options), spec.summary)
                 for spec in ESTIMATOR_REGISTRY.values() for variant in spec.variants())


RECOMPUTATIONS: tuple[EstimatorChoice, ...] = registry_recomputations()
"""Every recomputation attribution compares by default, where the run's data allows it (see the
module docstring for the token-level estimators without a flat step kernel)."""

def with_own(trained: TrainedWith, wanted: tuple[EstimatorChoice, ...]) -> tuple[EstimatorChoice, ...]:
    """``wanted`` with the run's own estimator in it: where the recomputation of its label has
    other settings (the run names an older trainer release, whose convention differs from the
    registry's default), the run's own settings take that label's place; a label none of them
    has (an estimator identified from the logged advantages, ``trl_grpo_group``) is added."""
    choice = trained.choice
    if choice is None or any(choice.computes_as(rec) for rec in wanted):
        return wanted
    if all(rec.label != choice.label for rec in wanted):
        return (*wanted, choice)
    return tuple(choice if rec.label == choice.label else rec for rec in wanted)


def other_conventions(trained: TrainedWith, wanted: tuple[EstimatorChoice, ...]) -> tuple[EstimatorChoice, ...]:
    """The registry's other conventions of the run's own estimator (verl's REINFORCE++ with the
    return reset at observations against the return carried across them, say), not already in
    ``wanted``: the counterfactual that differs from the run in that convention alone."""
    choice = trained.choice
    if choice is None or choice.estimator not in ESTIMATOR_REGISTRY:
        return ()
    present = {(rec.estimator, tuple(sorted(rec.options.items()))) for rec in wanted}
    labels = {rec.label for rec in wanted}
    return tuple(c for c in ESTIMATOR_REGISTRY[choice.estimator].conventions
                 if (c.estimator, tuple(sorted(c.options.items()))) not in present and c.label not in labels
                 and c.options != choice.options)


AGGREGATIONS: tuple[str, ...] = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
"""verl's loss aggregation modes (``loss_agg_mode``); each call's push is computed under each."""



@dataclass(frozen=True)
class RunEstimator:
    """What a run trained with, as far as its configuration says."""

    label: str | None
    """Label of the matching recomputation; None when unknown."""
    aggregation: str
    """Its loss aggregation (``token-mean`` when the config does not say)."""
    aggregation_logged: bool
    not_computed: str | None = None
    """The run's estimator when it is known but could not be recomputed (``label`` is then None)."""


def own_recomputation(trained: TrainedWith, recomputations: tuple[EstimatorChoice, ...]) -> RunEstimator:
    """Of ``recomputations``, the one the run trained with (``trained``, from
    :func:`trajlens.estimators.trained_with` or :func:`trajlens.run.trained.run_trained_with`): the
    recomputation of the same estimator and settings, preferring one of the same label; None when none is."""
    own = trained.among(recomputations)
    return RunEstimator(own.label if own is not None else None, trained.aggregation, trained.aggregation_logged)


def parse_recomputations(pairs: list[str], options: dict[str, dict[str, Any]]) -> tuple[EstimatorChoice, ...]:
    """``LABEL=NAME`` pairs with their options (``{label: {name: value}}``) as recomputations."""
    problems, out = [], []
    for pair in pairs:
        label, sep, name = pair.partition("=")
        if not sep:
            label, name = pair, pair
        if (problem := label_problem(label)) is not None:
            problems.append(f"--estimator {pair!r}: the label: {problem}")
            continue
        try:
            estimator_spec(name)
        except EstimatorInputError as unknown:
            problems.append(f"--estimator {pair!r}: {unknown}")
            continue
        given = dict(options.get(label, {}))
        option_problems = ESTIMATOR_REGISTRY[name].option_problems(given)
        problems += [f"--option for {label!r}: {problem}" for problem in option_problems]
        if not option_problems and (mismatch := label_mismatch(label, name, given)) is not None:
            # its credit would be saved, and read by the report and the viewer, as that computation's
            problems.append(f"--estimator {pair!r}: {mismatch}; name it otherwise")
        out.append(EstimatorChoice(label, name, given, f"{name} {given}"))
    labels = [r.label for r in out]
    problems += [f"--estimator label {label!r} given twice" for label in sorted({x for x in labels if labels.count(x) > 1})]
    problems += [f"--option for {label!r}, which no --estimator names" for label in options if label not in labels]
    if problems:
        raise ConfigError(problems)
    return tuple(out)

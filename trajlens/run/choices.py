"""Which estimators the report recomputes on a stored run, and their per-step diagnostics.

The report's choices are the registry's report variants (:data:`ESTIMATOR_CHOICES`), and the
estimator a run's config says it trained with where none of them computes it (:func:`run_choices`:
verl GAE at the run's own gamma and lambda); a run allows those whose inputs its data holds (:func:`trajlens.run.facts.stored_facts`, then the
facts of its token arrays as they are read) and, for estimators reported only when declared,
whose config names them. :func:`report_advantages` decides and computes in one read of the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import polars as pl

from trajlens.estimators.spec import EstimatorChoice
from trajlens.run.config import run_declared

if TYPE_CHECKING:
    from trajlens.run.stepwise import BatchFeed


def _report_choices() -> tuple[EstimatorChoice, ...]:
    from trajlens.estimators.registry import REPORT_VARIANTS

    return tuple(variant for _, variant in REPORT_VARIANTS)


ESTIMATOR_CHOICES: tuple[EstimatorChoice, ...] = _report_choices()
"""Every recomputation the report can make, read from the estimator registry's report variants."""


def run_choices(config: Any, estimator_column: str | None = None) -> tuple[EstimatorChoice, ...]:
    """The recomputations the report can make on a run: :data:`ESTIMATOR_CHOICES`, and the
    estimator the run's config says it trained with where none of them computes it under a label
    of its own (verl's GAE at the run's gamma and lambda: ``gae_raw+gamma=0.99+lam=0.95``)."""
    from trajlens.estimators.trained import trained_with

    own = trained_with(config, estimator_column).choice
    if own is None or own.among(ESTIMATOR_CHOICES) is not None or own.label in {c.label for c in ESTIMATOR_CHOICES}:
        return ESTIMATOR_CHOICES
    return (*ESTIMATOR_CHOICES, own)


class ReportAdvantages(NamedTuple):
    """The estimators the report recomputes on a run, their diagnostics, and what the run's
    token arrays say (:func:`report_advantages`)."""

    choices: list[EstimatorChoice]
    diagnostics: pl.DataFrame
    empty_tokens: str | None
    """A sentence when the run has token arrays but none holds a model token."""
    notes: tuple[str, ...] = ()
    """One line per report estimator left out because a trajectory lacks a reward channel others have."""
    extremes: pl.DataFrame | None = None
    """With ``extremes``: ``estimator``, ``step``, ``min`` and ``max`` of the values each row of
    ``diagnostics`` describes (what the checks' ``max_sigma`` reads)."""
    logged: tuple[Any, ...] = ()
    """The ``logged`` feeds that were fed every training step (none when the run logged no advantages)."""


FACT_TOKEN_COLUMNS: tuple[str, ...] = ("trajectory_id", "response_mask", "values", "log_probs")
"""Token columns read to decide which estimators a run allows, when nothing else is computed."""


def report_advantages(store: Any, run_id: str, *, compute: bool = True,
                      steps: Sequence[int] | None = None, extremes: bool = False,
                      logged: Sequence[BatchFeed] = ()) -> ReportAdvantages:
    """Which report estimators the run's data (and logged config) allows, and, with ``compute``,
    their per-step diagnostics, in one read of the run a batch of steps at a time.

    The estimators the trajectories alone allow are recomputed while the token arrays are read
    (:func:`trajlens.run.stepwise.advantage_pass`); the token arrays' facts, gathered on the
    way, then decide which of them the report keeps, as
    :meth:`~trajlens.estimators.registry.EstimatorSpec.in_report` decides from the whole run. An
    input error of a kept estimator is raised; one of an estimator the facts rule out is not.
    ``steps`` restricts all of it to those steps; ``extremes`` adds each row's ``min`` and ``max``
    (:attr:`ReportAdvantages.extremes`, kept out of ``diagnostics``). ``logged``: readers of the
    run's logged advantages (the checks' :class:`~trajlens.checks.step_measures.LoggedAdvantages`),
    fed the same batches when the run logged some, so that its token arrays are read once.
    """
    from trajlens.errors import ConfigError
    from trajlens.estimators.registry import estimator_spec, run_facts
    from trajlens.run.batches import train_trajectories
    from trajlens.run.facts import stored_facts
    from trajlens.run.reader import RunReader
    from trajlens.run.stepwise import advantage_pass

    try:
        trajectories = train_trajectories(store, run_id, steps)
    except ConfigError:
        return ReportAdvantages([], pl.DataFrame(), _empty_token_arrays(store, run_id))
    declared = run_declared(store, run_id)
    # what the token arrays hold is known once they are read; before, the most their footers allow
    stored = stored_facts(RunReader.of(store, run_id), trajectories, declared.config, estimator_column=declared.estimator)
    possible = stored.possible()
    reportable = run_choices(*declared)
    candidates = [c for c in reportable if c.in_report(possible)]
    feeds = tuple(logged) if compute and stored.logged else ()
    result = advantage_pass(store, run_id, candidates if compute else [], trajectories=trajectories,
                            token_columns=FACT_TOKEN_COLUMNS, extremes=extremes and compute, feeds=feeds)
    facts = run_facts(trajectories, result.token_rows if result.token_rows.height else None, *declared)
    choices = [c for c in candidates if c.in_report(facts)]
    empty = _no_model_tokens(result.token_arrays, result.with_model_tokens, result.empty_arrays)
    if empty:
        choices = [c for c in choices if c.needs not in ("values", "channels_with_lengths")]
    notes = tuple(dict.fromkeys(note for c in reportable
                                if (note := estimator_spec(c.estimator).channel_gap_note(possible))))
    if not compute:
        return ReportAdvantages(choices, pl.DataFrame(), empty, notes)
    for choice in list(choices):
        if choice.label in result.errors:
            if choice in ESTIMATOR_CHOICES:
                raise result.errors[choice.label]
            # the run's own settings, read from its config, that its data does not fit (a channel it lacks)
            choices.remove(choice)
            notes += (f"{choice.label} (the run's own estimator, as its config sets it): not recomputed "
                      f"({result.errors[choice.label]})",)
    labels = [c.label for c in choices]
    diagnostics = result.diagnostics
    if diagnostics.height:
        diagnostics = diagnostics.filter(pl.col("estimator").is_in(labels))
    if not extremes:
        return ReportAdvantages(choices, diagnostics, empty, notes, logged=feeds)
    bounds = [c for c in ("min", "max") if c in diagnostics.columns]
    return ReportAdvantages(choices, diagnostics.drop(bounds), empty, notes,
                            diagnostics.select("estimator", "step", *bounds) if bounds else None, feeds)


def available_estimators(store: Any, run_id: str, frames: Any = None) -> list[EstimatorChoice]:
    """The report's estimator choices that a run's data (and logged config) allows.

    Each registry entry decides with :meth:`~trajlens.estimators.registry.EstimatorSpec.in_report`:
    its inputs present, and, for estimators reported only when declared, the run's config naming it.
    Without ``frames`` (a :class:`~trajlens.run.advantages.RunFrames`), the facts are read a
    batch of steps at a time (:func:`report_advantages`).
    """
    from trajlens.estimators.registry import run_facts

    if frames is None:
        stamp = run_stamp(store, run_id)
        key = (str(getattr(store, "path", id(store))), run_id, stamp)
        if stamp is None or key not in _ALLOWED:
            choices = report_advantages(store, run_id, compute=False).choices
            if stamp is None:
                return choices
            while len(_ALLOWED) >= ALLOWED_KEPT:  # the oldest answer goes: a comparison asks for both its sides, by turns
                del _ALLOWED[next(iter(_ALLOWED))]
            _ALLOWED[key] = choices
        return list(_ALLOWED[key])
    declared = run_declared(store, run_id)
    facts = run_facts(frames.trajectories, frames.tokens, *declared)
    return [choice for choice in run_choices(*declared) if choice.in_report(facts)]


def possible_facts(store: Any, run_id: str) -> Any:
    """The most a stored run's data may hold (:meth:`~trajlens.run.facts.StoredFacts.possible`:
    what its trajectories, token footers and config tell, before its token arrays are read);
    None when it has no training trajectories."""
    from trajlens.errors import ConfigError
    from trajlens.run.batches import train_trajectories
    from trajlens.run.facts import stored_facts
    from trajlens.run.reader import RunReader

    try:
        trajectories = train_trajectories(store, run_id)
    except ConfigError:
        return None
    declared = run_declared(store, run_id)
    return stored_facts(RunReader.of(store, run_id), trajectories, declared.config,
                        estimator_column=declared.estimator).possible()


def stored_lacks(store: Any, run_id: str, choice: EstimatorChoice) -> list[str]:
    """What keeps the report from recomputing ``choice`` on a stored run, in the registry's
    words (:meth:`~trajlens.estimators.spec.EstimatorChoice.missing` on :func:`possible_facts`,
    then a config that does not declare an estimator reported only when declared); empty when
    nothing the trajectories and token footers tell does."""
    facts = possible_facts(store, run_id)
    if facts is None:
        return ["trajectories of split 'train'"]
    lacking = choice.missing(facts)
    if not lacking and not choice.in_report(facts):
        lacking = [f"a config that names {choice.estimator} (the report recomputes it only on the runs that train with it)"]
    return lacking


_ALLOWED: dict[tuple[str, str, tuple[int, int]], list[EstimatorChoice]] = {}
"""The last :func:`available_estimators` answers read from stored runs (:data:`ALLOWED_KEPT` at
most), by store, run and the run directory's stamp: reading one means a pass over the run's token arrays."""

ALLOWED_KEPT = 8
"""Runs whose :func:`available_estimators` answer is kept: a few choices each, where reading one
again is a pass over a run (a comparison of two runs asks for each several times, by turns)."""


def run_stamp(store: Any, run_id: str) -> tuple[int, int] | None:
    """(inode, mtime) of the run's directory in a local store (it changes when the run is
    replaced), or None when there is none to stamp."""
    import os

    path = getattr(store, "path", None)
    if path is None:
        return None
    try:
        status = os.stat(os.path.join(str(path), "runs", run_id))
    except OSError:
        return None
    return status.st_ino, status.st_mtime_ns


def advantage_diagnostics(store: Any, run_id: str, choices: list[EstimatorChoice], frames: Any = None) -> pl.DataFrame:
    """Per-step batch diagnostics of each estimator choice, stacked with an ``estimator`` column
    (a batch of steps at a time, :func:`trajlens.run.stepwise.diagnostics_by_step`, unless
    the run's ``frames`` are given)."""
    from trajlens.run.stepwise import labelled_diagnostics
    from trajlens.run.stepwise import diagnostics_by_step

    if not choices:
        return pl.DataFrame()
    if frames is None:
        return diagnostics_by_step(store, run_id, choices)
    return pl.concat([
        labelled_diagnostics(store, run_id, choice.estimator, choice.label, frames=frames, **choice.options)
        for choice in choices
    ])


def _empty_token_arrays(store: Any, run_id: str) -> str | None:
    """:func:`_no_model_tokens` of all the run's token arrays (for a run without training steps)."""
    facts = store.sql(
        "SELECT count(*) AS arrays, count(*) FILTER (WHERE list_bool_or(response_mask)) AS with_model_tokens, "
        "count(*) FILTER (WHERE len(response_mask) = 0) AS empty FROM tokens WHERE run_id = $run",
        {"run": run_id}).row(0, named=True)
    return _no_model_tokens(facts["arrays"], facts["with_model_tokens"], facts["empty"])


def _no_model_tokens(arrays: int, with_model_tokens: int, empty: int) -> str | None:
    """A sentence when a run has token arrays but none holds a model token."""
    if arrays == 0 or with_model_tokens > 0:
        return None
    what = "every token array is empty" if empty == arrays else "every response mask is false"
    return (f"token arrays hold no model token ({what}, {arrays} arrays): token-level estimators "
            "(GAE, token-level GDPO) left out")


__all__ = ["ESTIMATOR_CHOICES", "FACT_TOKEN_COLUMNS", "EstimatorChoice", "ReportAdvantages", "advantage_diagnostics",
           "available_estimators", "report_advantages", "run_stamp", "stored_lacks"]

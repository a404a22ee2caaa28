"""Checks evaluated on a run: :func:`evaluate_checks` and :func:`check_run`.

A check's status is ``fail`` (an error-level check fired), ``warn`` (a warning-level check
fired), ``pass`` (it was evaluated on at least one step and did not fire) or ``skip`` (the run
cannot provide its measure, its configuration lacks the key the check is conditional on, no
step comes after its ``after_step`` or has the configuration its ``when`` asks for, or its condition could not be judged on the run: fewer
steps than its window or baseline, fewer than two stages with data; the reason is given). A
skipped check is never counted as passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

import polars as pl

from trajlens.checks import conditions, step_measures
from trajlens.checks.conditions import Evidence, Outcome
from trajlens.checks.data import Needs, Precomputed, RunState, open_batches
from trajlens.estimators.trained import config_at
from trajlens.checks.spec import Check

STATUSES: tuple[str, ...] = ("fail", "warn", "pass", "skip")


@dataclass(frozen=True)
class CheckResult:
    """The verdict of one check on one run."""

    check: Check
    status: str
    outcomes: tuple[Outcome, ...] = ()
    """One per concrete measure evaluated (a ``*`` measure gives several)."""
    reason: str = ""
    """Why the check was skipped, or a note on what it could not evaluate."""

    @property
    def name(self) -> str:
        return self.check.name

    @property
    def fired(self) -> bool:
        return self.status in ("fail", "warn")

    @property
    def fired_steps(self) -> tuple[int, ...]:
        return tuple(sorted({step for outcome in self.outcomes for step in outcome.fired_steps}))

    @property
    def alarms(self) -> dict[str, tuple[int, ...]]:
        """Steps where the check fired, per concrete measure (for drawing alarm lines)."""
        return {o.measure: o.fired_steps for o in self.outcomes if o.fired_steps}

    @property
    def leading(self) -> Outcome | None:
        """The outcome of the measure that fired most (of a ``*`` measure's, the channel or metric
        that fired; the first in order among equals)."""
        if not self.outcomes:
            return None
        return max(self.outcomes, key=lambda o: len(o.fired_steps))

    @property
    def evidence(self) -> Evidence | None:
        """The evidence of the measure that fired most (or came closest)."""
        return None if self.leading is None else self.leading.evidence

    def evidence_text(self) -> str:
        """Each measure's evidence, the measures that fired first (most steps first), so a ``*``
        check leads with the channel or metric it fired on."""
        if self.status == "skip":
            return self.reason
        parts = []
        for outcome in sorted(self.outcomes, key=lambda o: -len(o.fired_steps)):
            prefix = f"{outcome.measure}: " if len(self.outcomes) > 1 or outcome.measure != self.check.measure else ""
            parts.append(prefix + outcome.evidence.describe())
        text = "; ".join(parts)
        return f"{text} ({self.reason})" if self.reason else text


def _applicable(check: Check, state: RunState, series: pl.DataFrame) -> tuple[pl.DataFrame, str]:
    """The rows of ``series`` the check applies to, and a reason when none."""
    if check.skip_when_absent and not (series["x"] != 0).any():
        return series.clear(), f"skip:{series['measure'][0]} is 0 at every step: the run never shows it"
    if check.after_step is not None:
        series = series.filter(pl.col("step") > check.after_step)
        if not series.height:  # before any when: the config holds its key, the run no step after
            return series, f"skip:no step after {check.after_step}"
    if check.when is None:
        return series, ""
    history = state.info.history
    keep, kinds = [], set()
    wanted = _kind(check.when.equals)
    for step in series["step"].to_list():
        value = config_at(history.at(step), check.when.path)
        if value is not None:
            kinds.add(_kind(value))
        if value is not None and _kind(value) == wanted and value == check.when.equals:
            keep.append(step)
    path = ".".join(check.when.path)
    if not kinds:
        return series.clear(), f"skip:the run's config has no {path}"
    if not keep and wanted not in kinds:  # `equals = "false"` for a switch, `= 1` for a name: it could never hold
        return series.clear(), (f"skip:{path} holds {' or '.join(sorted(kinds))} in the run's config, never "
                                f"{wanted} as the check's when asks ({check.when.describe()})")
    if not keep:
        return series.clear(), f"skip:{check.when.describe()} holds at no step"
    return series.filter(pl.col("step").is_in(keep)), ""


def _kind(value: Any) -> str:
    """What a configuration value is, in words: a ``when`` matches a value of its own kind
    (an integer and a float are both numbers; true and 1 are not the same)."""
    if isinstance(value, bool):
        return "a switch (true or false)"
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "text", dict: "a table", list: "a list"}.get(type(value), type(value).__name__)


_STAGED_ON_RUN_STEPS = ("tool_calls", "trajectories", "channels", "advantages", "logged_advantages")
"""Sources of measures of the measured split's trajectories: their stages are cut on the run's steps
(:func:`_on_run_steps`), as the stage report cuts them, also where a step has no value (no
advantage where a reward is missing)."""


def _on_run_steps(series: pl.DataFrame, state: RunState, upto: int | None) -> pl.DataFrame:
    """``series`` with an empty row (no units) for each step with measured trajectories it lacks:
    stages cut by position (quartiles, early/late) are then the run's, as the stage report cuts
    its trajectories' steps, not those of the steps where the measure has a value (a read-back
    share only where edits are)."""
    steps = [step for step in state.trajectory_steps if upto is None or step <= upto]
    missing = sorted(set(steps) - set(series["step"].to_list()))
    if not missing:
        return series
    empty = pl.DataFrame({"step": missing}).select(
        pl.lit(series["measure"][0]).alias("measure"), pl.col("step"),
        *(pl.lit(0).alias(column) for column in series.columns if column not in ("measure", "step")))
    return pl.concat([series, empty.cast(series.schema)], how="vertical").sort("step", maintain_order=True)


def evaluate_check(check: Check, state: RunState, upto: int | None = None) -> CheckResult:
    """Evaluate one check on the run's accumulated statistics (on its steps up to ``upto``, when
    given: the verdict the check had when that step was the last)."""
    name = step_measures.parse_measure(check.measure)
    concrete = state.expand(check.measure, upto)
    if not concrete:
        return CheckResult(check, "skip", reason=state.missing_reason(check.measure))
    outcomes, skipped = [], []
    for measure in concrete:
        series = state.series(measure, upto)
        if series.is_empty():
            skipped.append(state.missing_reason(measure))
            continue
        if check.condition == "stage_change" and isinstance(check.stages, str) and \
                name.family.source in _STAGED_ON_RUN_STEPS:
            series = _on_run_steps(series, state, upto)
        series, note = _applicable(check, state, series)
        if note.startswith("skip:"):
            skipped.append(note[5:])
            continue
        outcome = conditions.evaluate(check, measure, series, name.proportion)
        if not outcome.judged:
            skipped.append(outcome.evidence.detail if len(concrete) == 1 else f"{measure}: {outcome.evidence.detail}")
            continue
        outcomes.append(outcome)
    if not outcomes:
        return CheckResult(check, "skip", reason="; ".join(dict.fromkeys(skipped)))
    fired = any(outcome.fired_steps for outcome in outcomes)
    status = ("fail" if check.severity == "error" else "warn") if fired else "pass"
    notes = [note for measure in concrete if (note := state.note(measure)) is not None]
    if skipped:
        notes.append(f"not evaluated: {'; '.join(dict.fromkeys(skipped))}")
    return CheckResult(check, status, tuple(outcomes), "; ".join(notes))


def evaluate_checks(checks: Sequence[Check], state: RunState, upto: int | None = None) -> list[CheckResult]:
    """Evaluate every check (on the steps up to ``upto``, when given); results in the checks' order."""
    return [evaluate_check(check, state, upto) for check in checks]


@dataclass(frozen=True)
class RunChecks:
    """The checks of one run, evaluated."""

    run_id: str
    source: str
    results: list[CheckResult] = field(default_factory=list)
    steps: int = 0
    """Steps of the run's measured split (those of its scalars for a run without trajectories)."""

    def failed(self, strict: bool = False) -> bool:
        """Whether a check failed (with ``strict``, a warning counts too)."""
        return any(r.status == "fail" or strict and r.status == "warn" for r in self.results)

    def counts(self) -> dict[str, int]:
        return {status: sum(r.status == status for r in self.results) for status in STATUSES}


def check_run(source: Path | str, checks: Iterable[Check] | None = None, run_id: str | None = None,
              precomputed: Precomputed | None = None) -> RunChecks:
    """Read a run (store with ``run_id``, run directory, verl dumps, metrics file) and evaluate ``checks``.

    ``checks`` default to the shipped ones (:func:`trajlens.checks.default_checks`);
    ``precomputed``: what the caller already computed over the run, taken instead of computing it again.
    """
    from trajlens.checks.spec import default_checks

    checks = tuple(default_checks() if checks is None else checks)
    needs = Needs.of(checks)
    if precomputed is None or precomputed.measures is None:
        saved = _saved_measures(source, run_id) if "tool_calls" in needs.sources else None
        if saved is not None:
            precomputed = replace(precomputed or Precomputed(), measures=saved)
    if precomputed is not None and precomputed.measures is not None:
        needs = replace(needs, classified=True)
    info, batches = open_batches(source, run_id, needs)
    state = RunState(info, needs, precomputed)
    for batch in batches:
        state.add(batch)
    return RunChecks(info.run_id, info.source, evaluate_checks(checks, state), measured_steps(state))


def measured_steps(state: RunState, upto: int | None = None) -> int:
    """The steps a run's checks report (up to ``upto``): those of its measured split, as the report
    counts them; for a run of scalars alone, its logged steps."""
    steps = state.trajectory_steps or state.steps
    return len([step for step in steps if upto is None or step <= upto])


def _stored_run(source: Path | str, run_id: str | None) -> Path | None:
    """The run's folder when ``source`` is a store (as open_batches tells one); None for anything
    else, and for a run the store lacks (open_batches names the problem)."""
    from trajlens.checks.data import _store_run
    from trajlens.errors import ConfigError

    path = Path(source)
    if not path.is_dir() or not (path / "runs").is_dir():
        return None
    try:
        return _store_run(path, run_id)
    except ConfigError:
        return None


def _saved_measures(source: Path | str, run_id: str | None) -> Any:
    """The classified calls' measures a store saved for the run (``trajlens classify``), which
    the checks take rather than classifying the calls again; None for anything else."""
    from trajlens.run.measures import saved_measures

    run_dir = _stored_run(source, run_id)
    if run_dir is None:
        return None
    return saved_measures(run_dir.parent.parent, run_dir.name)  # read from its folder: checking writes nothing


__all__ = ["CheckResult", "RunChecks", "STATUSES", "check_run", "evaluate_check", "evaluate_checks"]

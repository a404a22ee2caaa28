"""The run a check reads: where it comes from, and its measures accumulated step batch by step batch.

:func:`open_batches` takes a store (with ``--run``), a canonical run directory, a verl dump
directory or a metrics JSONL/CSV file; a run in the step layout comes a batch of steps at a
time (at most :data:`trajlens.run.batches.BATCH_TOKENS` tokens, reading only the tables
the checks need), anything else whole. :class:`RunState` turns batches of steps into per-step
statistics (:mod:`trajlens.checks.step_measures`), so that a run is checked in the memory of a batch
and ``--watch`` can add each new step without touching the old ones.
"""

from __future__ import annotations

import difflib
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import polars as pl

from trajlens.checks import step_measures as m
from trajlens.checks.spec import Check
from trajlens.errors import ConfigError, InputError
from trajlens.estimators.spec import EstimatorChoice
from trajlens.run.identify import LoggedEstimator
from trajlens.run.splits import TRAIN_SPLIT, chosen_split, ordered_splits
from trajlens.run.stepwise import TOKEN_COLUMNS, choice_token_columns
from trajlens.schema import SCHEMAS

if TYPE_CHECKING:
    import pyarrow as pa

    from trajlens.store.ahead import ReadAhead

BATCH_TABLES: tuple[str, ...] = ("trajectories", "tool_calls", "tokens", "step_metrics")

CLASSIFY_CALLS = 65_536
"""Tool calls classified together. Each pass of the classifier costs tens of milliseconds
whatever its size (about 55,000 calls/s on steps of 3,300 calls, 300,000 on 64,000 at once), so
the calls of small batches are held until this many have come, or until statistics are asked
(:meth:`RunState.series`), and classified in one pass. Memory holds these calls beside a batch."""


def empty_frame(name: str) -> pl.DataFrame:
    return pl.from_arrow(SCHEMAS[name].empty_table())


@dataclass
class NewSteps:
    """Rows of one or more new steps, one frame per table (empty frames where nothing came)."""

    trajectories: pl.DataFrame = field(default_factory=lambda: empty_frame("trajectories"))
    tool_calls: pl.DataFrame = field(default_factory=lambda: empty_frame("tool_calls"))
    tokens: pl.DataFrame = field(default_factory=lambda: empty_frame("tokens"))
    step_metrics: pl.DataFrame = field(default_factory=lambda: empty_frame("step_metrics"))
    read_tokens: Callable[[Sequence[str] | None], pl.DataFrame] | None = None
    """Reads this batch's token rows (only the given columns; every column with None) when they
    were not read with it: a check that needs no token array, or only learns from a column that
    the run logged nothing, leaves the arrays unread."""
    _read: dict[tuple[str, ...] | None, pl.DataFrame] = field(default_factory=dict, repr=False)

    def token_rows(self, columns: Sequence[str] | None = None) -> pl.DataFrame:
        """The batch's token rows (``columns`` of them, when given), read on demand once."""
        if self.read_tokens is None or self.tokens.height:
            return self.tokens if columns is None else self.tokens.select(c for c in columns if c in self.tokens.columns)
        key = None if columns is None else tuple(columns)
        if key not in self._read:
            # a read that holds every column asked serves them (every column: None)
            wider = next((frame for read, frame in self._read.items()
                          if key is not None and (read is None or set(key) <= set(read))), None)
            self._read[key] = self.read_tokens(columns) if wider is None else \
                wider.select(c for c in key if c in wider.columns)
        return self._read[key]

    def logs_advantages(self) -> bool:
        """Whether the batch holds logged advantages (per trajectory, or per token, read alone)."""
        from trajlens.estimators.identify import LOGGED_COLUMNS, logs_advantages

        return logs_advantages(self.trajectories, "trajectories") or \
            logs_advantages(self.token_rows([LOGGED_COLUMNS["tokens"]]), "tokens")

    @property
    def steps(self) -> list[int]:
        found: set[int] = set()
        for name in BATCH_TABLES:
            found.update(getattr(self, name)["step"].unique().to_list())
        return sorted(found)


@dataclass(frozen=True)
class RunInfo:
    """What a check needs to know about the run besides its rows."""

    run_id: str
    source: str
    history: m.ConfigHistory
    split: str | None = None
    """The split whose trajectories are measured, when it is known before the batches are read
    (a run directory's or a store's run: training when it has any, else the first it has);
    None: the first batch with trajectories tells it."""
    estimator: str | None = None
    """The run's ``runs.estimator`` (the estimator its log declares), read as the config's
    ``algorithm.adv_estimator`` when the config lacks it, as the report and attribution read it."""

    @classmethod
    def of_runs(cls, run_id: str, source: str, runs: pa.Table, folder: Path) -> "RunInfo":
        """A run's info from its ``runs`` row: its config (with the config history kept in
        ``folder``) and its estimator column."""
        return cls(run_id, source, _history(runs.column("config")[0].as_py(), folder),
                   estimator=runs.column("estimator")[0].as_py())


@dataclass(frozen=True)
class Precomputed:
    """What a caller (the report) has already computed over the whole run, handed to the checks
    so that they do not compute it again: steps are taken from these frames, not recomputed."""

    measures: pl.DataFrame | None = None
    """Per-trajectory measures of the run's classified calls, every step
    (:func:`trajlens.classify.trajectory_measures`, as ``trajlens classify`` stores them): the
    checks then do not read or classify the tool calls."""
    advantages: pl.DataFrame | None = None
    """Per-step diagnostics of ``choices``, stacked with an ``estimator`` column and each batch's
    ``min`` and ``max`` (:func:`trajlens.run.stepwise.batch_choice_diagnostics` with ``extremes``)."""
    choices: tuple[EstimatorChoice, ...] = ()
    """The estimator choices whose diagnostics ``advantages`` holds."""
    logged: Mapping[str, m.LoggedAdvantages] = field(default_factory=dict)
    """Candidate -> its ``logged_advantage_diff`` fed every training step of the run (by the
    report's advantage pass, which reads the token arrays once for both)."""

    def has(self, choice: EstimatorChoice) -> bool:
        """Whether ``choice`` (label, estimator and options alike) was computed."""
        return self.advantages is not None and any(
            c.label == choice.label and choice.computes_as(c) for c in self.choices)


@dataclass(frozen=True)
class Needs:
    """The measure sources and estimator labels a set of checks reads."""

    sources: frozenset[str]
    labels: tuple[str, ...]
    logged: tuple[str, ...] = ()
    """Candidates the logged advantages are compared with (``logged_advantage_diff:<candidate>``)."""
    classified: bool = False
    """Whether the classified calls' measures are handed over (:class:`Precomputed`): the tool calls are not read."""

    @staticmethod
    def of(checks: Iterable[Check]) -> "Needs":
        sources, labels, logged = set(), [], []
        for check in checks:
            name = m.parse_measure(check.measure)
            sources.add(name.family.source)
            if name.family.prefix == "advantage":
                label = name.parameter.split(":")[0]
                if label not in labels:
                    labels.append(label)
            if name.family.source == "logged_advantages" and name.parameter not in logged:
                logged.append(name.parameter)
        return Needs(frozenset(sources), tuple(labels), tuple(logged))

    @property
    def tables(self) -> frozenset[str]:
        """The run tables these checks read."""
        tables = {"trajectories", "step_metrics"}
        if "tool_calls" in self.sources and not self.classified:
            tables.add("tool_calls")
        if self.sources & {"advantages", "logged_advantages"}:
            tables.add("tokens")
        return frozenset(tables)


def _trains(trajectories: pl.DataFrame) -> bool:
    """Whether ``trajectories`` hold a training trajectory (a table without splits is all training)."""
    return trajectories.height > 0 and ("split" not in trajectories.columns
                                        or bool((trajectories["split"] == TRAIN_SPLIT).any()))


class RunState:
    """Per-step statistics of every measure the checks need, grown by :meth:`add`."""

    def __init__(self, info: RunInfo, needs: Needs, precomputed: Precomputed | None = None,
                 split: str | None = None) -> None:
        self.info = info
        self.needs = needs
        self.precomputed = precomputed or Precomputed()
        self.split = split if split is not None else info.split
        """The split whose trajectories are measured (:mod:`trajlens.run.splits`); None until the
        first batch with trajectories tells it: training when that batch has it, else the split it has."""
        self._by_measure: dict[str, list[pl.DataFrame]] = {}
        """Each measure's per-step statistics, as added (without the ``measure`` column)."""
        self._sorted: set[str] = set()
        """Measures whose statistics are one frame in step order."""
        self._measured_rows: list[pl.DataFrame] = []
        """Handed measures of the batches added, whose statistics are not yet computed."""
        self._held_calls: list[tuple[pl.DataFrame, pl.DataFrame]] = []
        """(measured trajectories, their tool calls) of the batches added whose calls are not
        yet classified (:data:`CLASSIFY_CALLS`)."""
        self.steps: list[int] = []
        self.trajectory_steps: list[int] = []
        """The steps with trajectories of the measured split: the steps a stage cut divides."""
        self.seen: set[str] = set()
        """Tables that have had rows: what the run can provide."""
        self.advantage_problems: dict[str, str] = {}
        self._identifier = LoggedEstimator(info.history.current)
        """The run's estimator named by its logged advantages, fed batch after batch (when its
        config names none): one for the run's own label and the logged-advantages measures."""
        self.logged = {candidate: self.precomputed.logged.get(candidate)
                       or m.LoggedAdvantages(candidate, info.history.current, identifier=self._identifier,
                                             estimator_column=info.estimator)
                       for candidate in needs.logged}
        """Candidate -> its ``logged_advantage_diff`` measure, fed batch after batch (or handed over whole)."""
        from trajlens.estimators.trained import trained_with

        declared = trained_with(info.history.current, info.estimator)
        self.run_label = m.own_label(declared)
        """The estimator the run trained with: from its config, else from its logged advantages."""
        self.run_label_problem = ""
        """Why neither its config nor its logged advantages name one."""
        self.run_label_source = m.declared_source(declared)
        """How the run's estimator is known."""
        self._identify_pending = self.run_label is None and m.RUN_LABEL in needs.labels
        self._carry: dict[str, dict[str, Any]] = {}
        """Per label, what its estimator carries from step to step, from one batch to the next."""
        self._run_logs = False
        """Whether an earlier batch logged advantages: the later ones are read whole at once."""
        self.labels = tuple(m.LABELS[label] for label in needs.labels if label != m.RUN_LABEL)
        self._add_run_label()

    def _add_run_label(self) -> None:
        if m.RUN_LABEL in self.needs.labels and self.run_label is not None:
            if self.run_label.label not in [label.label for label in self.labels]:
                self.labels += (self.run_label,)

    def _logs(self, batch: NewSteps) -> bool:
        """Whether to read ``batch``'s logged advantages with its token arrays: once a batch of
        the run logged them, the rest are read whole without asking (a batch that logs none
        then shows none); until then each is asked from its logged column alone."""
        self._run_logs = self._run_logs or batch.logs_advantages()
        return self._run_logs

    def _identify_run_label(self, batch: NewSteps) -> None:
        """When the config names no estimator: the one the logged advantages of the run's first
        training steps name, batch after batch until one decides (:class:`trajlens.run.identify.LoggedEstimator`,
        the function the report and attribution ask)."""
        from trajlens.estimators import EstimatorInputError
        config = self.info.history.current

        def step_tokens(step: int) -> pl.DataFrame | None:
            return batch.token_rows().filter(pl.col("step") == step) if batch.logs_advantages() else None

        try:
            found = self._identifier.add(batch.trajectories, step_tokens)
        except EstimatorInputError as error:
            self._identify_pending = False
            self.run_label_problem = str(error).removeprefix("identify_advantages: ")
            return
        self._identify_pending = not self._identifier.done
        if found is None:
            self.run_label_problem = f"{_first_steps(len(self._identifier.tried))} no logged advantages that " \
                                     "tell the estimators apart"
            return
        self.run_label_problem = ""
        self.run_label = m.run_label(config, self.info.estimator, found)
        self.run_label_source = f"identified from its logged advantages: {found.verdict}"
        if self.run_label is None:
            self.run_label_problem = f"its logged advantages match no estimator ({found.verdict})"
        self._add_run_label()

    def note(self, measure: str) -> str | None:
        """What the measure's computation says beside its values: the logged advantages' verdict,
        or which estimator ``advantage:run:...`` stands for and how that is known."""
        name = m.parse_measure(measure)
        if name.family.source == "logged_advantages" and name.parameter in self.logged:
            return self.logged[name.parameter].note
        if measure.startswith(f"advantage:{m.RUN_LABEL}:") and self.run_label is not None:
            return f"the run's estimator is {self.run_label.label} ({self.run_label_source})"
        return None

    def _measured(self, trajectories: pl.DataFrame) -> pl.DataFrame:
        """The trajectories of the measured split (every one of a table without splits)."""
        if "split" not in trajectories.columns:
            return trajectories
        if self.split is None:
            if trajectories.is_empty():
                return trajectories
            self.split = chosen_split(ordered_splits(trajectories.get_column("split").unique().to_list()))
        return trajectories.filter(pl.col("split") == self.split)

    def add(self, batch: NewSteps) -> list[int]:
        """Compute the measures of a batch of new steps; returns those steps."""
        known = set(self.steps)
        steps = [s for s in batch.steps if s not in known]
        for name in BATCH_TABLES:
            if getattr(batch, name).height:
                self.seen.add(name)
        sources = self.needs.sources
        parts = []
        handed = self.precomputed
        batch_steps = batch.trajectories["step"].unique().implode()
        measured = self._measured(batch.trajectories)
        keys = measured.select("step", "trajectory_id")
        self.trajectory_steps = sorted(set(self.trajectory_steps) | set(measured["step"].unique().to_list()))
        if "tool_calls" in sources and handed.measures is not None:
            rows = handed.measures.filter(pl.col("step").is_in(batch_steps)).join(keys, on=["step", "trajectory_id"],
                                                                                   how="semi")
            if measured.height and rows.height and rows["n_calls"].sum():
                self.seen.add("tool_calls")
                self._measured_rows.append(rows)  # their statistics, per step, once for every batch
        elif "tool_calls" in sources:
            calls = batch.tool_calls.join(keys.select("trajectory_id"), on="trajectory_id", how="semi")
            self._held_calls.append((measured, calls))
            if sum(held.height for _, held in self._held_calls) >= CLASSIFY_CALLS:
                self._classify_held_calls()
        if "trajectories" in sources:
            parts.append(m.outcome_stats(measured))
        if "channels" in sources:
            parts.append(m.channel_stats(measured))
        if sources & {"step_metrics", "learning_rates", "critic_clip"}:
            parts.append(m.metric_stats(batch.step_metrics, self.info.history))
        if "advantages" in sources and self._identify_pending and _trains(batch.trajectories):
            self._identify_run_label(batch)
        given = [label for label in self.labels if handed.has(label)]
        if "advantages" in sources and given and batch.trajectories.height and handed.advantages is not None:
            parts.append(m.diagnostic_stats(handed.advantages.filter(pl.col("step").is_in(batch_steps)), given,
                                            self.run_label))
        rest = tuple(label for label in self.labels if label not in given)
        fed = [measure for candidate, measure in self.logged.items() if candidate not in handed.logged]
        logged = bool(fed) and batch.trajectories.height > 0 and self._logs(batch)
        logged_columns = tuple(dict.fromkeys(c for measure in fed for c in measure.token_columns)) if logged else None
        if logged_columns is not None:
            batch.token_rows(logged_columns)  # once: the recomputations below read theirs from it
        # the GAE scans the advantage statistics run, which the logged advantages' comparison takes
        scans: list[Any] | None = [] if logged else None
        if "advantages" in sources and rest and batch.trajectories.height:
            columns = choice_token_columns(rest) or TOKEN_COLUMNS
            stats, problems = m.advantage_stats(self.info.run_id, batch.trajectories,
                                                batch.token_rows(("run_id", *columns)), rest,
                                                self.run_label, carry=self._carry, scans=scans)
            parts.append(stats)
            for problem in problems:
                label, _, reason = problem.partition(": ")
                self.advantage_problems.setdefault(label, reason)
        if "logged_advantages" in sources and batch.trajectories.height:
            # a batch that logged nothing is told so without its token arrays
            logged_tokens = batch.token_rows(logged_columns) if logged_columns is not None else None
            for candidate, measure in self.logged.items():
                parts.append(measure.stats_of(batch_steps) if candidate in handed.logged
                             else measure.add(batch.trajectories, logged_tokens, scans))
        self._keep(parts)
        self.steps = sorted(set(self.steps) | set(steps))
        return steps

    def _keep(self, parts: list[pl.DataFrame]) -> None:
        for part in parts:
            if part.height:
                for (measure,), frame in part.partition_by("measure", as_dict=True, include_key=False).items():
                    self._by_measure.setdefault(measure, []).append(frame)
                    self._sorted.discard(measure)

    @property
    def holds_calls(self) -> bool:
        """Whether tool calls of the batches added wait to be classified (:data:`CLASSIFY_CALLS`)."""
        return bool(self._held_calls)

    def _classify_held_calls(self) -> None:
        """Classify the held calls of the batches added, at once, into their statistics (per step
        and trajectory: the batches they came in do not matter)."""
        if self._held_calls:
            held, self._held_calls = self._held_calls, []
            trajectories = pl.concat([t for t, _ in held], how="diagonal_relaxed")
            calls = pl.concat([c for _, c in held], how="diagonal_relaxed")
            self._keep([m.behaviour_stats(trajectories, calls)])

    def _settle(self) -> None:
        """Compute the statistics of the held calls and of the handed measures of every batch
        added, in one go (they are per step, so the batches they came in do not matter)."""
        self._classify_held_calls()
        if self._measured_rows:
            rows, self._measured_rows = pl.concat(self._measured_rows), []
            self._keep([m.trajectory_measure_stats(rows)])

    @property
    def stats(self) -> pl.DataFrame:
        """Every measure's per-step statistics (``measure``, ``step``, ...), sorted."""
        self._settle()
        series = [self.series(measure) for measure in sorted(self._by_measure)]
        return pl.concat(series) if series else m.empty_stats()

    def measure_names(self) -> set[str]:
        self._settle()
        return set(self._by_measure)

    def series(self, measure: str, upto: int | None = None) -> pl.DataFrame:
        """One measure's per-step statistics, in step order (of the steps up to ``upto``, when given)."""
        self._settle()
        frames = self._by_measure.get(measure)
        if not frames:
            return m.empty_stats()
        if len(frames) > 1 or measure not in self._sorted:
            frames[:] = [pl.concat(frames).sort("step", maintain_order=True)]
            self._sorted.add(measure)
        frame = frames[0]
        if upto is not None:
            frame = frame.head(int(frame["step"].search_sorted(upto, side="right")))
        return frame.select(pl.lit(measure).alias("measure"), pl.all())

    def _missing_channels(self, measure: str) -> str:
        """Why a reward channel measure has no values: the run has no channels (in groups of two
        or more, for rel_gain), or, for their collinearity, no two that vary at a step."""
        channels = sorted(name.removeprefix("channel_std:") for name in self._by_measure if name.startswith("channel_std:"))
        if measure != "channel_collinearity" or not channels:
            return "the run has no reward channels in groups of two or more"
        if len(channels) == 1:
            return f"the run has one reward channel ({channels[0]}): nothing to correlate it with"
        return (f"no two of the run's reward channels ({', '.join(channels)}) vary at the same step: "
                "a channel every trajectory of a step scores alike on has no correlation")

    def missing_reason(self, measure: str) -> str:
        """Why ``measure`` has no values in this run."""
        name = m.parse_measure(measure)
        source = name.family.source
        if source in ("tool_calls", "trajectories") and "trajectories" not in self.seen:
            return "the run has no trajectories"
        if source == "tool_calls" and "tool_calls" not in self.seen:
            return "the run has no tool calls"
        if source == "channels":
            return self._missing_channels(measure)
        if source == "advantages":
            label = name.parameter.split(":")[0]
            if label == m.RUN_LABEL and self.run_label is None:
                return ("the run's config names no estimator trajlens can recompute (algorithm.adv_estimator)"
                        + (f", and {self.run_label_problem}" if self.run_label_problem else ""))
            label = self.run_label.label if label == m.RUN_LABEL else label
            if "trajectories" not in self.seen:
                return "the run has no trajectories"
            return f"cannot recompute {label}: {self.advantage_problems.get(label, 'no value in any step')}"
        if source == "logged_advantages":
            if "trajectories" not in self.seen:
                return "the run has no trajectories"
            logged = self.logged.get(name.parameter)
            return (logged.problem if logged is not None else "") or "the run logged no advantages"
        if source == "learning_rates":
            rate = name.parameter
            return f"the run logs no {rate} with a configured LR to compare" if rate != "*" else \
                "the run logs no learning rate with a configured value to compare"
        if source == "critic_clip":
            return f"the run logs no {m.CRITIC_GRAD_NORM} with a known grad clip"
        if source == "step_metrics":
            if "step_metrics" not in self.seen:
                return "the run logs no training scalars"
            logged = [n.removeprefix("metric:") for n in self.measure_names() if n.startswith("metric:")]
            close = difflib.get_close_matches(name.parameter, logged, n=3, cutoff=0.75)
            return f"the run logs no {name.parameter}" + (f" (it logs {' and '.join(close)})" if close else "")
        return f"no values of {measure}"

    def expand(self, measure: str, upto: int | None = None) -> list[str]:
        """Concrete measure names of a ``*`` measure that the run has (with a value at a step up
        to ``upto``, when given); the name itself otherwise."""
        name = m.parse_measure(measure)
        if not name.wildcard:
            return [measure]
        prefix = f"{name.family.prefix}:"
        return sorted(n for n in self.measure_names() if n.startswith(prefix)
                      and (upto is None or not self.series(n, upto).is_empty()))


# --- reading a run ---------------------------------------------------------------------------

def open_batches(path: Path | str, run_id: str | None = None, needs: Needs | None = None
                 ) -> tuple[RunInfo, Iterator[NewSteps]]:
    """A store's run, a run directory, verl dumps or a metrics file, as batches of steps: a run
    in the step layout a batch at a time (only the tables ``needs`` reads; all without it),
    anything else in one batch."""
    from trajlens.store.layout import is_run_dir

    path = Path(path)
    run_dir, stored = None, False
    if path.exists() and is_run_dir(path):
        run_dir = path
    elif path.is_dir() and (path / "runs").is_dir():
        from trajlens.store.writer import require_recorded_files

        run_dir, stored = _store_run(path, run_id), True
        require_recorded_files(path, run_dir)
    if run_dir is not None:
        tables = needs.tables if needs is not None else frozenset(BATCH_TABLES)
        info, batches = _run_dir_batches(run_dir, run_id, tables, stored)
        if batches is not None:
            return info, batches
    info, batch = open_source(path, run_id)
    return info, iter([batch])


def _run_dir_batches(run_dir: Path, run_id: str | None, tables: frozenset[str], stored: bool
                     ) -> tuple[RunInfo, Iterator[NewSteps] | None]:
    """The run's step metrics as one batch, then its trajectories a batch of steps at a time
    with those steps' tool calls and token arrays (when ``tables`` has them); no batches when
    the run is not in the step layout. A ``stored`` run's files hold the store's schema; a run
    directory's are checked file by file as ingest checks them (:func:`_read_checked_files`)."""
    from trajlens.run.batches import plan_batches
    from trajlens.store.ahead import ReadAhead
    from trajlens.run.partitions import read_files, table_partitions
    from trajlens.store.writer import check_run_dir

    info, trajectory_files = _run_info(run_dir, run_id, stored), table_partitions(run_dir / "trajectories")
    read_rows = read_files if stored else partial(_read_checked_files, run_id=info.run_id)
    others = {name: table_partitions(run_dir / name) for name in ("tool_calls", "tokens") if name in tables}
    if trajectory_files is None or any(partitions is None for partitions in others.values()):
        return info, None

    # every trajectory is read first: the measured split is the whole run's, not the first batch's
    trajectories = read_rows(trajectory_files, "trajectories", trajectory_files.steps())
    if "split" in trajectories.columns and trajectories.height:
        info = replace(info, split=chosen_split(ordered_splits(trajectories.get_column("split").unique().to_list())))

    def batches() -> Iterator[NewSteps]:
        yield NewSteps(step_metrics=run_dir_metrics(run_dir, info.run_id))
        plan = [trajectories.slice(start, stop - start) for start, stop in plan_batches(trajectories)]
        steps = [part["step"].unique(maintain_order=True).to_list() for part in plan]
        tokens = others.get("tokens")
        # each set of columns the checks ask of a batch's tokens is read of the next batch
        # meanwhile (they ask every batch alike)
        read_tokens = partial(_read_tokens, tokens) if stored else \
            _CheckedTokens(tokens, info.run_id, table_partitions(run_dir / "tool_calls"))
        with ReadAhead(read_tokens, steps) as ahead:
            for index, part in enumerate(plan):
                read = {name: read_rows(partitions, name, steps[index])
                        for name, partitions in others.items() if name != "tokens"}
                reader = None if tokens is None else partial(_ask_tokens, ahead, index)
                yield NewSteps(trajectories=part, read_tokens=reader, **read)
        if not stored:  # every file read as ingest reads it; then the whole run, as ingest checks it last
            check_run_dir(run_dir, str(run_dir))

    return info, batches()


def _ask_tokens(ahead: ReadAhead[list[int], tuple[str, ...] | None, pl.DataFrame], index: int,
                columns: Sequence[str] | None) -> pl.DataFrame:
    return ahead.get(index, None if columns is None else tuple(columns))


def _read_tokens(partitions: Any, steps: list[int], columns: Sequence[str] | None) -> pl.DataFrame:
    from trajlens.run.partitions import read_arrow_files

    return pl.from_arrow(read_arrow_files(partitions, "tokens", steps, columns))  # type: ignore[return-value]


class _CheckedTokens:
    """A run directory's token rows of a batch, read with every column and checked
    (:func:`_read_checked_files`) once: each set of columns the checks ask of the batch (its
    logged column, then the arrays they recompute from) is taken from that one read. The last two
    batches are kept (one is checked while the next is read ahead)."""

    def __init__(self, partitions: Any, run_id: str, calls: Any = None) -> None:
        self.partitions = partitions
        self.run_id = run_id
        self.calls = calls
        """The run's tool_calls partitions: each batch's calls must lie within its token arrays."""
        self._read: dict[tuple[int, ...], tuple[threading.Lock, list[pl.DataFrame]]] = {}
        self._lock = threading.Lock()
        """Guards ``_read``; each batch's own lock guards its read, so asking one batch never waits on another's."""

    def __call__(self, steps: list[int], columns: Sequence[str] | None) -> pl.DataFrame:
        key = tuple(steps)
        with self._lock:
            if key not in self._read:
                self._read[key] = (threading.Lock(), [])
                while len(self._read) > 2:
                    del self._read[next(iter(self._read))]
            lock, read = self._read[key]
        with lock:
            if not read:
                read.append(_read_checked_files(self.partitions, "tokens", steps, run_id=self.run_id,
                                                calls=self.calls))
        rows = read[0]
        return rows if columns is None else rows.select(c for c in columns if c in rows.columns)


def _read_checked_files(partitions: Any, table: str, steps: Sequence[int], *, run_id: str,
                        calls: Any = None) -> pl.DataFrame:
    """The rows of ``steps`` of a run directory's ``table``, in step order, each file read through
    :func:`trajlens.ingest.parquet.read_table_file`: a file ingest would refuse (a NaN reward, a
    missing or mistyped column, a row outside its step's folder) stops the check with ingest's one
    line naming the file, record and field. Token rows read with the run's tool_calls partitions
    (``calls``) are checked against the calls of those steps as ingest checks them: a call's
    ``token_end`` past its trajectory's token arrays is the same line
    (:func:`~trajlens.ingest.parquet.within_spans`)."""
    from trajlens.ingest.parquet import read_table_file, within_spans

    paths, packed = partitions.files(steps)
    parts = [read_table_file(Path(path), table, run_id) for path in paths]
    ends = _call_spans(calls, steps) if calls is not None and parts else None
    for path, part in zip(paths, parts) if ends is not None else ():
        within_spans(part, ends, Path(path), None)
    frame = _frame(parts, table)
    if packed:
        frame = frame.filter(pl.col("step").is_in(list(steps))).sort("step", maintain_order=True)
    return frame


def _call_spans(partitions: Any, steps: Sequence[int]) -> pl.DataFrame | None:
    """Each trajectory's call of ``steps`` that ends furthest, with its file
    (:class:`~trajlens.ingest.parquet.SpanEnds`); None when the steps have no call with a span.
    Reads three columns of the steps' tool_calls files."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from trajlens.ingest._unreadable import parquet_errors
    from trajlens.ingest.parquet import SpanEnds, read_table_file

    columns = ["trajectory_id", "call_index", "token_end", "step"]
    paths, packed = partitions.files(steps)
    ends = SpanEnds()
    for path in paths:
        try:
            calls = pq.read_table(path, columns=columns)
        except (*parquet_errors(), KeyError):  # read whole, as ingest reads it: its error names what is wrong
            calls = read_table_file(Path(path), "tool_calls").select(columns)
        if packed:
            calls = calls.filter(pc.is_in(calls.column("step"), value_set=pa.array(list(steps), pa.int64())))
        ends.add(calls, Path(path))
    return ends.frame() if ends else None


def _run_info(run_dir: Path, run_id: str | None, stored: bool = False) -> RunInfo:
    """What the checks know of the run in ``run_dir`` besides its rows. A run directory given
    with ``--run`` must hold that run; a ``stored`` one (a store's, found by its id) does."""
    from trajlens.ingest.parquet import read_table_file, run_id_of
    from trajlens.store.layout import table_files

    recorded = run_id_of(run_dir)
    if run_id is not None and run_id != recorded and not stored:
        raise ConfigError([f"{run_dir}: --run: the directory holds run {recorded!r}, not {run_id!r}"])
    runs = read_table_file(table_files(run_dir, "runs")[0], "runs")
    return RunInfo.of_runs(recorded, str(run_dir), runs, run_dir)


def stored_run_info(store: Path | str, run_id: str) -> RunInfo:
    """What the checks know of a store's run besides its rows (its config and config history)."""
    return _run_info(_store_run(Path(store), run_id), run_id, stored=True)


def open_source(path: Path | str, run_id: str | None = None) -> tuple[RunInfo, NewSteps]:
    """Read a store's run, a run directory, verl dumps or a metrics file, whole."""
    from trajlens.ingest import detect_source
    from trajlens.store.layout import is_run_dir

    path = Path(path)
    if not path.exists():
        raise InputError(str(path), "no such file or directory")
    if is_run_dir(path):
        return _read_run_dir(path, run_id)
    if path.is_dir() and (path / "runs").is_dir():
        return _read_run_dir(_store_run(path, run_id), run_id)
    kind = detect_source(path)
    planned = _verl_plan(path) if kind in ("verl", "mixed") else None
    if planned is not None:
        from trajlens.ingest import load_run

        # the files ingest would read, planned as ingest plans them, its metrics files joined
        run = load_run(path, run_id=run_id, planned=planned)
        batch = NewSteps(*(pl.from_arrow(run.table(name)) for name in BATCH_TABLES))
        return RunInfo.of_runs(run.run_id, str(path), run.runs, path), batch
    from trajlens.ingest.formats import by_name

    metrics_format = by_name(kind) if kind != "mixed" else None
    if metrics_format is not None and metrics_format.kind == "metrics" and metrics_format.load is not None:
        from trajlens.store.writer import slug

        rid = run_id or slug(path.stem)
        table = metrics_format.load([path], run_id=rid).table
        return RunInfo(rid, str(path), _history(None, path.parent)), NewSteps(step_metrics=pl.from_arrow(table))
    if path.is_dir() and any(is_run_dir(child) for child in path.iterdir()):
        from trajlens.store.layout import is_run_dir as run_dir

        names = sorted(p.name for p in path.iterdir() if run_dir(p))
        raise InputError(str(path), f"check one of its runs, e.g. {path / names[0]}", expected="one run",
                         found=f"a folder of {len(names)} runs")
    raise InputError(str(path), expected="a store, a run directory, verl dumps, a metrics JSONL/CSV file or "
                     "TensorBoard event files",
                     found=f"logs of the {kind} format; ingest them first with `trajlens ingest`")


def _verl_plan(path: Path) -> list[Any] | None:
    """Ingest's plan of ``path`` when it holds one run of verl dumps (with metrics files beside
    them, such as a file logger's JSONL: one run, as ingest reads it); None otherwise."""
    from trajlens.ingest.formats import plan

    planned = plan(path)
    logs = [source for source in planned if source.format.kind != "metrics"]
    return planned if len(logs) == 1 and logs[0].format.name == "verl" else None


def _store_run(store: Path, run_id: str | None) -> Path:
    runs = sorted(p.name for p in (store / "runs").iterdir() if p.is_dir())
    if run_id is None:
        if len(runs) != 1:
            raise ConfigError([f"{store}: --run: the store holds {len(runs)} runs ({', '.join(runs) or 'none'}); name one"])
        run_id = runs[0]
    if run_id not in runs:
        raise ConfigError([f"{store}: --run: run {run_id!r} is not in the store (runs: {', '.join(runs) or 'none'})"])
    return store / "runs" / run_id


def _read_run_dir(run_dir: Path, run_id: str | None) -> tuple[RunInfo, NewSteps]:
    info = _run_info(run_dir, run_id)
    read = {name: checked_table(run_dir, name, info.run_id) for name in BATCH_TABLES if name != "step_metrics"}
    return info, NewSteps(**read, step_metrics=run_dir_metrics(run_dir, info.run_id))


def checked_table(run_dir: Path, name: str, run_id: str) -> pl.DataFrame:
    """Table ``name`` of a run directory, each file read as ingest reads it
    (:func:`~trajlens.ingest.parquet.read_table_file`: a file ingest refuses stops the check with
    ingest's line); no rows where it has no file."""
    from trajlens.ingest.parquet import read_table_file
    from trajlens.store.layout import table_files

    return _frame([read_table_file(path, name, run_id) for path in table_files(run_dir, name)], name)


def _frame(parts: list[Any], name: str) -> pl.DataFrame:
    """Files of table ``name`` read as Arrow tables, as one frame; no rows (its columns) without any."""
    import pyarrow as pa

    from trajlens.schema import SCHEMAS

    frame = pl.from_arrow(pa.concat_tables(parts) if parts else SCHEMAS[name].empty_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


VERL_DUMP = re.compile(r"^(\d+)\.jsonl$")
"""A verl rollout dump in a run's folder (``N.jsonl``): the rows of step N, not training scalars."""


def written_file(path: Path) -> bool:
    """Whether ``path`` is named as a finished file: not hidden, not ``_``-prefixed (``_SUCCESS``)
    and not a ``.tmp`` still being written (then renamed)."""
    return not path.name.startswith((".", "_")) and not path.name.endswith(".tmp")


def metrics_jsonl_files(directory: Path) -> list[Path]:
    """The metrics JSONL files beside a run's tables: every ``*.jsonl`` but verl dumps."""
    return sorted(p for p in directory.glob("*.jsonl") if not VERL_DUMP.match(p.name) and written_file(p))


def run_dir_metrics(run_dir: Path, run_id: str) -> pl.DataFrame:
    """A run directory's training scalars: its ``step_metrics`` Parquet files or, when it has none,
    the metrics JSONL files beside its tables (:func:`metrics_jsonl_files`), which ``check --watch``
    follows there; no rows when it has neither."""
    from trajlens.ingest.metrics import load_metric_files
    from trajlens.store.layout import table_files

    if not table_files(run_dir, "step_metrics") and (files := metrics_jsonl_files(run_dir)):
        return pl.from_arrow(load_metric_files(files, run_id=run_id).table)
    return checked_table(run_dir, "step_metrics", run_id)


def _history(config_text: str | None, directory: Path) -> m.ConfigHistory:
    from trajlens.ingest.config_history import read_history

    current = m.parse_config(config_text)
    entries = tuple(read_history(directory)) if directory.is_dir() else ()
    if not current and entries:
        current = entries[-1][1]
    return m.ConfigHistory(current, entries)


def _first_steps(count: int) -> str:
    """The training steps identification read, as the subject of a sentence: ``its first 16
    training steps have`` (at most :data:`~trajlens.run.identify.IDENTIFY_STEPS`), ``its first
    training step has``."""
    return "its first training step has" if count == 1 else f"its first {count} training steps have"


__all__ = ["Needs", "Precomputed", "RunInfo", "RunState", "NewSteps", "open_batches", "open_source", "stored_run_info"]

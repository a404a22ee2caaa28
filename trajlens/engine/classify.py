"""Classify a stored run and save its analysis tables, step by step on an engine: the one
implementation behind ``trajlens classify``, the report and comparisons.

Each step's tool calls are classified and its trajectories measured where the engine runs it
(:class:`ClassifyStep`); the calls stream into ``call_classes``, the per-trajectory measures
are stacked into ``trajectory_measures``, and ``unknown_tools`` is counted from the unmapped
calls of every step. The rows are those of classifying the whole run at once: a call's class
depends on that call (and its trajectory's earlier calls) only, and a trajectory lies within
one step. :func:`classify_run_on` runs on any engine; :func:`classify_run` on this process's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import polars as pl

from trajlens.classify.calls import CALL_CLASS_COLUMNS, UNMAPPED, classify_calls
from trajlens.classify.explanation import explanation_lines
from trajlens.classify.per_trajectory import RULES_COLUMN, current_measures, stored_rules, trajectory_measures
from trajlens.classify.rules import RULES_VERSION
from trajlens.classify.tool_map import ToolMapLike
from trajlens.classify.unknown import unknown_tools
from trajlens.engine.base import Engine, StepResult, StepTables
from trajlens.run.location import StoreLocation
from trajlens.run.measures import saved_measures
from trajlens.run.reader import RunReader
from trajlens.engine.writing import StepStream, save_table
from trajlens.schema import SCHEMAS
from trajlens.store.database import CLASS_ANALYSES


class EngineClasses(NamedTuple):
    """What :func:`classify_run_on` computed for one run."""

    run_id: str
    explanation: pl.Series | None
    """What ``--explain`` prints, a line per call (:func:`~trajlens.classify.explanation.explanation_lines`),
    when asked for; the calls themselves stream to the store."""
    measures: pl.DataFrame
    unknown: pl.DataFrame
    dropped: tuple[str, ...] = ()
    """The run's analyses dropped because its classes changed (:data:`~trajlens.store.database.CLASS_ANALYSES`)."""


@dataclass(frozen=True)
class ClassifyStep:
    """The step function: classify one step's calls and measure its trajectories."""

    tool_map: ToolMapLike
    explain: bool = False

    def __call__(self, location: StoreLocation, run_id: str, step: int) -> StepTables:
        return self.classified(_read(location, run_id, "tool_calls", step), _read(location, run_id, "trajectories", step))

    def steps(self, location: StoreLocation, run_id: str, steps: list[int]) -> StepTables:
        """Several steps at once (their rows read together): a call's class depends on its trajectory only."""
        reader = RunReader(location, run_id)
        tables = self.classified(*(_typed(reader.read_steps(table, steps), table) for table in ("tool_calls", "trajectories")))
        # the measures of each step in turn, as a step at a time gives them
        tables["trajectory_measures"] = tables["trajectory_measures"].sort_by("step")
        return tables

    def classified(self, tool_calls: pl.DataFrame, trajectories: pl.DataFrame) -> StepTables:
        """The step's tables from its tool calls and trajectories."""
        calls = classify_calls(tool_calls, self.tool_map, explain=True)
        measures = trajectory_measures(calls, trajectories)
        unmapped = calls.filter(pl.col("decided_by") == UNMAPPED).select(SCHEMAS["tool_calls"].names)
        tables = {"call_classes": calls.select(CALL_CLASS_COLUMNS).to_arrow(),
                  "trajectory_measures": measures.to_arrow(), "unmapped_calls": unmapped.to_arrow()}
        if self.explain:
            tables["explanation"] = explanation_lines(calls).to_frame().to_arrow()
        return tables


def _typed(rows: pl.DataFrame | None, table: str) -> pl.DataFrame:
    return rows if rows is not None else pl.DataFrame(SCHEMAS[table].empty_table())


def _read(location: StoreLocation, run_id: str, table: str, step: int) -> pl.DataFrame:
    """One step of a stored table as the store reads it (its schema, also when the step has no partition)."""
    schema = SCHEMAS[table]
    part = location.read_step(run_id, table, step)
    return pl.DataFrame(part if part is not None else schema.empty_table())


def classify_run_on(engine: Engine, location: StoreLocation, run_id: str, tool_map: ToolMapLike = None, *,
                    store: Any = None, explain: bool = False,
                    progress: Callable[[str], None] | None = None) -> EngineClasses:
    """Classify ``run_id`` step by step on ``engine`` and save ``call_classes``,
    ``trajectory_measures`` and ``unknown_tools``.

    ``store`` is the open :class:`~trajlens.store.Store` when the store is on this machine
    (the tables are then published through it); None writes through ``location``.
    """
    earlier = saved_measures(store, run_id) if store is not None else None
    steps = location.steps(run_id, "trajectories")
    function = ClassifyStep(tool_map, explain)
    results = engine.map_steps(function, location, run_id, steps)
    if not steps:  # a run of training scalars only: its tables are empty, with their columns
        empty = function.classified(*(pl.DataFrame(SCHEMAS[name].empty_table()) for name in ("tool_calls", "trajectories")))
        results = iter([StepResult(0, empty)])
    stream = StepStream(results, "call_classes", progress)
    save_table(store, location, "call_classes", run_id, stream)
    measures = stream.frame("trajectory_measures")
    unmapped = stream.frame("unmapped_calls")
    if not unmapped.width:
        unmapped = pl.DataFrame(SCHEMAS["tool_calls"].empty_table())
    unknown = unknown_tools(unmapped, tool_map)
    # saved with the rules they were classified under, so a report on them says which
    save_table(store, location, "trajectory_measures", run_id, measures.with_columns(pl.lit(RULES_VERSION).alias(RULES_COLUMN)))
    save_table(store, location, "unknown_tools", run_id, unknown)
    dropped: list[str] = []
    if earlier is not None and not earlier.equals(current_measures(measures)):
        dropped = store.drop_derived(CLASS_ANALYSES, run_id)
    explanation = None
    if explain:
        explained = stream.frame("explanation")
        explanation = explained.get_column("line") if explained.width else pl.Series("line", [], dtype=pl.String)
    return EngineClasses(run_id, explanation, measures, unknown, tuple(dropped))


def classify_run(store: Any, run_id: str, tool_map: ToolMapLike = None, *, explain: bool = False) -> EngineClasses:
    """Classify one run of an open store in this process (the local engine) and save
    ``call_classes``, ``trajectory_measures`` and ``unknown_tools``, as ``trajlens classify`` does."""
    from trajlens.engine.local import LocalEngine

    return classify_run_on(LocalEngine(), StoreLocation.of(store.path), run_id, tool_map, store=store, explain=explain)


def run_measures(store: Any, run_id: str) -> pl.DataFrame:
    """The run's trajectory measures: those saved (:func:`saved_measures`), else classified and
    saved now (:func:`classify_run`, as ``trajlens classify`` does)."""
    measures = saved_measures(store, run_id)
    return classify_run(store, run_id).measures if measures is None else measures


def measures_rules(store: Any, run_id: str) -> str:
    """The classification rules behind :func:`run_measures`' answer, asked after it: those the
    saved measures were classified under (:func:`~trajlens.classify.per_trajectory.stored_rules`),
    else, for a run classified now, this trajlens's."""
    return stored_rules(store, [run_id]).get(run_id, RULES_VERSION)


__all__ = ["ClassifyStep", "EngineClasses", "classify_run", "classify_run_on", "measures_rules", "run_measures"]

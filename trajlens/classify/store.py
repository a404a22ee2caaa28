"""Classify the runs of a store and save the analysis tables: :func:`classify_run`."""

from __future__ import annotations

from typing import Any, NamedTuple

import polars as pl

from trajlens.classify.calls import ADDED_COLUMNS, classify_calls
from trajlens.classify.measures import trajectory_measures
from trajlens.classify.tool_map import ToolMapLike
from trajlens.classify.unknown import unknown_tools

CALL_CLASS_COLUMNS: tuple[str, ...] = ("run_id", "step", "trajectory_id", "call_index", "tool_name", *ADDED_COLUMNS)
"""Columns of the saved ``call_classes`` table."""


class RunClasses(NamedTuple):
    """What :func:`classify_run` computed for one run."""

    run_id: str
    calls: pl.DataFrame
    """The run's tool calls with their classes (and the explain columns when asked)."""
    measures: pl.DataFrame
    """Per-trajectory measures (:func:`trajlens.classify.trajectory_measures`)."""
    unknown: pl.DataFrame
    """Tools no tool-map entry matched (:func:`trajlens.classify.unknown_tools`)."""


def classify_run(store: Any, run_id: str, tool_map: ToolMapLike = None, *, explain: bool = False) -> RunClasses:
    """Classify the tool calls of one run and save the store tables ``call_classes``,
    ``trajectory_measures`` and ``unknown_tools``."""
    calls = classify_calls(store.tool_calls.filter(pl.col("run_id") == run_id), tool_map, explain=True)
    trajectories = store.trajectories.filter(pl.col("run_id") == run_id).collect()
    measures = trajectory_measures(calls, trajectories)
    unknown = unknown_tools(calls, tool_map)
    store.write_derived("call_classes", run_id, calls.select(CALL_CLASS_COLUMNS))
    store.write_derived("trajectory_measures", run_id, measures)
    store.write_derived("unknown_tools", run_id, unknown)
    return RunClasses(run_id, calls if explain else calls.drop("tool_entry", "decided_by", "rule_source"), measures,
                      unknown)

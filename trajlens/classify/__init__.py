"""Behaviour classes of tool calls, and the measures built on them.

Tool calls become behaviour (:func:`classify_calls`), trajectories become numbers
(:func:`trajectory_measures`), and training stages become a sampled report with intervals
beside the full population (:func:`stage_report`)::

    from trajlens.classify import classify_calls, trajectory_measures, stage_report
    calls = classify_calls(store.tool_calls)
    measures = trajectory_measures(calls, store.trajectories)
    report = stage_report(store, run_id="sao-r6", n=80)
    print(report.to_markdown())

The taxonomy and its shell rules are data in :mod:`trajlens.classify.rules` (versioned by
:data:`RULES_VERSION`); tools that are not shell commands are mapped to classes by TOML tool
maps (:mod:`trajlens.classify.tool_map`; ``classify_calls(calls, tool_map="my_tools.toml")``),
and :func:`unknown_tools` lists the tools no map knows. :func:`classify_command_slow` is the
per-row reference the vectorised classifier is checked against.
"""

from __future__ import annotations

from trajlens.classify.calls import classify_calls
from trajlens.classify.unknown import unknown_tools
from trajlens.classify.per_trajectory import trajectory_measures
from trajlens.classify.reference import classify_command_slow, explain_call_slow
from trajlens.classify.rules import (
    BEHAVIOUR_CLASSES,
    RULES_VERSION,
    SHELL_RULES,
    TEST_RUNNER_CLASSES,
    VERIFICATION_CLASSES,
    Rule,
)
from trajlens.classify.stages import StageReport, assign_stages, stage_report
from trajlens.classify.tool_map import ToolEntry, ToolMap, default_tool_map, load_tool_map, only

__all__ = [
    "RULES_VERSION",
    "BEHAVIOUR_CLASSES",
    "VERIFICATION_CLASSES",
    "TEST_RUNNER_CLASSES",
    "SHELL_RULES",
    "Rule",
    "classify_calls",
    "classify_command_slow",
    "explain_call_slow",
    "unknown_tools",
    "ToolMap",
    "ToolEntry",
    "load_tool_map",
    "default_tool_map",
    "only",
    "trajectory_measures",
    "assign_stages",
    "stage_report",
    "StageReport",
]

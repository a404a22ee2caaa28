"""Tools no tool map knows: :func:`unknown_tools`, so a user sees what to map."""

from __future__ import annotations

from typing import Any

import polars as pl

from trajlens.classify.calls import UNMAPPED, classify_calls
from trajlens.classify.tool_map import ToolMapLike
from trajlens.frames import as_frame


def unknown_tools(tool_calls: Any, tool_map: ToolMapLike = None) -> pl.DataFrame:
    """The tools of ``tool_calls`` that no tool-map entry matched and that carry no shell
    command (so every call of theirs is ``other``), most-called first.

    One row per tool name (per run when ``tool_calls`` has ``run_id``): ``calls``,
    ``trajectories`` (distinct ``trajectory_id``, null without that column) and
    ``example_arguments`` (the arguments of its first call). Rejected calls
    (``format_error``) are not counted. Map a listed tool in a TOML tool map (see
    :mod:`trajlens.classify.tool_map`) and pass it as ``tool_map``.
    """
    frame = as_frame(tool_calls, "tool_calls")
    classified = classify_calls(frame, tool_map, explain=True)
    unknown = classified.filter(pl.col("decided_by") == UNMAPPED)
    keys = ["run_id", "tool_name"] if "run_id" in frame.columns else ["tool_name"]
    trajectories = (
        pl.col("trajectory_id").n_unique() if "trajectory_id" in frame.columns else pl.lit(None, dtype=pl.UInt32)
    )
    return (
        unknown.group_by(keys, maintain_order=True)
        .agg(
            pl.len().cast(pl.Int64).alias("calls"),
            trajectories.cast(pl.Int64).alias("trajectories"),
            pl.col("arguments").cast(pl.String).first().alias("example_arguments"),
        )
        .sort(["calls", *keys], descending=[True, *([False] * len(keys))])
    )

"""Run directories of trajectories that log an advantage each, for the tests of identification."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path


def write_logged_run(directory: Path, run_id: str, rows: Iterable[dict], logged: Mapping[str, float | None],
                     config: dict) -> Path:
    """Write ``rows`` (``step``, ``trajectory_id``, ``group_id``, ``reward``) as a run directory,
    each trajectory logging ``logged[trajectory_id]`` and calling one tool: ``think`` when its
    reward is 3 or more, else ``bash``."""
    from trajlens.rows import RunBuilder
    from trajlens.store.layout import RunDirWriter

    builder = RunBuilder(run_id, config=config, source_format="test", source="test")
    for row in rows:
        thinks = (row["reward"] or 0) >= 3
        builder.add_trajectory(
            {"step": row["step"], "trajectory_id": row["trajectory_id"], "group_id": row["group_id"], "task_id": "t",
             "reward": row["reward"], "logged_advantage": logged[row["trajectory_id"]], "model_tokens": 8},
            [{"turn": 0, "tool_name": "think" if thinks else "bash",
              "arguments": '{"thought": "x"}' if thinks else '{"command": "ls"}'}],
            where=row["trajectory_id"])
    run = builder.build()
    with RunDirWriter(directory, run.runs) as writer:
        writer.write_run(run)
    return directory

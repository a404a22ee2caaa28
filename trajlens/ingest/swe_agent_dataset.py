"""Rows of the nebius/SWE-agent-trajectories dataset (Parquet as the hub serves it, JSONL, or a JSON array).

The dataset card (huggingface.co/datasets/nebius/SWE-agent-trajectories, ``dataset_info``)
declares one row per agent run::

    instance_id: string, model_name: string, target: bool,
    trajectory: list<struct<cutoff_date: string, mask: bool, role: string,
                            system_prompt: string, text: string>>,
    exit_status: string, generated_patch: string, eval_logs: string

``trajectory`` is the SWE-agent chat: ``system``, ``user`` (the task, then each observation)
and ``ai`` messages (``assistant`` is read the same way). An ``ai`` message holds the
agent's discussion and its action in a fenced block; SWE-agent's ``ThoughtActionParser``
executes the *last* fenced block, and so does this reader. An ``ai`` message without one is a
tool call with ``format_error = true`` (the harness rejected it).

Mapping: each row is a trajectory ``"<instance_id>/<model_name>/<row>"`` (row counted from 0
in its file); ``task_id`` and
``group_id`` are the instance id (the runs of several models on one task form a group);
``resolved`` is ``target`` and ``reward`` is 1.0 or 0.0 from it; ``exit_status`` as logged.
Tool calls are named as SWE-agent names them (:func:`trajlens.ingest.agents.swe_agent.tool_name`:
``open``, ``edit``, ``find_file`` ... or ``bash``), with the whole action as ``command`` and the
next ``user`` message as observation.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from trajlens.ingest._fields import Fields, dumps
from trajlens.ingest._probe import Probe, files_of
from trajlens.ingest._records import readable_records
from trajlens.rows import TOOL_CALL, TRAJECTORY, RunBuilder, RunData

FORMAT = "swe-agent-dataset"
COLUMNS: frozenset[str] = frozenset({"instance_id", "model_name", "target", "trajectory"})
MODEL_ROLES: frozenset[str] = frozenset({"ai", "assistant"})
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


def detect(target: Probe | Path | str) -> bool:
    """Records with the dataset's columns, in any container (Parquet, JSONL, a JSON array)."""
    return COLUMNS <= Probe.of(target).record_keys


def load_swe_agent_dataset(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None,
                           strict: bool = True) -> RunData:
    """Load dataset rows (Parquet or JSONL files) as one run."""
    from trajlens.store.writer import joined_source, slug


    files = files_of(paths, detect, strict=strict)
    name = Path(paths).stem if isinstance(paths, (str, Path)) else files[0].stem
    builder = RunBuilder(run_id or slug(name), source_format=FORMAT, source=joined_source(files))
    for file in files:
        prefix = "" if len(files) == 1 else f"{file.stem}:"
        for index, (number, row) in enumerate(readable_records(file)):
            where = f"{file}: record {number}"
            builder.add_record(row, lambda row: [_trajectory(row, Fields(file, number), index, prefix)],
                               where=where, strict=strict)
    return builder.build()


def _trajectory(row: Any, read: Fields, index: int, prefix: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from trajlens.ingest.agents.swe_agent import tool_name

    if not isinstance(row, dict):
        raise read.error(None, "a dataset row (an object)", type(row).__name__)
    instance = read.text(row, "instance_id", required=True)
    model = read.text(row, "model_name") or "model"
    resolved = read.boolean(row, "target")
    messages = read.items(row, "trajectory", required=True)
    calls: list[dict[str, Any]] = []
    turn = -1
    for position, message in enumerate(messages):
        at = read.at(f"{read.record}, message {position}")
        role = at.text(message, "role", required=True)
        text = at.text(message, "text") or ""
        if role not in MODEL_ROLES:
            continue
        turn += 1
        blocks = _FENCE.findall(text)
        following = messages[position + 1] if position + 1 < len(messages) else None
        observation = None
        if isinstance(following, dict) and following.get("role") not in MODEL_ROLES:
            observation = read.at(f"{read.record}, message {position + 1}").text(following, "text")
        if not blocks or not blocks[-1].strip():
            calls.append(TOOL_CALL(turn=turn, tool_name="bash", format_error=True, observation=observation))
            continue
        action = blocks[-1].strip()
        calls.append(TOOL_CALL(turn=turn, tool_name=tool_name(action), arguments=dumps({"action": action}),
                               command=action, observation=observation))
    trajectory = TRAJECTORY(
        trajectory_id=f"{prefix}{instance}/{model}/{index}",
        task_id=instance,
        group_id=instance,
        reward=None if resolved is None else float(resolved),
        resolved=resolved,
        exit_status=read.text(row, "exit_status"),
        num_turns=turn + 1,
    )
    return trajectory, calls


__all__ = ["FORMAT", "detect", "load_swe_agent_dataset"]

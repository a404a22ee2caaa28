"""Rows of the nebius/SWE-agent-trajectories dataset (Parquet as the hub serves it, or JSONL).

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
from typing import Any, Iterator, Sequence

from trajlens.errors import InputError
from trajlens.ingest._fields import Fields, dumps, parse_json, read_lines
from trajlens.ingest._probe import Probe, files_of
from trajlens.rows import TOOL_CALL, TRAJECTORY, RunBuilder, RunData

FORMAT = "swe-agent-dataset"
COLUMNS: frozenset[str] = frozenset({"instance_id", "model_name", "target", "trajectory"})
MODEL_ROLES: frozenset[str] = frozenset({"ai", "assistant"})
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_JSONL_HEAD = re.compile(r'\s*\{\s*"instance_id"\s*:')


def detect(target: Probe | Path | str) -> bool:
    """A Parquet file with the dataset's columns, or a JSONL file whose rows start with them."""
    probe = Probe.of(target)
    if not probe.is_file:
        return False
    if probe.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            names = set(pq.read_schema(probe.path).names)
        except (pa.ArrowInvalid, OSError):
            return False
        return COLUMNS <= names
    if probe.suffix == ".jsonl":
        head = probe.first_line()
        return bool(_JSONL_HEAD.match(head)) and '"trajectory"' in head and '"model_name"' in head
    return False


def load_swe_agent_dataset(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None,
                           strict: bool = True) -> RunData:
    """Load dataset rows (Parquet or JSONL files) as one run."""
    from trajlens.store.writer import slug


    files = files_of(paths, detect)
    name = Path(paths).stem if isinstance(paths, (str, Path)) else files[0].stem
    builder = RunBuilder(run_id or slug(name), source_format=FORMAT, source=", ".join(map(str, files)))
    for file in files:
        prefix = "" if len(files) == 1 else f"{file.stem}:"
        for index, (number, row) in enumerate(_rows(file)):
            where = f"{file}: record {number}"
            try:
                if isinstance(row, InputError):
                    raise row
                trajectory, calls = _trajectory(row, Fields(file, number), index, prefix)
                builder.add_trajectory(trajectory, calls, where=where)
            except InputError as error:
                if strict:
                    raise
                builder.skip(error)
    return builder.build()


def _rows(file: Path) -> Iterator[tuple[int, Any]]:
    if file.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        from trajlens.ingest.parquet import check_text

        try:
            parquet = pq.ParquetFile(file)
        except (pa.ArrowInvalid, OSError) as error:
            raise InputError(str(file), "not a readable Parquet file", expected="Parquet",
                             found=str(error).splitlines()[0]) from None
        number = 0
        for batch in parquet.iter_batches(batch_size=256):  # a shard is ~90 MB: read it in pieces
            table = pa.Table.from_batches([batch])
            check_text(table, file)
            for row in table.to_pylist():
                yield number, row
                number += 1
        return
    for number, line in read_lines(file):
        if isinstance(line, InputError):
            yield number, line
            continue
        try:
            yield number, parse_json(line, str(file), record=number)
        except InputError as error:
            yield number, error


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

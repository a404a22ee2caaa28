"""OpenPipe ART trajectory groups, as ``model.log`` writes them.

Read as openpipe-art 0.5.18 writes them (``art/model.py`` ``Model.log``: one file per step,
``<model output dir>/trajectories/<split>/<step:04d>.parquet``, written by
``write_trajectory_groups_parquet`` in ``art/utils/trajectory_logging.py``). A row is one
``Trajectory`` of a ``TrajectoryGroup`` (``art/trajectories.py``): ``group_index``,
``group_metadata`` and ``group_metrics`` (JSON text), ``reward``, ``metrics`` and ``metadata``
(JSON text), ``tools``, ``logs`` and ``messages``: ``role``, ``content``, ``tool_calls`` (the
OpenAI tool calls as JSON text), ``tool_call_id`` and ``trainable`` (the model's own choices).

Mapping: a row is a trajectory ``<split>/<step>/<group_index>/<k>`` (``k`` counting the group's
rows), at the step its file is named by, split ``val`` for the ``val`` folder; its group is
``<split>/<step>/<group_index>``, which is also the task id unless the group's metadata names
one (``task_id``, ``id``, ``scenario_id``). ``reward`` as logged; every numeric or boolean entry
of ``metrics`` is a reward channel. The messages give the calls (assistant ``tool_calls``
answered by ``tool`` messages), the model's text per turn and its final answer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from trajlens.ingest._chat import chat_record
from trajlens.ingest._fields import INT64, Fields, parse_json, type_name
from trajlens.ingest._probe import Probe, files_of
from trajlens.ingest._records import readable_records
from trajlens.rows import RunBuilder, RunData

FORMAT = "art"
KEYS: frozenset[str] = frozenset({"group_index", "reward", "messages"})
"""Columns of ART's trajectory Parquet files."""
TASK_KEYS: tuple[str, ...] = ("task_id", "id", "scenario_id")
_STEP = re.compile(r"^\d+$")


def detect(target: Probe | Path | str) -> bool:
    """Rows of trajectory groups, in any container."""
    return KEYS <= Probe.of(target).record_keys


def load_art(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None,
             strict: bool = True) -> RunData:
    """Load ART trajectory files (a model's ``trajectories`` folder, or files) as one run."""
    from trajlens.store.writer import joined_source, slug

    files = files_of(paths, detect, strict=strict)
    given = Path(paths) if isinstance(paths, (str, Path)) else files[0]
    name = given.parent.name if given.name == "trajectories" else given.name
    builder = RunBuilder(run_id or slug(Path(name).stem), source_format=FORMAT, source=joined_source(files))
    for file in files:
        step = int(file.stem) if _STEP.match(file.stem) else 0
        split = "val" if file.parent.name == "val" else "train"
        counts: dict[int, int] = {}
        for number, row in readable_records(file):
            where = f"{file}: record {number}"
            builder.add_record(row, lambda row: trajectory_row(row, file, where, split, step, counts).trajectories(),
                               where=where, strict=strict)
    return builder.build()


def trajectory_row(row: Any, file: Path, where: str, split: str, step: int, counts: dict[int, int]):
    """One ART trajectory row as a record; ``counts`` numbers the rows of each group."""
    read = Fields(where)
    if not isinstance(row, dict):
        raise read.error(None, "a trajectory row (an object)", type_name(row))
    group = read.integer(row, "group_index", required=True, bounds=(0, INT64[1]))
    assert group is not None  # required
    index = counts.get(group, 0)
    counts[group] = index + 1
    group_id = f"{split}/{step}/{group}"
    metadata = _json_object(row, "group_metadata", read)
    task = next((str(metadata[k]) for k in TASK_KEYS if isinstance(metadata.get(k), (str, int))), group_id)
    metrics = _json_object(row, "metrics", read)
    channels = [{"name": k, "value": float(v) if isinstance(v, bool) else read.number(metrics, k, name=f"metrics.{k}")}
                for k, v in metrics.items() if isinstance(v, (int, float))]
    messages = read.items(row, "messages", required=True) or []
    converted = []
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            raise read.error(f"messages[{position}]", "a message (an object)", type_name(message))
        message = {k: v for k, v in message.items() if v is not None and k != "trainable"}
        if isinstance(message.get("tool_calls"), str):
            message["tool_calls"] = parse_json(message["tool_calls"], where, record=f"message {position}")
        converted.append(message)
    return chat_record(converted, file=file, where=where, trajectory_id=f"{group_id}/{index}", step=step,
                       split=split, task_id=task, group_id=group_id, reward=read.reward(row, "reward"),
                       reward_channels=channels, source=f"{file}:{where.rsplit(' ', 1)[-1]}")


def _json_object(row: dict[str, Any], key: str, read: Fields) -> dict[str, Any]:
    text = read.text(row, key)
    if not text:
        return {}
    value = parse_json(text, read.file, record=read.record)
    if not isinstance(value, dict):
        raise read.error(key, "a JSON object", type_name(value))
    return value


__all__ = ["FORMAT", "KEYS", "detect", "load_art", "trajectory_row"]

"""``verifiers`` rollout records: the ``results.jsonl`` of a ``vf-eval`` results folder.

Read as verifiers 0.3.1 writes them (``verifiers/legacy/utils/save_utils.py``:
``state_to_output`` makes one ``RolloutOutput`` per rollout, ``save_outputs`` appends it as a
line of ``<results folder>/results.jsonl``, ``save_metadata`` writes ``metadata.json`` beside
it; the same rows as earlier 0.1/0.2 releases, which flattened reward functions to top-level
columns the same way). A row (``verifiers/legacy/types.py`` ``RolloutOutput``) holds
``example_id``, ``prompt`` and ``completion`` (chat messages, or text for a completion
environment), ``reward``, ``metrics`` (each reward function's score, also flattened to
top-level keys), ``is_completed``, ``is_truncated``, ``stop_condition``, ``error``,
``token_usage`` and ``info``. The rows load from JSONL, a JSON array or Parquet alike (a
results dataset pushed to the hub).

Mapping: a row is a trajectory ``<example_id>/<k>``, ``k`` counting the rollouts of that
example in file order (prefixed ``<folder>:`` when several results files load as one run);
``task_id`` and ``group_id`` are the example id, so the ``rollouts_per_example`` of an example
form a group. ``reward`` as logged; every ``metrics`` entry (or, in rows without ``metrics``,
every numeric top-level column that is not a known field) is a reward channel.
``exit_status`` is ``error`` for a row with an error, else ``stop_condition``, else
``truncated`` where ``is_truncated``. The completion's messages give the calls: assistant
``tool_calls`` (OpenAI objects serialised as JSON strings by ``sanitize_tool_calls``, or
verifiers' flat ``{id, name, arguments}``) with the ``tool`` messages answering them; the
model's text per turn (``reasoning_content`` before ``content``) and its final answer (a
completion given as text is the answer). ``model_tokens`` is ``token_usage.output_tokens``.
``metadata.json`` beside the rows (``GenerateMetadata``: ``env_id``, ``model``,
``sampling_args``, ``rollouts_per_example``, ``avg_reward`` ...) is the run's config and its
name the environment id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from trajlens.errors import InputError
from trajlens.ingest._chat import chat_record
from trajlens.ingest._fields import Fields, read_json_file, type_name
from trajlens.ingest._probe import Probe, files_of
from trajlens.ingest._records import readable_records
from trajlens.ingest.agents._common import Record
from trajlens.rows import TRAJECTORY, RunBuilder, RunData

FORMAT = "verifiers"
KEYS: frozenset[str] = frozenset({"example_id", "prompt", "completion", "reward"})
"""Keys every rollout row carries."""
METADATA = "metadata.json"
KNOWN_FIELDS: frozenset[str] = frozenset({
    "example_id", "id", "prompt", "completion", "answer", "info", "task", "reward", "error", "timing",
    "is_completed", "is_truncated", "stop_condition", "metrics", "tool_defs", "token_usage", "trajectory",
    "error_chain", "long_error_chain",
})
"""Fields of ``RolloutOutput`` that are not reward functions' scores."""


def detect(target: Probe | Path | str) -> bool:
    """Rows of rollout outputs, in any container."""
    return KEYS <= Probe.of(target).record_keys


def load_verifiers(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None,
                   strict: bool = True) -> RunData:
    """Load verifiers results (``results.jsonl`` files, or folders of them) as one run."""
    from trajlens.store.writer import joined_source, slug

    files = files_of(paths, detect, strict=strict)
    metadata = _metadata(files[0])
    given = Path(paths) if isinstance(paths, (str, Path)) else files[0]
    name = given.parent.name if given.is_file() and given.stem == "results" else given.stem
    builder = RunBuilder(run_id or slug(name), name=str(metadata.get("env_id") or name), config=metadata,
                         source_format=FORMAT, source=joined_source(files))
    for file in files:
        prefix = "" if len(files) == 1 else f"{file.parent.name}:"
        seen: dict[str, int] = {}
        for number, row in readable_records(file):
            where = f"{file}: record {number}"
            builder.add_record(row, lambda row: rollout_record(row, file, where, prefix, seen).trajectories(),
                               where=where, strict=strict)
    return builder.build()


def _metadata(file: Path) -> dict[str, Any]:
    path = file.parent / METADATA
    if not path.is_file():
        return {}
    data = read_json_file(path)
    if not isinstance(data, dict):
        raise InputError(str(path), expected="the run's metadata (a JSON object)", found=type_name(data))
    return data


def rollout_record(row: Any, file: Path, where: str, prefix: str, seen: dict[str, int]) -> Record:
    """One ``RolloutOutput`` row as a trajectory; ``seen`` counts the rollouts of each example."""
    read = Fields(where)
    if not isinstance(row, dict):
        raise read.error(None, "a rollout row (an object)", type_name(row))
    example = str(read.identifier(row, "example_id", required=True))
    index = seen.get(example, 0)
    seen[example] = index + 1
    completion = row.get("completion")
    usage = read.mapping(row, "token_usage")
    output_tokens = read.number(usage, "output_tokens", name="token_usage.output_tokens") if usage else None
    fields: dict[str, Any] = dict(
        task_id=example, group_id=example, reward=read.reward(row, "reward"), reward_channels=_channels(row, read),
        exit_status=_exit_status(row, read), model_tokens=None if output_tokens is None else int(output_tokens),
        source=f"{file}:{where.rsplit(' ', 1)[-1]}",
    )
    trajectory_id = f"{prefix}{example}/{index}"
    if isinstance(completion, str) or completion is None:
        return Record(TRAJECTORY(trajectory_id=trajectory_id, num_turns=0 if completion is None else 1,
                                 response_text=completion or None, **fields), [], where=where)
    return chat_record(completion, file=file, where=where, trajectory_id=trajectory_id, **fields)


def _channels(row: dict[str, Any], read: Fields) -> list[dict[str, Any]]:
    metrics = read.mapping(row, "metrics")
    if metrics is None:
        metrics = {k: v for k, v in row.items() if k not in KNOWN_FIELDS and isinstance(v, (int, float))
                   and not isinstance(v, bool)}
    channels = []
    for name, value in metrics.items():
        number = read.number(metrics, name, name=f"metrics.{name}")
        if number is not None:
            channels.append({"name": name, "value": number})
    return channels


def _exit_status(row: dict[str, Any], read: Fields) -> str | None:
    if row.get("error"):
        return "error"
    stop = read.text(row, "stop_condition")
    if stop:
        return stop
    return "truncated" if read.boolean(row, "is_truncated") else None


__all__ = ["FORMAT", "KEYS", "detect", "load_verifiers", "rollout_record"]

"""Atropos scored groups: one ``ScoredDataGroup`` per JSONL line.

An Atropos environment hands the trainer tokenised, scored groups
(``atroposlib/envs/base.py``, NousResearch/atropos, read at main of late 2025), and writes them
one per line when ``data_path_to_save_groups`` is set::

    {"tokens": [[...], ...], "masks": [[...], ...], "scores": [...],
     "advantages": [[...], ...] | null, "ref_logprobs": ..., "messages": [[...], ...] | null,
     "inference_logprobs": [[...], ...] | null, "group_overrides": ..., "overrides": ..., ...}

Lists are per group member. ``masks[i][t]`` is ``-100`` for a token the trainer does not
train on (prompt, tool output) and the token id otherwise.

Mapping: each line is a group (``group_id`` and ``task_id`` ``"line<N>"``; no training step is
in the file, so ``step`` is 0), each member a trajectory ``"<N>-<i>"`` with ``reward`` =
``scores[i]``, and a token row: ``response_mask`` = ``masks[i][t] != -100``,
``logged_advantages`` = ``advantages[i]`` and ``log_probs`` = ``inference_logprobs[i]`` where
logged. ``model_tokens`` counts the trained tokens. ``messages[i]``, OpenAI-style, give the
turns and tool calls (as :mod:`trajlens.ingest.agents.openai_chat` reads them).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from trajlens.errors import InputError
from trajlens.ingest._fields import INT64, Fields, parse_json, read_lines
from trajlens.ingest._probe import Probe, files_of
from trajlens.rows import TRAJECTORY, RunBuilder, RunData

FORMAT = "atropos"
UNTRAINED = -100
_HEAD = re.compile(r'\s*\{\s*"tokens"\s*:\s*\[\s*\[')


def detect(target: Probe | Path | str) -> bool:
    """A ``.jsonl`` file whose first record starts with a ``tokens`` list of lists."""
    probe = Probe.of(target)
    return probe.suffix == ".jsonl" and probe.is_file and bool(_HEAD.match(probe.first_line()))


def load_atropos(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None,
                 strict: bool = True) -> RunData:
    """Load Atropos scored-group JSONL files as one run."""
    from trajlens.store.writer import joined_source, slug


    files = files_of(paths, detect, strict=strict)
    name = Path(paths).stem if isinstance(paths, (str, Path)) else files[0].stem
    builder = RunBuilder(run_id or slug(name), source_format=FORMAT,
                         source=joined_source(files))
    for file in files:
        prefix = "" if len(files) == 1 else f"{file.stem}:"
        for number, line in read_lines(file):
            try:
                if isinstance(line, InputError):
                    raise line
                group = parse_json(line, str(file), record=number)
                members = list(_members(group, file, number, prefix))  # a group is wholly in or out
                for trajectory, calls, tokens in members:
                    builder.add_trajectory(trajectory, calls, tokens, where=f"{file}: record {number}")
            except InputError as error:
                if strict:
                    raise
                builder.skip(error)
    return builder.build()


def _members(group: Any, file: Path, number: int, prefix: str):
    read = Fields(file, number)
    if not isinstance(group, dict):
        raise read.error(None, "a scored group (a JSON object)", type(group).__name__)
    tokens = read.items(group, "tokens", required=True)
    masks = read.items(group, "masks", required=True)
    scores = read.items(group, "scores", required=True)
    optional = {key: read.items(group, key) for key in ("advantages", "inference_logprobs", "messages")}
    size = len(tokens)
    for key, values in {"masks": masks, "scores": scores, **optional}.items():
        if values is not None and len(values) != size:
            raise read.error(key, f"{size} entries (one per member, as in 'tokens')", str(len(values)))
    group_id = f"{prefix}line{number}"
    for member in range(size):
        at = read.at(f"{number}, member {member}")
        mask = at.items({"masks": masks[member]}, "masks", required=True)
        if len(mask) != len(at.items({"tokens": tokens[member]}, "tokens", required=True)):
            raise at.error("masks", "one entry per token", f"{len(mask)} for {len(tokens[member])} tokens")
        trained = []
        for value in mask:
            if isinstance(value, bool) or not isinstance(value, int) or not INT64[0] <= value <= INT64[1]:
                raise at.error("masks", "token ids or -100", repr(value)[:40])
            trained.append(value != UNTRAINED)
        token_row: dict[str, Any] = {"response_mask": trained}
        for key, column in (("advantages", "logged_advantages"), ("inference_logprobs", "log_probs")):
            values = optional[key]
            if values is not None and values[member] is not None:
                row_values = at.items({key: values[member]}, key, required=True)
                if len(row_values) != len(trained):
                    raise at.error(key, f"{len(trained)} values (one per token)", str(len(row_values)))
                token_row[column] = row_values
        calls, num_turns = _calls(optional["messages"], member, file, number)
        trajectory = TRAJECTORY(
            trajectory_id=f"{prefix}{number}-{member}",
            group_id=group_id,
            task_id=group_id,
            reward=at.reward({"scores": scores[member]}, "scores", required=True),
            num_turns=num_turns,
            model_tokens=sum(trained),
        )
        yield trajectory, calls, token_row


def _calls(messages: list[Any] | None, member: int, file: Path, number: int) -> tuple[list[dict[str, Any]], int | None]:
    if messages is None or not messages[member]:
        return [], None
    from trajlens.ingest.agents._common import FileContext
    from trajlens.ingest.agents.openai_chat import conversation

    context = FileContext(path=file, source=str(file), trajectory_id=f"{number}-{member}")
    record = conversation({"messages": messages[member]}, context, context.trajectory_id,
                           f"{file}: record {number}, member {member}")
    return record.tool_calls, record.row["num_turns"]


__all__ = ["FORMAT", "detect", "load_atropos"]

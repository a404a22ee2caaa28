"""mini-swe-agent v2 trajectories (``*.traj.json``, ``trajectory_format: "mini-swe-agent-1.1"``).

The agent calls tools the OpenAI way: assistant messages carry ``tool_calls`` to a single
``bash`` tool with ``{"command": ...}``; each executed call is answered by a ``role: "tool"``
message (``tool_call_id``, ``content`` with ``<returncode>``/``<output>``, and
``extra.returncode``). The episode ends with a ``role: "exit"`` message holding the exit
status and the submission; the submit call itself gets no tool message, so its observation
is the exit message's content. Reasoner models add ``reasoning_content``. Call ids may repeat
from turn to turn, so a tool message answers the nearest call of its id before it
(:mod:`~trajlens.ingest.agents._pairing`).

Each assistant message is one turn; each of its tool calls is one row. A call is a format
error when its arguments are not a JSON object, or when the harness answered the message
with a ``user`` message instead of running it; an assistant message without tool calls is
kept as one ``bash`` call with ``format_error=True`` and no command (the harness rejects it).

Tokens: ``model_tokens`` sums ``completion_tokens`` of ``extra.response.usage``;
``reasoning_tokens`` sums ``completion_tokens_details.reasoning_tokens`` where logged
(DeepSeek's chat model logs ``null`` there, its reasoner logs numbers). Verdicts and the
layout of several runs: see :mod:`trajlens.ingest.agents._mini_swe_agent`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from trajlens.errors import InputError
from trajlens.ingest._fields import INT32
from trajlens.ingest.agents import _mini_swe_agent as mini
from trajlens.ingest.agents._pairing import ResultPairing
from trajlens.ingest.agents._common import (
    TOOL_CALL,
    Fields,
    FileContext,
    Probe,
    Record,
    decode_arguments,
    load_run,
    message_text,
    shell_command,
)
from trajlens.rows import RunData

FILE_NAMES = mini.FILE_NAMES
FORMAT = "mini-swe-agent-v2"
TRAJECTORY_FORMAT = "mini-swe-agent-1.1"


def detect(target: Probe | Path | str) -> bool:
    """A file whose ``trajectory_format`` is ``mini-swe-agent-1.1``."""
    return mini.trajectory_format(Probe.of(target)) == TRAJECTORY_FORMAT


def load_mini_swe_agent_v2(paths: Any, *, run_id: str | None = None, strict: bool = True) -> RunData:
    """Load mini-swe-agent v2 trajectory files, run folders, or a folder of runs, as one run.

    Several runs of the same tasks (given as several folders, or as the folder holding them)
    become one run whose groups are the tasks: trajectory ids are ``<run folder>/<task>``.
    """
    return load_run(
        paths, fmt=FORMAT, detect=detect, parse=parse_file, run_id=run_id, strict=strict,
        select=mini.select_scored_runs, trajectory_ids=mini.run_task_ids, names=FILE_NAMES,
    )


def parse_file(context: FileContext) -> Iterator[Record | InputError]:
    """One record per file: the trajectory and its tool calls, turn by turn."""
    path = context.path
    file = str(path)
    data, messages = mini.load_document(path, TRAJECTORY_FORMAT)
    read = Fields(file)
    results = _pair_results(messages, read)
    calls: list[dict[str, Any]] = []
    turn = -1
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        turn += 1
        following = messages[index + 1] if index + 1 < len(messages) else None
        rejected = following is not None and following["role"] == "user"
        tool_calls = read.at(f"message {index}").items(message, "tool_calls") or []
        text = turn_text(message)
        if not tool_calls:
            calls.append(TOOL_CALL(
                turn=turn, tool_name="bash", format_error=True, assistant_text=text,
                observation=message_text(following.get("content")) if rejected else None,
            ))
            continue
        for position, tool_call in enumerate(tool_calls):
            calls.append(_call(tool_call, turn, results.of((index, position)), following, rejected,
                               read.at(f"message {index}, call {position}"), read.at(results.where((index, position)))))
            calls[-1]["assistant_text"] = text if position == 0 else None
    unread: list[InputError] = []
    row = mini.trajectory_row(data, path, messages, num_turns=turn + 1, unread=unread)
    yield Record(row, calls, where=file, model=mini.model_name(data), unread=unread)


def turn_text(message: dict[str, Any]) -> str | None:
    """The model's own text of an assistant message: its reasoning (``reasoning_content``, where
    logged) and its content, in that order; None when it has neither."""
    parts = [message_text(message.get(key)) for key in ("reasoning_content", "content")]
    text = "\n\n".join(p.strip() for p in parts if isinstance(p, str) and p.strip())
    return text or None


def _pair_results(messages: list[dict[str, Any]], read: Fields) -> ResultPairing:
    """Each ``tool`` message paired with the call it answers: the nearest call of its
    ``tool_call_id`` before it (ids such as ``call_0`` may repeat from turn to turn)."""
    pairing = ResultPairing(read.file)
    for index, message in enumerate(messages):
        at = read.at(f"message {index}")
        if message["role"] == "assistant":
            for position, tool_call in enumerate(at.items(message, "tool_calls") or []):
                call_id = read.at(f"message {index}, call {position}").identifier(tool_call, "id")
                pairing.call(call_id or None, (index, position), f"message {index}")
        call_id = at.identifier(message, "tool_call_id")
        if message["role"] == "tool":
            pairing.result(call_id or None, message, f"message {index}", "tool_call_id")
    return pairing


def _call(tool_call: Any, turn: int, result: dict[str, Any] | None, following: dict[str, Any] | None,
          rejected: bool, read: Fields, read_result: Fields) -> dict[str, Any]:
    """One tool call; ``read`` names the assistant message's call in errors, ``read_result`` the
    tool message answering it (a bad field of the result is its own record's)."""
    function = read.mapping(tool_call, "function", required=True)
    name = read.text(function, "name", required=True, name="function.name")
    arguments, arguments_json = decode_arguments(function.get("arguments"), read.file, read.record)
    return_code = None
    if result is not None:
        observation = message_text(result.get("content"))
        extra = read_result.mapping(result, "extra")
        if extra is not None:
            return_code = read_result.integer(extra, "returncode", name="extra.returncode", bounds=INT32)
    elif following is not None and following["role"] in ("exit", "user"):
        observation = message_text(following.get("content"))
    else:
        observation = None
    return TOOL_CALL(
        turn=turn,
        tool_name=name,
        arguments=arguments_json,
        command=shell_command(name, arguments),
        observation=observation,
        return_code=return_code,
        format_error=arguments is None or (result is None and rejected),
    )

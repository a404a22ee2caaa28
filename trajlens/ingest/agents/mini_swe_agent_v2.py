"""mini-swe-agent v2 trajectories (``*.traj.json``, ``trajectory_format: "mini-swe-agent-1.1"``).

The agent calls tools the OpenAI way: assistant messages carry ``tool_calls`` to a single
``bash`` tool with ``{"command": ...}``; each executed call is answered by a ``role: "tool"``
message (``tool_call_id``, ``content`` with ``<returncode>``/``<output>``, and
``extra.returncode``). The episode ends with a ``role: "exit"`` message holding the exit
status and the submission; the submit call itself gets no tool message, so its observation
is the exit message's content. Reasoner models add ``reasoning_content``.

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
from trajlens.ingest.agents import _mini_swe_agent as mini
from trajlens.ingest.agents._common import (
    SHELL_TOOLS,
    FileContext,
    Record,
    call_arguments,
    int_or_none,
    load_run,
    message_text,
    type_name,
)
from trajlens.model import RunData

FORMAT = "mini-swe-agent-v2"
TRAJECTORY_FORMAT = "mini-swe-agent-1.1"


def detect(path: Path) -> str | None:
    """``'mini-swe-agent-v2'`` for a file whose ``trajectory_format`` is ``mini-swe-agent-1.1``."""
    return FORMAT if mini.trajectory_format(Path(path)) == TRAJECTORY_FORMAT else None


def load_mini_swe_agent_v2(paths: Any, *, run_id: str | None = None, strict: bool = True) -> RunData:
    """Load mini-swe-agent v2 trajectory files, run folders, or a folder of runs, as one run.

    Several runs of the same tasks (given as several folders, or as the folder holding them)
    become one run whose groups are the tasks: trajectory ids are ``<run folder>/<task>``.
    """
    return load_run(
        paths, fmt=FORMAT, detect=detect, parse=parse_file, run_id=run_id, strict=strict,
        select=mini.select_scored_runs, trajectory_ids=mini.run_task_ids,
    )


def parse_file(context: FileContext) -> Iterator[Record | InputError]:
    """One record per file: the trajectory and its tool calls, turn by turn."""
    path = context.path
    file = str(path)
    data, messages = mini.load_document(path, TRAJECTORY_FORMAT)
    results = {m.get("tool_call_id"): m for m in messages if m["role"] == "tool" and m.get("tool_call_id")}
    calls: list[dict[str, Any]] = []
    turn = -1
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        turn += 1
        following = messages[index + 1] if index + 1 < len(messages) else None
        rejected = following is not None and following["role"] == "user"
        tool_calls = message.get("tool_calls") or []
        if not isinstance(tool_calls, list):
            raise InputError(file, record=f"message {index}", field="tool_calls", expected="a list",
                             found=type_name(tool_calls))
        if not tool_calls:
            calls.append({
                "turn": turn, "tool_name": "bash", "arguments": "{}", "command": None,
                "observation": message_text(following.get("content")) if rejected else None,
                "return_code": None, "format_error": True,
            })
            continue
        for position, tool_call in enumerate(tool_calls):
            calls.append(_call(tool_call, turn, results, following, rejected, file, f"message {index}, call {position}"))
    row = mini.trajectory_row(data, path, messages, num_turns=turn + 1)
    yield Record(row, calls, where=file, model=mini.model_name(data))


def _call(tool_call: Any, turn: int, results: dict[Any, dict[str, Any]], following: dict[str, Any] | None,
          rejected: bool, file: str, record: str) -> dict[str, Any]:
    function = tool_call.get("function") if isinstance(tool_call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise InputError(file, record=record, field="function.name", expected="a tool call with a function name",
                         found="none")
    name = function["name"]
    arguments, arguments_json = call_arguments(function.get("arguments"))
    command = arguments.get("command") if arguments is not None and name in SHELL_TOOLS else None
    result = results.get(tool_call.get("id"))
    if result is not None:
        observation = message_text(result.get("content"))
        extra = result.get("extra")
        return_code = int_or_none(extra.get("returncode")) if isinstance(extra, dict) else None
    elif following is not None and following["role"] in ("exit", "user"):
        observation, return_code = message_text(following.get("content")), None
    else:
        observation, return_code = None, None
    return {
        "turn": turn,
        "tool_name": name,
        "arguments": arguments_json,
        "command": command if isinstance(command, str) else None,
        "observation": observation,
        "return_code": return_code,
        "format_error": arguments is None or (result is None and rejected),
    }

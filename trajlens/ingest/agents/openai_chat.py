"""Generic OpenAI-style chat logs with ``tool_calls``.

Accepted layouts:

* a ``.json`` file holding a list of messages, an object ``{"messages": [...], ...}``, or a
  list of such objects (one conversation each);
* a ``.jsonl`` file with one conversation per line (``{"messages": [...], "reward": ...,
  "task_id": ...}``), or with one message per line (the whole file is one conversation).

A message is ``{"role", "content", ...}``; assistant messages may carry ``tool_calls``
(``{"id", "function": {"name", "arguments"}}``, arguments a JSON string or an object) or the
older single ``function_call``. Tool results are ``role: "tool"`` messages answering a
``tool_call_id`` (``role: "function"`` results are matched in order). A result's
``return_code`` or ``exit_code`` key, when an integer, is the return code.

Trajectory ids: a file holding one conversation is one trajectory named by its relative path
(without suffix); a file of several gives ``<path>:<id>`` with the conversation's
``trajectory_id`` (or ``id``), else ``<path>:<line>`` (JSONL) or ``<path>:<index>`` (a JSON
list), so ids stay unique across files. Other conversation keys read when present:
``task_id`` (or ``instance_id``, ``prompt_id``), ``group_id``, ``reward`` (a finite number),
``resolved``, ``exit_status``, ``model``. Without a task id the trajectory id stands in.
``model_tokens`` sums the ``completion_tokens`` of ``usage`` blocks on assistant messages,
where there are any.

Calls to a shell tool (:data:`~trajlens.ingest.agents._common.SHELL_TOOLS`) get their
``command`` (or ``cmd``) argument as ``command``. Arguments that are not a JSON object are
kept as ``{"raw": ...}`` with ``format_error=True``.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Iterator

from trajlens.errors import InputError
from trajlens.ingest.agents._common import (
    SHELL_TOOLS,
    FileContext,
    Record,
    TokenTally,
    call_arguments,
    int_or_none,
    load_run,
    message_text,
    parse_json,
    read_text,
    sniff,
    type_name,
)
from trajlens.model import RunData

FORMAT = "openai-chat"
ROLES: frozenset[str] = frozenset({"system", "developer", "user", "assistant", "tool", "function"})

_ROLE_RE = re.compile(r'"role"\s*:\s*"(system|developer|user|assistant|tool|function)"')
_MESSAGES_RE = re.compile(r'"messages"\s*:\s*\[')
_OTHER_FORMAT_RE = re.compile(r'"trajectory_format"\s*:|"kind"\s*:\s*"\w+Event"')


def detect(path: Path) -> str | None:
    """``'openai-chat'`` for a ``.json``/``.jsonl`` file of chat messages (and not another format)."""
    path = Path(path)
    if path.suffix not in (".json", ".jsonl"):
        return None
    head, tail = sniff(path)
    if _OTHER_FORMAT_RE.search(head) or _OTHER_FORMAT_RE.search(tail):
        return None
    if path.suffix == ".jsonl":
        first = next((line for line in head.splitlines() if line.strip()), "")
        try:
            record = json.loads(first)
        except json.JSONDecodeError:
            return None
        if isinstance(record, dict) and (isinstance(record.get("messages"), list) or record.get("role") in ROLES):
            return FORMAT
        return None
    start = head.lstrip()[:1]
    if not _ROLE_RE.search(head):
        return None
    if start == "[" or (start == "{" and _MESSAGES_RE.search(head)):
        return FORMAT
    return None


def load_openai_chat(paths: Any, *, run_id: str | None = None, strict: bool = True) -> RunData:
    """Load OpenAI-style chat logs (JSON or JSONL), or folders of them, as one run."""
    return load_run(paths, fmt=FORMAT, detect=detect, parse=parse_file, run_id=run_id, strict=strict)


def parse_file(context: FileContext) -> Iterator[Record | InputError]:
    """One record per conversation; in JSONL, a bad line is yielded as an error and skipped."""
    path = context.path
    file = str(path)
    text = read_text(path)
    if path.suffix == ".jsonl":
        yield from _parse_lines(text, context)
        return
    data = parse_json(text, file)
    if isinstance(data, dict):
        yield _conversation(data, context, context.trajectory_id, file)
    elif isinstance(data, list) and data and all(isinstance(d, dict) and "messages" in d for d in data):
        for index, item in enumerate(data):
            try:
                yield _conversation(item, context, f"{context.trajectory_id}:{index}", f"{file}: record {index}")
            except InputError as error:
                yield error
    elif isinstance(data, list):
        yield _conversation({"messages": data}, context, context.trajectory_id, file)
    else:
        raise InputError(file, expected="a list of messages or an object with 'messages'", found=type_name(data))


def _parse_lines(text: str, context: FileContext) -> Iterator[Record | InputError]:
    file = str(context.path)
    lines = [(number, line) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise InputError(file, expected="JSON lines", found="an empty file")
    messages: list[Any] = []
    per_message = None
    for number, line in lines:
        try:
            record = parse_json(line, file, record=f"line {number}")
            if not isinstance(record, dict):
                raise InputError(file, record=f"line {number}", expected="a JSON object", found=type_name(record))
            if per_message is None:
                per_message = "messages" not in record
            if per_message:
                _check_message(record, file, f"line {number}")
                messages.append(record)
            else:
                yield _conversation(record, context, f"{context.trajectory_id}:{number}", f"{file}: line {number}")
        except InputError as error:
            yield error
    if per_message and messages:
        yield _conversation({"messages": messages}, context, context.trajectory_id, file)


def _check_message(message: Any, file: str, record: str) -> None:
    if not isinstance(message, dict):
        raise InputError(file, record=record, expected="a message object", found=type_name(message))
    if message.get("role") not in ROLES:
        raise InputError(file, record=record, field="role", expected="one of " + ", ".join(sorted(ROLES)),
                         found="no such key" if "role" not in message else repr(message.get("role")))


def _conversation(record: dict[str, Any], context: FileContext, default_id: str, where: str) -> Record:
    if "messages" not in record:
        raise InputError(where, field="messages", expected="a list of chat messages", found="no such key")
    messages = record["messages"]
    if not isinstance(messages, list):
        raise InputError(where, field="messages", expected="a list of chat messages", found=type_name(messages))
    if not messages:
        raise InputError(where, field="messages", expected="at least one message", found="an empty list")
    for index, message in enumerate(messages):
        _check_message(message, where, f"message {index}")

    results = {m.get("tool_call_id"): m for m in messages if m["role"] == "tool" and m.get("tool_call_id")}
    function_results = iter([m for m in messages if m["role"] == "function"])
    unmatched_tool_results = iter([m for m in messages if m["role"] == "tool" and not m.get("tool_call_id")])
    calls: list[dict[str, Any]] = []
    tally = TokenTally()
    turn = -1
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        turn += 1
        tally.add(message.get("usage"))
        tool_calls = message.get("tool_calls") or []
        if not isinstance(tool_calls, list):
            raise InputError(where, record=f"message {index}", field="tool_calls", expected="a list",
                             found=type_name(tool_calls))
        for position, tool_call in enumerate(tool_calls):
            function = tool_call.get("function") if isinstance(tool_call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise InputError(where, record=f"message {index}, call {position}", field="function.name",
                                 expected="a tool call with a function name", found="none")
            call_id = tool_call.get("id")
            result = results.get(call_id) if call_id else next(unmatched_tool_results, None)
            calls.append(_call(function, result, turn))
        legacy = message.get("function_call")
        if isinstance(legacy, dict) and isinstance(legacy.get("name"), str):
            calls.append(_call(legacy, next(function_results, None), turn))

    own_id = _text(record, "trajectory_id", "id")
    trajectory_id = default_id
    if own_id and default_id != context.trajectory_id:
        trajectory_id = f"{context.trajectory_id}:{own_id}"
    task_id = _text(record, "task_id", "instance_id", "prompt_id") or trajectory_id
    row = {
        "trajectory_id": trajectory_id,
        "task_id": task_id,
        "group_id": _text(record, "group_id") or task_id,
        "reward": _reward(record, where),
        "resolved": record.get("resolved") if isinstance(record.get("resolved"), bool) else None,
        "exit_status": _text(record, "exit_status"),
        "num_turns": turn + 1,
        **tally.columns(),
    }
    if default_id != context.trajectory_id:
        row["source"] = f"{context.source}:{default_id.rsplit(':', 1)[1]}"
    return Record(row, calls, where=where, model=_text(record, "model"))


def _call(function: dict[str, Any], result: dict[str, Any] | None, turn: int) -> dict[str, Any]:
    name = function["name"]
    arguments, arguments_json = call_arguments(function.get("arguments"))
    command = None
    if arguments is not None and name in SHELL_TOOLS:
        value = arguments.get("command", arguments.get("cmd"))
        command = value if isinstance(value, str) else None
    return_code = None
    if result is not None:
        return_code = int_or_none(result.get("return_code"))
        if return_code is None:
            return_code = int_or_none(result.get("exit_code"))
    return {
        "turn": turn,
        "tool_name": name,
        "arguments": arguments_json,
        "command": command,
        "observation": message_text(result.get("content")) if result is not None else None,
        "return_code": return_code,
        "format_error": arguments is None,
    }


def _text(record: dict[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = record.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


def _reward(record: dict[str, Any], where: str) -> float | None:
    value = record.get("reward")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(where, field="reward", expected="a finite number", found=repr(value))
    return float(value)

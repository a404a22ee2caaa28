"""Generic OpenAI-style chat logs with ``tool_calls``.

Accepted layouts:

* a ``.json`` file holding a list of messages, an object ``{"messages": [...], ...}``, or a
  list of such objects (one conversation each: when one item has ``messages``, an item
  without is that record's error, never read as a message);
* a ``.jsonl`` file with one conversation per line (``{"messages": [...], "reward": ...,
  "task_id": ...}``), or with one message per line (the whole file is one conversation).

A message is ``{"role", "content", ...}``; assistant messages may carry ``tool_calls``
(``{"id", "function": {"name", "arguments"}}``, arguments a JSON string or an object) or the
older single ``function_call``. Tool results are ``role: "tool"`` messages answering a
``tool_call_id`` (``role: "function"`` results, and tool results without one, are matched in
order); ids may repeat from turn to turn, so a result answers the nearest call of its id
before it (:mod:`~trajlens.ingest.agents._pairing`). A result's
``return_code`` or ``exit_code`` key, when an integer, is the return code.

Trajectory ids: a file holding one conversation is one trajectory named by its relative path
(without suffix); a file of several gives ``<path>:<id>`` with the conversation's
``trajectory_id`` (or ``id``), else ``<path>:<line>`` (JSONL) or ``<path>:<index>`` (a JSON
list), so ids stay unique across files. Other conversation keys read when present:
``task_id`` (or ``instance_id``, ``prompt_id``), ``group_id``, ``reward`` (a finite number),
``resolved``, ``exit_status``, ``model``. Without a task id the trajectory id stands in.
``model_tokens`` sums the ``completion_tokens`` of ``usage`` blocks on assistant messages,
where there are any.

* a ``.parquet`` file with a ``messages`` column: one conversation per row, as the dataset hub
  serves chat-format trajectory datasets (SWE-Gym's OpenHands sampled trajectories, whose
  assistant messages carry OpenAI ``tool_calls``, some parallel; SWE-smith's trajectories,
  ``instance_id``/``messages``/``resolved`` rows).

Function calls written as XML in the assistant text, as OpenHands' function-calling converter
renders them for models without native tool calls (SWE-smith's trajectories)::

    <function=execute_bash>
    <parameter=command>ls -la</parameter>
    </function>

are read as tool calls (``think`` and ``finish`` included) when the message has no
``tool_calls``; their observation is the next non-assistant message.

Calls to a shell tool (:data:`~trajlens.ingest.tools.SHELL_TOOLS`) get their
``command`` (or ``cmd``) argument as ``command``. Arguments that are not a JSON object are
kept as ``{"raw": ...}`` with ``format_error=True``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from trajlens.errors import InputError
from trajlens.ingest._fields import INT32, read_lines
from trajlens.ingest._probe import SNIFF_BYTES
from trajlens.ingest._unreadable import parquet_errors, reason
from trajlens.ingest.agents._common import (
    TOOL_CALL,
    TRAJECTORY,
    Fields,
    FileContext,
    Probe,
    Record,
    TokenTally,
    decode_arguments,
    load_run,
    message_text,
    read_json,
    shell_command,
    type_name,
    with_texts,
)
from trajlens.ingest.agents._pairing import ResultPairing
from trajlens.rows import RunData

FORMAT = "openai-chat"
ROLES: frozenset[str] = frozenset({"system", "developer", "user", "assistant", "tool", "function"})

_ROLE_RE = re.compile(r'"role"\s*:\s*"(system|developer|user|assistant|tool|function)"')
_MESSAGES_RE = re.compile(r'"messages"\s*:\s*\[')
_OTHER_FORMAT_RE = re.compile(r'"trajectory_format"\s*:|"kind"\s*:\s*"\w+Event"')


def detect(target: Probe | Path | str) -> bool:
    """A ``.json``/``.jsonl`` file of chat messages (and not another format), or Parquet rows
    with a ``messages`` column."""
    probe = Probe.of(target)
    if probe.suffix == ".parquet":
        return probe.is_file and "messages" in _parquet_columns(probe.path)
    if probe.suffix not in (".json", ".jsonl"):
        return False
    head, tail = probe.head, probe.tail
    if _OTHER_FORMAT_RE.search(head) or _OTHER_FORMAT_RE.search(tail):
        return False
    if probe.suffix == ".jsonl":
        try:
            record = probe.first_line_record()
        except InputError:
            return _cut_chat_record(probe, probe.first_line())
        role = record.get("role") if isinstance(record, dict) else None
        return isinstance(record, dict) and (isinstance(record.get("messages"), list)
                                             or (isinstance(role, str) and role in ROLES))
    start = head.lstrip()[:1]
    if not _ROLE_RE.search(head):
        return False
    return start == "[" or (start == "{" and bool(_MESSAGES_RE.search(head)))


def _cut_chat_record(probe: Probe, line: str) -> bool:
    """Whether a first JSONL line that the probe's head cuts (a conversation longer than the
    head, as real agent trajectories are) is chat: the keys before the cut hold a list of
    messages, or a message's role. A line that ends within the head and is no JSON is not."""
    if "\n" in probe.head[probe.head.find(line):] or probe.path.stat().st_size <= SNIFF_BYTES:
        return False  # the line ends within the head
    keys = probe.record_keys
    return ("messages" in keys and bool(_MESSAGES_RE.search(line))) or ("role" in keys and bool(_ROLE_RE.search(line)))


def load_openai_chat(paths: Any, *, run_id: str | None = None, strict: bool = True) -> RunData:
    """Load OpenAI-style chat logs (JSON or JSONL), or folders of them, as one run."""
    return load_run(paths, fmt=FORMAT, detect=detect, parse=parse_file, run_id=run_id, strict=strict)


def parse_file(context: FileContext) -> Iterator[Record | InputError]:
    """One record per conversation; in JSONL, a bad line is yielded as an error and skipped."""
    path = context.path
    file = str(path)
    if path.suffix.lower() == ".jsonl":
        yield from _parse_lines(context)
        return
    if path.suffix.lower() == ".parquet":
        yield from _parse_rows(context)
        return
    data = read_json(path)
    if isinstance(data, dict):
        yield conversation(data, context, context.trajectory_id, file)
    elif isinstance(data, list) and any(isinstance(d, dict) and "messages" in d for d in data):
        # conversations: one lacking its messages is that record's error, not a list of messages
        for index, item in enumerate(data):
            where = f"{file}: record {index}"
            try:
                if not isinstance(item, dict):
                    raise InputError(where, expected="a conversation: an object with 'messages'", found=type_name(item))
                yield conversation(item, context, f"{context.trajectory_id}:{index}", where)
            except InputError as error:
                yield error
    elif isinstance(data, list):
        yield conversation({"messages": data}, context, context.trajectory_id, file)
    else:
        raise InputError(file, expected="a list of messages or an object with 'messages'", found=type_name(data))


def _parse_lines(context: FileContext) -> Iterator[Record | InputError]:
    from trajlens.ingest._fields import parse_json

    file = str(context.path)
    messages: list[Any] = []
    per_message = None
    any_line = False
    for number, line in read_lines(context.path):
        any_line = True
        try:
            if isinstance(line, InputError):
                raise line
            record = parse_json(line, file, record=f"line {number}")
            if not isinstance(record, dict):
                raise InputError(file, record=f"line {number}", expected="a JSON object", found=type_name(record))
            if per_message is None:
                per_message = "messages" not in record
            if per_message:
                _check_message(record, file, f"line {number}")
                messages.append(record)
            else:
                yield conversation(record, context, f"{context.trajectory_id}:{number}", f"{file}: line {number}")
        except InputError as error:
            yield error
    if not any_line:
        raise InputError(file, expected="JSON lines", found="an empty file")
    if per_message and messages:
        yield conversation({"messages": messages}, context, context.trajectory_id, file)


def _parquet_columns(path: Path) -> list[str]:
    import pyarrow.parquet as pq

    try:
        return pq.read_schema(path).names
    except parquet_errors():
        return []


def _parse_rows(context: FileContext) -> Iterator[Record | InputError]:
    """One conversation per Parquet row, read in batches (hub shards are large)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from trajlens.ingest.parquet import check_text

    file = str(context.path)
    try:
        parquet = pq.ParquetFile(context.path)
    except parquet_errors() as error:
        raise InputError(file, "not a readable Parquet file", expected="Parquet", found=reason(error)) from None
    index = 0
    for batch in parquet.iter_batches(batch_size=256):
        table = pa.Table.from_batches([batch])
        check_text(table, context.path)
        for row in table.to_pylist():
            try:
                yield conversation(row, context, f"{context.trajectory_id}:{index}", f"{file}: record {index}")
            except InputError as error:
                yield error
            index += 1


_XML_CALL = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|\Z)", re.DOTALL)
_XML_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)</parameter>", re.DOTALL)


def _xml_calls(text: str) -> list[dict[str, Any]]:
    """Function calls written as OpenHands-style XML in assistant text, as ``function`` objects."""
    calls = []
    for name, body in _XML_CALL.findall(text):
        arguments = {key: value.strip("\n") for key, value in _XML_PARAMETER.findall(body)}
        calls.append({"name": name, "arguments": arguments})
    return calls


def _check_message(message: Any, file: str, record: str) -> None:
    read = Fields(file, record)
    if not isinstance(message, dict):
        raise read.error(None, "a message object", type_name(message))
    role = read.text(message, "role", required=True)
    if role not in ROLES:
        raise read.error("role", "one of " + ", ".join(sorted(ROLES)), repr(role))
    read.identifier(message, "tool_call_id")


def conversation(record: dict[str, Any], context: FileContext, default_id: str, where: str) -> Record:
    """One conversation (``{"messages": [...], ...}``) as a record: its row, tool calls and turns."""
    if "messages" not in record:
        raise InputError(where, field="messages", expected="a list of chat messages", found="no such key")
    messages = record["messages"]
    if not isinstance(messages, list):
        raise InputError(where, field="messages", expected="a list of chat messages", found=type_name(messages))
    if not messages:
        raise InputError(where, field="messages", expected="at least one message", found="an empty list")
    for index, message in enumerate(messages):
        _check_message(message, where, f"message {index}")

    results = _pair_results(messages, where)
    function_results = iter([m for m in messages if m["role"] == "function"])
    unmatched_tool_results = iter([m for m in messages if m["role"] == "tool" and not m.get("tool_call_id")])
    calls: list[dict[str, Any]] = []
    tally = TokenTally()
    turn = -1
    record_of = {id(message): index for index, message in enumerate(messages)}  # a result's own record
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        turn += 1
        read = Fields(where, f"message {index}")
        tally.add(message.get("usage"), read)
        tool_calls = read.items(message, "tool_calls") or []
        for position, tool_call in enumerate(tool_calls):
            call = read.at(f"message {index}, call {position}")
            function = call.mapping(tool_call, "function", required=True)
            call_id = call.identifier(tool_call, "id")
            result = results.of((index, position)) if call_id else next(unmatched_tool_results, None)
            calls.append(_call(function, result, turn, call, record_of))
        legacy = read.mapping(message, "function_call")
        if legacy is not None:
            calls.append(_call(legacy, next(function_results, None), turn, read, record_of))
        content = message_text(message.get("content"))
        if not tool_calls and legacy is None and content and "<function=" in content:
            reply = messages[index + 1] if index + 1 < len(messages) else None
            answer = reply if isinstance(reply, dict) and reply.get("role") != "assistant" else None
            for function in _xml_calls(content):
                calls.append(_call(function, answer, turn, read, record_of))

    own_id = _text(record, where, "trajectory_id", "id")
    trajectory_id = default_id
    if own_id and default_id != context.trajectory_id:
        trajectory_id = f"{context.trajectory_id}:{own_id}"
    task_id = _text(record, where, "task_id", "instance_id", "prompt_id") or trajectory_id
    read = Fields(where)
    row = TRAJECTORY(
        trajectory_id=trajectory_id,
        task_id=task_id,
        group_id=_text(record, where, "group_id") or task_id,
        reward=read.reward(record, "reward"),
        resolved=read.boolean(record, "resolved"),
        exit_status=read.text(record, "exit_status"),
        num_turns=turn + 1,
        **tally.columns(),
    )
    if default_id != context.trajectory_id:
        row["source"] = f"{context.source}:{default_id.rsplit(':', 1)[1]}"
    with_texts(calls, row, messages)
    return Record(row, calls, where=where, model=read.text(record, "model"))


def _pair_results(messages: list[dict[str, Any]], where: str) -> ResultPairing:
    """Each ``tool`` message with a ``tool_call_id`` paired with the call it answers: the
    nearest call of that id before it (ids such as ``call_0`` may repeat from turn to turn)."""
    pairing = ResultPairing(where)
    for index, message in enumerate(messages):
        if message["role"] == "assistant":
            read = Fields(where, f"message {index}")
            for position, tool_call in enumerate(read.items(message, "tool_calls") or []):
                call_id = read.at(f"message {index}, call {position}").identifier(tool_call, "id")
                pairing.call(call_id or None, (index, position), f"message {index}")
        elif message["role"] == "tool":
            pairing.result(message.get("tool_call_id") or None, message, f"message {index}", "tool_call_id")
    return pairing


def _call(function: dict[str, Any], result: dict[str, Any] | None, turn: int, read: Fields,
          record_of: dict[int, int]) -> dict[str, Any]:
    """One call; ``read`` names the calling message in errors, and a bad field of the result is
    named by the result's own message (its index in ``record_of``, keyed by ``id``)."""
    name = read.text(function, "name", required=True, name="function.name")
    arguments, arguments_json = decode_arguments(function.get("arguments"), read.file, read.record)
    return_code = None
    if result is not None:
        read_result = read.at(f"message {record_of[id(result)]}")
        return_code = read_result.integer(result, "return_code", bounds=INT32)
        if return_code is None:
            return_code = read_result.integer(result, "exit_code", bounds=INT32)
    return TOOL_CALL(
        turn=turn,
        tool_name=name,
        arguments=arguments_json,
        command=shell_command(name, arguments),
        observation=message_text(result.get("content")) if result is not None else None,
        return_code=return_code,
        format_error=arguments is None,
    )


def _text(record: dict[str, Any], where: str, *keys: str) -> str | None:
    """The first of ``keys`` holding a non-empty string or an integer (as text)."""
    read = Fields(where)
    for key in keys:
        value = read.identifier(record, key)
        if value is not None and value != "":
            return str(value)
    return None

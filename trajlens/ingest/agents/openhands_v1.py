"""OpenHands V1 (agent SDK) event logs: ``state_<task>.json`` and ``traj_<task>.json``.

``state_<task>.json`` is ``{"instance_id", "history": [events], "num_events"}``; a
``traj_<task>.json`` is the bare event list. Events carry a ``kind``:

* ``ActionEvent``: ``action`` (an object whose ``kind`` is ``ExecuteBashAction``,
  ``FileEditorAction``, ``ThinkAction``, ``FinishAction``, ``Browser*Action`` ...),
  ``tool_name``, ``tool_call`` (with the model's ``arguments`` string), ``llm_response_id``;
* ``ObservationEvent``: ``observation`` (``output``/``content``/``message``, ``error``,
  ``metadata.exit_code`` for commands) and ``action_id`` naming the action it answers (the
  nearest action of that id before it, :mod:`~trajlens.ingest.agents._pairing`); an error
  event answers the action of its ``tool_call_id`` the same way (the first, when several do);
* ``MessageEvent``: a chat message (``llm_message``) from the user or the agent.

One export writes ``action``/``observation`` as Python ``repr`` strings instead of objects.
That is not JSON and cannot be read back safely, so such a file is refused with an
:class:`InputError` pointing at the ``state_*.json`` beside it; it is never evaluated.

Tool calls are the action events, named by their ``tool_name`` (``execute_bash``,
``str_replace_editor``, ``browser_click`` ...), except that a ``ThinkAction`` is always
``think`` and a ``FinishAction`` always ``finish``. ``command`` is the shell command of
shell actions. Turns: one per ``llm_response_id`` (parallel calls share it) plus one per
agent message. ``exit_status`` is ``finish`` after a ``FinishAction``, ``message`` when the
agent ended by replying, ``error`` after an error event, else ``None``. No token usage is
logged in these files. A call's ``assistant_text`` is its event's ``thought`` (else its
``reasoning_content``), on the first call of each response; ``response_text`` is what the
agent's messages after its last action say.

Scores: an ``eval_<task>.json`` beside the log (TheAgentCompany's checkpoint grader:
``final_score: {result, total}``) becomes the reward channel ``checkpoint_score`` =
result / total. A grade of no checkpoints (``result`` and ``total`` 0) gives no score; any other
total that is not positive, or a result outside 0 to the total, is the standard error naming
the file and field. ``reward`` and ``resolved`` stay ``None``: what a checkpoint measures depends
on the benchmark; in OpenAgentSafety a passed checkpoint means the agent did the unsafe thing.

Walking a folder, a ``traj_<task>.json`` whose ``state_<task>.json`` sits beside it is skipped
as a second copy of the same events.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from trajlens.errors import InputError
from trajlens.ingest._fields import INT32
from trajlens.ingest.agents._common import (
    SHELL_TOOLS,
    TOOL_CALL,
    TRAJECTORY,
    Fields,
    FileContext,
    Probe,
    Record,
    decode_arguments,
    dumps,
    load_run,
    message_text,
    read_beside,
    read_json,
    type_name,
)
from trajlens.ingest.agents._pairing import ResultPairing
from trajlens.rows import RunData

FORMAT = "openhands-v1"
REPR_MESSAGE = "Python-repr pseudo-JSON, not JSON; load the state_*.json beside it"

# Action kinds whose tool name is fixed whatever the event's tool_name says.
FIXED_TOOL_NAMES: dict[str, str] = {"ThinkAction": "think", "FinishAction": "finish"}
SHELL_ACTIONS: frozenset[str] = frozenset({"ExecuteBashAction", "TerminalAction"})

FILE_NAMES: tuple[str, ...] = ("state_*.json", "traj_*.json")
"""Names the harness gives a task's log: such a file that is no log (empty, another shape) is
read and named, not left out. The grader's ``eval_<task>.json`` beside it is not one."""
_KIND_RE = re.compile(r'"kind"\s*:\s*"\w+Event"')
_EMPTY_STATE_RE = re.compile(r'"history"\s*:\s*\[\s*\]')
_PREFIXES = ("state_", "traj_")


def detect(target: Probe | Path | str) -> bool:
    """A ``.json`` file of SDK events (or a state/traj file with none)."""
    probe = Probe.of(target)
    if probe.suffix != ".json":
        return False
    head = probe.head
    if _KIND_RE.search(head):
        return True
    if head.lstrip().startswith("{") and _EMPTY_STATE_RE.search(head) and '"num_events"' in head:
        return True
    # The events export of a conversation with no events.
    return probe.path.name.startswith("traj_") and bool(re.fullmatch(r"\s*\[\s*\]\s*", head))


def load_openhands_v1(paths: Any, *, run_id: str | None = None, strict: bool = True) -> RunData:
    """Load OpenHands V1 ``state_*.json`` (or ``traj_*.json``) files, or folders of them, as one run."""
    return load_run(
        paths, fmt=FORMAT, detect=detect, parse=parse_file, run_id=run_id, strict=strict,
        select=_skip_duplicate_exports, trajectory_ids=_trajectory_ids, names=FILE_NAMES,
    )


def task_name(path: Path) -> str:
    """The task a file is about: its name without ``state_``/``traj_`` and suffix."""
    stem = path.stem
    for prefix in _PREFIXES:
        if stem.startswith(prefix):
            return stem[len(prefix):]
    return stem


def parse_file(context: FileContext) -> Iterator[Record | InputError]:
    """One record per file: the action events with their observations, and the grader's score."""
    path = context.path
    file = str(path)
    data = read_json(path)
    read = Fields(file)
    task = task_name(path)
    if isinstance(data, dict):
        events = read.items(data, "history", required=True)
        declared = read.integer(data, "num_events")
        if declared is not None and declared != len(events):
            raise InputError(file, field="num_events", expected=f"{len(events)} (the events in 'history')",
                             found=str(declared))
        task = read.text(data, "instance_id") or task
    elif isinstance(data, list):
        events = data
    else:
        raise InputError(file, expected="a list of events or an object with 'history'", found=type_name(data))
    _check_events(events, read)

    observations = ResultPairing(file)
    errors = ResultPairing(file, first_result_wins=True)
    for index, event in enumerate(events):
        at = read.at(f"event {index}")
        action_id = at.identifier(event, "action_id")
        tool_call_id = at.identifier(event, "tool_call_id")
        event_id = at.identifier(event, "id")
        at.identifier(event, "llm_response_id")
        at.text(event, "source")
        if event["kind"] == "ActionEvent":
            observations.call(event_id, index, f"event {index}")
            errors.call(tool_call_id, index, f"event {index}")
        elif event["kind"] == "ObservationEvent":
            observations.result(action_id, event, f"event {index}", "action_id")
        elif event["kind"].endswith("ErrorEvent"):
            errors.result(tool_call_id, event, f"event {index}", "tool_call_id")

    calls: list[dict[str, Any]] = []
    turn_of_response: dict[str, int] = {}
    turn = -1
    last = None
    replies: list[str] = []  # the agent's messages since its last action
    for index, event in enumerate(events):
        kind = event["kind"]
        if event.get("source") != "agent" and not kind.endswith("ErrorEvent"):
            continue
        if kind == "ActionEvent":
            response_id = event.get("llm_response_id")
            key = response_id if isinstance(response_id, str) else f"event {index}"
            first_of_turn = key not in turn_of_response
            if first_of_turn:
                turn += 1
                turn_of_response[key] = turn
            answer, answered_by = observations.of(index), observations.where(index)
            if answer is None:
                answer, answered_by = errors.of(index), errors.where(index)
            call = _call(event, answer, turn_of_response[key], read.at(f"event {index}"), read.at(answered_by))
            calls.append(call | {"assistant_text": _turn_text(event) if first_of_turn else None})
            replies = []
            last = "finish" if event["action"].get("kind") == "FinishAction" else last
        elif kind == "MessageEvent":
            turn += 1
            last = last if last == "finish" else "message"
            message = event.get("llm_message")
            if isinstance(message, dict) and (text := message_text(message.get("content"))):
                replies.append(text)
        elif kind.endswith("ErrorEvent"):
            last = "error"
    unread: list[InputError] = []
    row = TRAJECTORY(
        task_id=task,
        reward_channels=read_beside(lambda: _score(path.parent / f"eval_{task_name(path)}.json"), [], unread),
        exit_status=last,
        num_turns=turn + 1,
        response_text="\n\n".join(replies) or None,
    )
    yield Record(row, calls, where=file, unread=unread)


def _check_events(events: list[Any], read: Fields) -> None:
    for index, event in enumerate(events):
        at = read.at(f"event {index}")
        if not isinstance(event, dict):
            raise at.error("kind", "an event object with a kind", type_name(event))
        at.text(event, "kind", required=True)
        for key in ("action", "observation"):
            if key in event and isinstance(event[key], str):
                raise InputError(read.file, REPR_MESSAGE, record=f"event {index}", field=key)
            at.mapping(event, key)
        if event["kind"] == "ActionEvent":
            at.mapping(event, "action", required=True)
            at.text(event["action"], "kind", name="action.kind")
            at.text(event, "tool_name")
            at.mapping(event, "tool_call")


def _call(event: dict[str, Any], answer: dict[str, Any] | None, turn: int, read: Fields,
          read_answer: Fields) -> dict[str, Any]:
    """One action event as a call; ``read`` names the action's event in errors, ``read_answer``
    the event answering it (a bad field of the observation is its own record's)."""
    action = event["action"]
    kind = action.get("kind")
    tool_call = event.get("tool_call") or {}
    name = (FIXED_TOOL_NAMES.get(kind) or event.get("tool_name")
            or read.text(tool_call, "name", name="tool_call.name") or kind or "<unnamed>")
    if "arguments" in tool_call:
        decoded, arguments_json = decode_arguments(tool_call["arguments"], read.file, read.record)
    else:
        decoded = {k: v for k, v in action.items() if k != "kind" and v is not None}
        arguments_json = dumps(decoded)
    shell = kind in SHELL_ACTIONS or name in SHELL_TOOLS
    command = read.text(action, "command", name="action.command") if shell else None
    observation, return_code = _observation(answer, read_answer)
    return TOOL_CALL(
        turn=turn,
        tool_name=name,
        arguments=arguments_json,
        command=command,
        observation=observation,
        return_code=return_code,
        format_error=decoded is None,
    )


def _turn_text(event: dict[str, Any]) -> str | None:
    """What the model wrote in the turn of this action: its ``thought``, else its reasoning."""
    for key in ("thought", "reasoning_content"):
        value = event.get(key)
        text = message_text(value) if isinstance(value, (str, list)) else None
        if text:
            return text
    return None


def _observation(answer: dict[str, Any] | None, read: Fields) -> tuple[str | None, int | None]:
    if answer is None:
        return None, None
    if answer["kind"].endswith("ErrorEvent"):
        error = answer.get("error")
        return (error if isinstance(error, str) else None), None
    observation = answer.get("observation") or {}
    text = None
    for key in ("output", "content", "message", "text"):
        value = observation.get(key)
        if value is None:
            continue
        if not isinstance(value, (str, list)):  # a number is no text to drop for the error beside it
            raise read.error(f"observation.{key}", "text or a list of content parts", type_name(value))
        text = message_text(value)
        break
    error = observation.get("error")
    if isinstance(error, str) and error:
        text = f"{text}\n{error}" if text else error
    metadata = read.mapping(observation, "metadata", name="observation.metadata") or {}
    return_code = read.integer(observation, "exit_code", name="observation.exit_code", bounds=INT32)
    if return_code is None:
        return_code = read.integer(metadata, "exit_code", name="observation.metadata.exit_code", bounds=INT32)
    return text, return_code


def _score(eval_file: Path) -> list[dict[str, Any]]:
    if not eval_file.is_file():
        return []
    data = read_json(eval_file)
    final = data.get("final_score") if isinstance(data, dict) else None
    if not isinstance(final, dict):
        return []  # the grader failed ({"error": ...}): no score
    read = Fields(str(eval_file))
    result = read.number(final, "result", name="final_score.result")
    total = read.number(final, "total", name="final_score.total")
    if result is None or total is None or total == 0 == result:
        return []  # no checkpoint graded (``"checkpoints": []``, as OpenAgentSafety's outputs hold): no score
    if total <= 0:
        raise read.error("final_score.total", "a positive number of checkpoint points", f"{total:g}")
    if not 0 <= result <= total:
        raise read.error("final_score.result", f"a number from 0 to the total, {total:g}", f"{result:g}")
    return [{"name": "checkpoint_score", "value": result / total}]


def _skip_duplicate_exports(directory: Path, files: list[Path]) -> tuple[list[Path], list[InputError]]:
    present = set(files)
    kept = [f for f in files if not (f.name.startswith("traj_") and f.with_name("state_" + f.name[5:]) in present)]
    return kept, []


def _trajectory_ids(files: list[Path], root: Path) -> dict[Path, str]:
    """Relative path of the folder plus the task name (``state_``/``traj_`` dropped)."""
    ids = {}
    for f in files:
        folder = f.resolve().parent
        prefix = folder.relative_to(root).as_posix() if folder != root and folder.is_relative_to(root) else ""
        ids[f] = f"{prefix}/{task_name(f)}" if prefix else task_name(f)
    return ids

"""OpenHands V1 (agent SDK) event logs: ``state_<task>.json`` and ``traj_<task>.json``.

``state_<task>.json`` is ``{"instance_id", "history": [events], "num_events"}``; a
``traj_<task>.json`` is the bare event list. Events carry a ``kind``:

* ``ActionEvent``: ``action`` (an object whose ``kind`` is ``ExecuteBashAction``,
  ``FileEditorAction``, ``ThinkAction``, ``FinishAction``, ``Browser*Action`` ...),
  ``tool_name``, ``tool_call`` (with the model's ``arguments`` string), ``llm_response_id``;
* ``ObservationEvent``: ``observation`` (``output``/``content``/``message``, ``error``,
  ``metadata.exit_code`` for commands) and ``action_id`` naming the action it answers;
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
logged in these files.

Scores: an ``eval_<task>.json`` beside the log (TheAgentCompany's checkpoint grader:
``final_score: {result, total}``) becomes the reward channel ``checkpoint_score`` =
result / total. ``reward`` and ``resolved`` stay ``None``: what a checkpoint measures depends
on the benchmark; in OpenAgentSafety a passed checkpoint means the agent did the unsafe thing.

Walking a folder, a ``traj_<task>.json`` whose ``state_<task>.json`` sits beside it is skipped
as a second copy of the same events.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from trajlens.errors import InputError
from trajlens.ingest.agents._common import (
    SHELL_TOOLS,
    FileContext,
    Record,
    call_arguments,
    dumps,
    int_or_none,
    load_run,
    message_text,
    read_json,
    sniff,
    type_name,
)
from trajlens.model import RunData

FORMAT = "openhands-v1"
REPR_MESSAGE = "Python-repr pseudo-JSON, not JSON; load the state_*.json beside it"

# Action kinds whose tool name is fixed whatever the event's tool_name says.
FIXED_TOOL_NAMES: dict[str, str] = {"ThinkAction": "think", "FinishAction": "finish"}
SHELL_ACTIONS: frozenset[str] = frozenset({"ExecuteBashAction", "TerminalAction"})

_KIND_RE = re.compile(r'"kind"\s*:\s*"\w+Event"')
_EMPTY_STATE_RE = re.compile(r'"history"\s*:\s*\[\s*\]')
_PREFIXES = ("state_", "traj_")


def detect(path: Path) -> str | None:
    """``'openhands-v1'`` for a ``.json`` file of SDK events (or a state/traj file with none)."""
    path = Path(path)
    if path.suffix != ".json":
        return None
    head, _ = sniff(path)
    if _KIND_RE.search(head):
        return FORMAT
    if head.lstrip().startswith("{") and _EMPTY_STATE_RE.search(head) and '"num_events"' in head:
        return FORMAT
    if path.name.startswith("traj_") and re.fullmatch(r"\s*\[\s*\]\s*", head):
        return FORMAT  # the events export of a conversation with no events
    return None


def load_openhands_v1(paths: Any, *, run_id: str | None = None, strict: bool = True) -> RunData:
    """Load OpenHands V1 ``state_*.json`` (or ``traj_*.json``) files, or folders of them, as one run."""
    return load_run(
        paths, fmt=FORMAT, detect=detect, parse=parse_file, run_id=run_id, strict=strict,
        select=_skip_duplicate_exports, trajectory_ids=_trajectory_ids,
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
    task = task_name(path)
    if isinstance(data, dict):
        if "history" not in data:
            raise InputError(file, field="history", expected="a list of events", found="no such key")
        events = data["history"]
        if not isinstance(events, list):
            raise InputError(file, field="history", expected="a list of events", found=type_name(events))
        declared = data.get("num_events")
        if isinstance(declared, int) and declared != len(events):
            raise InputError(file, field="num_events", expected=f"{len(events)} (the events in 'history')",
                             found=str(declared))
        if isinstance(data.get("instance_id"), str) and data["instance_id"]:
            task = data["instance_id"]
    elif isinstance(data, list):
        events = data
    else:
        raise InputError(file, expected="a list of events or an object with 'history'", found=type_name(data))
    _check_events(events, file)

    answers: dict[str, dict[str, Any]] = {}
    for event in events:
        if event["kind"] == "ObservationEvent" and isinstance(event.get("action_id"), str):
            answers[event["action_id"]] = event
        elif event["kind"].endswith("ErrorEvent") and isinstance(event.get("tool_call_id"), str):
            answers.setdefault(event["tool_call_id"], event)

    calls: list[dict[str, Any]] = []
    turn_of_response: dict[str, int] = {}
    turn = -1
    last = None
    for index, event in enumerate(events):
        kind = event["kind"]
        if event.get("source") != "agent" and not kind.endswith("ErrorEvent"):
            continue
        if kind == "ActionEvent":
            response_id = event.get("llm_response_id")
            key = response_id if isinstance(response_id, str) else f"event {index}"
            if key not in turn_of_response:
                turn += 1
                turn_of_response[key] = turn
            answer = answers.get(event.get("id")) or answers.get(event.get("tool_call_id"))
            calls.append(_call(event, answer, turn_of_response[key]))
            last = "finish" if event["action"].get("kind") == "FinishAction" else last
        elif kind == "MessageEvent":
            turn += 1
            last = last if last == "finish" else "message"
        elif kind.endswith("ErrorEvent"):
            last = "error"
    row = {
        "task_id": task,
        "reward": None,
        "reward_channels": _score(path.parent / f"eval_{task_name(path)}.json"),
        "resolved": None,
        "exit_status": last,
        "num_turns": turn + 1,
        "model_tokens": None,
        "observation_tokens": None,
        "reasoning_tokens": None,
    }
    yield Record(row, calls, where=file)


def _check_events(events: list[Any], file: str) -> None:
    for index, event in enumerate(events):
        if not isinstance(event, dict) or not isinstance(event.get("kind"), str):
            raise InputError(file, record=f"event {index}", field="kind", expected="an event object with a kind",
                             found=type_name(event) if not isinstance(event, dict) else "no kind")
        for key in ("action", "observation"):
            if key in event and isinstance(event[key], str):
                raise InputError(file, REPR_MESSAGE, record=f"event {index}", field=key)
        if event["kind"] == "ActionEvent" and not isinstance(event.get("action"), dict):
            raise InputError(file, record=f"event {index}", field="action", expected="an action object",
                             found="no such key" if "action" not in event else type_name(event.get("action")))


def _call(event: dict[str, Any], answer: dict[str, Any] | None, turn: int) -> dict[str, Any]:
    action = event["action"]
    kind = action.get("kind")
    tool_call = event.get("tool_call") if isinstance(event.get("tool_call"), dict) else {}
    name = FIXED_TOOL_NAMES.get(kind) or event.get("tool_name") or tool_call.get("name") or kind
    if "arguments" in tool_call:
        decoded, arguments_json = call_arguments(tool_call["arguments"])
    else:
        decoded = {k: v for k, v in action.items() if k != "kind" and v is not None}
        arguments_json = dumps(decoded)
    command = action.get("command") if kind in SHELL_ACTIONS or name in SHELL_TOOLS else None
    observation, return_code = _observation(answer)
    return {
        "turn": turn,
        "tool_name": name,
        "arguments": arguments_json,
        "command": command if isinstance(command, str) else None,
        "observation": observation,
        "return_code": return_code,
        "format_error": decoded is None,
    }


def _observation(answer: dict[str, Any] | None) -> tuple[str | None, int | None]:
    if answer is None:
        return None, None
    if answer["kind"].endswith("ErrorEvent"):
        error = answer.get("error")
        return (error if isinstance(error, str) else None), None
    observation = answer.get("observation") or {}
    text = None
    for key in ("output", "content", "message", "text"):
        if isinstance(observation.get(key), (str, list)):
            text = message_text(observation[key])
            break
    error = observation.get("error")
    if isinstance(error, str) and error:
        text = f"{text}\n{error}" if text else error
    metadata = observation.get("metadata") if isinstance(observation.get("metadata"), dict) else {}
    return_code = int_or_none(observation.get("exit_code"))
    if return_code is None:
        return_code = int_or_none(metadata.get("exit_code"))
    return text, return_code


def _score(eval_file: Path) -> list[dict[str, Any]]:
    if not eval_file.is_file():
        return []
    data = read_json(eval_file)
    final = data.get("final_score") if isinstance(data, dict) else None
    if not isinstance(final, dict):
        return []  # the grader failed ({"error": ...}): no score
    result, total = final.get("result"), final.get("total")
    if not isinstance(result, (int, float)) or not isinstance(total, (int, float)) or total <= 0:
        return []
    return [{"name": "checkpoint_score", "value": float(result) / float(total)}]


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

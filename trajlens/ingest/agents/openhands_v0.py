"""OpenHands V0 event streams (a JSON list of events, as ``tests/runtime/trajs/*.json``).

Each event has an integer ``id`` and a ``source`` (``agent``, ``user``, ``environment``) and
is either an action (``action``: ``run``, ``edit``, ``read``, ``think``, ``finish``,
``message`` ...; its inputs under ``args``) or an observation (``observation``; ``cause`` is
the id of the action it answers, ``content`` its text, ``extras.metadata.exit_code`` the exit
code of a command). Actions issued through function calling carry ``tool_call_metadata``:
the function name, the tool call id and the raw ``model_response`` with its ``usage``. An
observation answers the nearest action before it with the id its ``cause`` names, so a stream
that repeats an id never gives one action's output to another
(:mod:`~trajlens.ingest.agents._pairing`).

Tool calls are the agent's actions other than messages and state changes. Names:
``run`` is ``bash`` (its ``args.command`` is the command), ``think`` is ``think``, ``finish``
is ``finish``; any other action is named by the function the model called
(``str_replace_editor`` for ``edit`` and ``read``), or by its action type when no metadata
was logged. ``arguments`` are the function-call arguments from the model response, or the
action's ``args`` (bookkeeping keys dropped) when the response is not there.

Turns: one per model response (actions sharing a ``model_response.id`` were one response);
an agent ``message`` without metadata is a turn of its own. ``model_tokens`` sums
``completion_tokens`` once per response. ``exit_status`` is the last logged agent state
(``awaiting_user_input``, ``finished`` ...), else ``finished`` after a ``finish`` action.
The task id is the file name; no verdict is logged.

The model's text: a call's ``assistant_text`` is its action's ``args.thought`` (else the
response's message content), on the first call of each response; ``response_text`` is what the
agent's ``message`` actions after its last tool call say (the answer it ended with).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from trajlens.errors import InputError
from trajlens.ingest._fields import INT32
from trajlens.ingest.agents._common import (
    TOOL_CALL,
    TRAJECTORY,
    Fields,
    FileContext,
    Probe,
    Record,
    TokenTally,
    decode_arguments,
    dumps,
    load_run,
    message_text,
    read_json,
    strip_suffix,
    type_name,
)
from trajlens.ingest.agents._pairing import ResultPairing
from trajlens.rows import RunData

FORMAT = "openhands-v0"

# Agent actions that are not tool calls. A message is still an assistant turn.
NON_TOOL_ACTIONS: frozenset[str] = frozenset({"message", "change_agent_state", "recall", "system", "null"})

# Action type -> tool name where it differs from the function the model called (execute_bash).
ACTION_TOOL_NAMES: dict[str, str] = {"run": "bash", "think": "think", "finish": "finish"}

# Keys of ``args`` that describe the event, not the call.
BOOKKEEPING_ARGS: frozenset[str] = frozenset({
    "thought", "blocking", "hidden", "confirmation_state", "is_input", "impl_source",
    "translated_ipython_code", "security_risk", "wait_for_response", "image_urls",
})

FILE_NAMES: tuple[str, ...] = ("traj_*.json",)
"""The name TheAgentCompany's and OpenAgentSafety's harnesses save a task's events under
(``save_trajectory_path``): such a file that is no event list (empty, another shape) is read and
named, not left out. Other names are free (``<session id>.json``, ``basic.json``): a file so
named that is empty or an object cannot be told from a note or a config beside the logs."""
_EVENT_RE = re.compile(r'"(action|observation)"\s*:\s*"')
_SOURCE_RE = re.compile(r'"source"\s*:\s*"(agent|user|environment)"')
_V1_KIND_RE = re.compile(r'"kind"\s*:\s*"\w+Event"')


def detect(target: Probe | Path | str) -> bool:
    """A ``.json`` file holding a list of action/observation events."""
    probe = Probe.of(target)
    if probe.suffix != ".json":
        return False
    head = probe.head
    if not head.lstrip().startswith("[") or _V1_KIND_RE.search(head):
        return False
    return bool(_EVENT_RE.search(head) and _SOURCE_RE.search(head))


def load_openhands_v0(paths: Any, *, run_id: str | None = None, strict: bool = True) -> RunData:
    """Load OpenHands V0 event-stream files, or folders of them, as one run."""
    return load_run(paths, fmt=FORMAT, detect=detect, parse=parse_file, run_id=run_id, strict=strict,
                    names=FILE_NAMES)


def parse_file(context: FileContext) -> Iterator[Record | InputError]:
    """One record per file: the agent's tool-call actions with their paired observations."""
    path = context.path
    file = str(path)
    events = read_json(path)
    if not isinstance(events, list):
        raise InputError(file, expected="a JSON list of OpenHands events", found=type_name(events))
    read = Fields(file)
    answers = ResultPairing(file)
    for index, event in enumerate(events):
        at = read.at(f"event {index}")
        if not isinstance(event, dict):
            raise at.error(None, "an event object", type_name(event))
        if "action" not in event and "observation" not in event:
            raise at.error("action", "an action or observation event", "neither key")
        event_id = at.identifier(event, "id", required=True)
        at.text(event, "action" if "action" in event else "observation", required=True)
        at.text(event, "source")
        for key in ("args", "extras", "tool_call_metadata"):
            at.mapping(event, key)
        if "observation" in event:
            answers.result(at.identifier(event, "cause"), event, f"event {index}", "cause")
        else:
            answers.call(event_id, index, f"event {index}")

    calls: list[dict[str, Any]] = []
    tally = TokenTally()
    turn_of_response: dict[str, int] = {}
    turn = -1
    finished = False
    agent_state = None
    replies: list[str] = []  # the agent's messages since its last tool call
    for index, event in enumerate(events):
        at = read.at(f"event {index}")
        if event.get("observation") == "agent_state_changed":
            state = at.text(event.get("extras") or {}, "agent_state", name="extras.agent_state")
            agent_state = state or agent_state
        if "action" not in event or event.get("source") != "agent":
            continue
        action_type = event["action"]
        metadata = event.get("tool_call_metadata") or {}
        response = at.mapping(metadata, "model_response", name="tool_call_metadata.model_response") or {}
        if action_type in NON_TOOL_ACTIONS and action_type != "message" and not metadata:
            continue
        response_id = at.text(response, "id", name="model_response.id") or f"event {index}"
        first_of_turn = response_id not in turn_of_response
        if first_of_turn:
            turn += 1
            turn_of_response[response_id] = turn
            tally.add(response.get("usage"), at)
        if action_type in NON_TOOL_ACTIONS:
            if action_type == "message" and (text := at.text(event.get("args") or {}, "content", name="args.content")):
                replies.append(text)
            continue
        finished = finished or action_type == "finish"
        replies = []
        answer = answers.of(index)
        call = _call(event, action_type, metadata, response, answer, turn_of_response[response_id], at,
                     read.at(answers.where(index)))
        calls.append(call | {"assistant_text": _turn_text(event, response, at) if first_of_turn else None})
    row = TRAJECTORY(
        task_id=strip_suffix(path.name),
        exit_status=agent_state or ("finished" if finished else None),
        num_turns=turn + 1,
        response_text="\n\n".join(replies) or None,
        **tally.columns(),
    )
    yield Record(row, calls, where=file, model=_model(events))


def _call(event: dict[str, Any], action_type: str, metadata: dict[str, Any], response: dict[str, Any],
          answer: dict[str, Any] | None, turn: int, read: Fields, read_answer: Fields) -> dict[str, Any]:
    """One action event as a call; ``read`` names the action's event in errors, ``read_answer``
    the observation's (a bad field of the observation is its own record's)."""
    args = event.get("args") or {}
    function_name = read.text(metadata, "function_name", name="tool_call_metadata.function_name")
    name = ACTION_TOOL_NAMES.get(action_type) or function_name or action_type
    raw = _raw_arguments(response, read.identifier(metadata, "tool_call_id", name="tool_call_metadata.tool_call_id"),
                         read)
    if raw is None:
        arguments_json = dumps({k: v for k, v in args.items() if k not in BOOKKEEPING_ARGS})
        well_formed = True
    else:
        decoded, arguments_json = decode_arguments(raw, read.file, read.record)
        well_formed = decoded is not None
    command = read.text(args, "command", name="args.command") if action_type == "run" else None
    observation = return_code = None
    if answer is not None:
        observation = read_answer.text(answer, "content")  # its text: anything else is its record's error
        extras = answer.get("extras") or {}
        meta = read_answer.mapping(extras, "metadata", name="extras.metadata") or {}
        return_code = read_answer.integer(meta, "exit_code", name="extras.metadata.exit_code", bounds=INT32)
    return TOOL_CALL(
        turn=turn,
        tool_name=name,
        arguments=arguments_json,
        command=command,
        observation=observation,
        return_code=return_code,
        format_error=not well_formed,
    )


def _turn_text(event: dict[str, Any], response: dict[str, Any], read: Fields) -> str | None:
    """What the model wrote in the turn of this action: its ``thought``, else the response's content."""
    thought = read.text(event.get("args") or {}, "thought", name="args.thought")
    if thought:
        return thought
    for choice in read.items(response, "choices", name="model_response.choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        text = message_text(message.get("content")) if isinstance(message, dict) else None
        if text:
            return text
    return None


def _raw_arguments(response: dict[str, Any], tool_call_id: Any, read: Fields) -> Any:
    for choice in read.items(response, "choices", name="model_response.choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        tool_calls = read.items(message, "tool_calls", name="choices.message.tool_calls") if isinstance(message, dict) else None
        for tool_call in tool_calls or []:
            if isinstance(tool_call, dict) and tool_call.get("id") == tool_call_id:
                function = read.mapping(tool_call, "function", name="tool_calls.function") or {}
                return function.get("arguments")
    return None


def _model(events: list[dict[str, Any]]) -> str | None:
    for event in events:
        metadata = event.get("tool_call_metadata")
        response = metadata.get("model_response") if isinstance(metadata, dict) else None
        if isinstance(response, dict) and isinstance(response.get("model"), str):
            return response["model"]
    return None

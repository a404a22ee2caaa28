"""OpenHands V0 event streams (a JSON list of events, as ``tests/runtime/trajs/*.json``).

Each event has an integer ``id`` and a ``source`` (``agent``, ``user``, ``environment``) and
is either an action (``action``: ``run``, ``edit``, ``read``, ``think``, ``finish``,
``message`` ...; its inputs under ``args``) or an observation (``observation``; ``cause`` is
the id of the action it answers, ``content`` its text, ``extras.metadata.exit_code`` the exit
code of a command). Actions issued through function calling carry ``tool_call_metadata``:
the function name, the tool call id and the raw ``model_response`` with its ``usage``.

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
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from trajlens.errors import InputError
from trajlens.ingest.agents._common import (
    FileContext,
    Record,
    TokenTally,
    call_arguments,
    dumps,
    int_or_none,
    load_run,
    read_json,
    sniff,
    strip_suffix,
    type_name,
)
from trajlens.model import RunData

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

_EVENT_RE = re.compile(r'"(action|observation)"\s*:\s*"')
_SOURCE_RE = re.compile(r'"source"\s*:\s*"(agent|user|environment)"')
_V1_KIND_RE = re.compile(r'"kind"\s*:\s*"\w+Event"')


def detect(path: Path) -> str | None:
    """``'openhands-v0'`` for a ``.json`` file holding a list of action/observation events."""
    path = Path(path)
    if path.suffix != ".json":
        return None
    head, _ = sniff(path)
    if not head.lstrip().startswith("[") or _V1_KIND_RE.search(head):
        return None
    return FORMAT if _EVENT_RE.search(head) and _SOURCE_RE.search(head) else None


def load_openhands_v0(paths: Any, *, run_id: str | None = None, strict: bool = True) -> RunData:
    """Load OpenHands V0 event-stream files, or folders of them, as one run."""
    return load_run(paths, fmt=FORMAT, detect=detect, parse=parse_file, run_id=run_id, strict=strict)


def parse_file(context: FileContext) -> Iterator[Record | InputError]:
    """One record per file: the agent's tool-call actions with their paired observations."""
    path = context.path
    file = str(path)
    events = read_json(path)
    if not isinstance(events, list):
        raise InputError(file, expected="a JSON list of OpenHands events", found=type_name(events))
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            raise InputError(file, record=f"event {index}", expected="an event object", found=type_name(event))
        if "action" not in event and "observation" not in event:
            raise InputError(file, record=f"event {index}", field="action", expected="an action or observation event",
                             found="neither key")
        if "id" not in event:
            raise InputError(file, record=f"event {index}", field="id", expected="an event id", found="no such key")
    answers = {e["cause"]: e for e in events if "observation" in e and e.get("cause") is not None}

    calls: list[dict[str, Any]] = []
    tally = TokenTally()
    turn_of_response: dict[str, int] = {}
    turn = -1
    finished = False
    agent_state = None
    for event in events:
        if event.get("observation") == "agent_state_changed":
            state = (event.get("extras") or {}).get("agent_state")
            agent_state = state if isinstance(state, str) else agent_state
        if "action" not in event or event.get("source") != "agent":
            continue
        action_type = event["action"]
        metadata = event.get("tool_call_metadata") if isinstance(event.get("tool_call_metadata"), dict) else {}
        response = metadata.get("model_response") if isinstance(metadata.get("model_response"), dict) else {}
        if action_type in NON_TOOL_ACTIONS and action_type != "message" and not metadata:
            continue
        response_id = response.get("id") if isinstance(response.get("id"), str) else f"event {event['id']}"
        if response_id not in turn_of_response:
            turn += 1
            turn_of_response[response_id] = turn
            tally.add(response.get("usage"))
        if action_type in NON_TOOL_ACTIONS:
            continue
        finished = finished or action_type == "finish"
        calls.append(_call(event, action_type, metadata, response, answers.get(event["id"]),
                           turn_of_response[response_id]))
    row = {
        "task_id": strip_suffix(path.name),
        "reward": None,
        "resolved": None,
        "exit_status": agent_state or ("finished" if finished else None),
        "num_turns": turn + 1,
        **tally.columns(),
    }
    yield Record(row, calls, where=file, model=_model(events))


def _call(event: dict[str, Any], action_type: str, metadata: dict[str, Any], response: dict[str, Any],
          answer: dict[str, Any] | None, turn: int) -> dict[str, Any]:
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    name = ACTION_TOOL_NAMES.get(action_type) or metadata.get("function_name") or action_type
    raw = _raw_arguments(response, metadata.get("tool_call_id"))
    if raw is None:
        arguments_json = dumps({k: v for k, v in args.items() if k not in BOOKKEEPING_ARGS})
        well_formed = True
    else:
        decoded, arguments_json = call_arguments(raw)
        well_formed = decoded is not None
    command = args.get("command") if action_type == "run" and isinstance(args.get("command"), str) else None
    observation = return_code = None
    if answer is not None:
        content = answer.get("content")
        observation = content if isinstance(content, str) else None
        extras = answer.get("extras") if isinstance(answer.get("extras"), dict) else {}
        meta = extras.get("metadata") if isinstance(extras.get("metadata"), dict) else {}
        return_code = int_or_none(meta.get("exit_code"))
    return {
        "turn": turn,
        "tool_name": name,
        "arguments": arguments_json,
        "command": command,
        "observation": observation,
        "return_code": return_code,
        "format_error": not well_formed,
    }


def _raw_arguments(response: dict[str, Any], tool_call_id: Any) -> Any:
    for choice in response.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        for tool_call in (message or {}).get("tool_calls") or []:
            if isinstance(tool_call, dict) and tool_call.get("id") == tool_call_id:
                function = tool_call.get("function") or {}
                return function.get("arguments")
    return None


def _model(events: list[dict[str, Any]]) -> str | None:
    for event in events:
        metadata = event.get("tool_call_metadata")
        response = metadata.get("model_response") if isinstance(metadata, dict) else None
        if isinstance(response, dict) and isinstance(response.get("model"), str):
            return response["model"]
    return None

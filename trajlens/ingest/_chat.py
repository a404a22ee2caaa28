"""A trajectory from a list of OpenAI-style chat messages, for the loaders of trainers and
harnesses that keep one (verifiers, SkyRL, rLLM, ART, OpenRLHF, inspect_ai after
:func:`trajlens.ingest.inspect_ai.openai_messages`).

The calls are read by the chat-log reader (:func:`trajlens.ingest.agents.openai_chat.conversation`):
one walker of assistant ``tool_calls`` and the ``tool`` results that answer them. This module
adds what a trainer's record says around the messages (ids, group, reward, channels).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trajlens.errors import InputError
from trajlens.ingest._fields import parse_json, type_name
from trajlens.ingest.agents._common import FileContext, Record


def chat_record(messages: Any, *, file: Path, where: str, trajectory_id: str, **row: Any) -> Record:
    """The trajectory of ``messages`` (a list of chat messages), its row updated with ``row``."""
    from trajlens.ingest.agents.openai_chat import conversation

    if not isinstance(messages, list):
        raise InputError(where, field="messages", expected="a list of chat messages", found=type_name(messages))
    messages = [_message(message, where, index) for index, message in enumerate(messages)]
    context = FileContext(path=file, source=str(file), trajectory_id=trajectory_id)
    record = conversation({"messages": messages}, context, trajectory_id, where)
    record.row.update(row)
    return record


def _message(message: Any, where: str, index: int) -> Any:
    """A message with its ``tool_calls`` in the OpenAI shape ``{id, function: {name, arguments}}``."""
    if not isinstance(message, dict) or not isinstance(message.get("tool_calls"), list):
        return message
    calls = [tool_call(call, where, f"message {index}, call {position}")
             for position, call in enumerate(message["tool_calls"])]
    return {**message, "tool_calls": calls}


def tool_call(call: Any, where: str, record: str) -> Any:
    """One tool call in the OpenAI shape, from any of the shapes trainers write: the OpenAI
    object, that object as a JSON string (verifiers' ``sanitize_tool_calls``), a flat
    ``{id, name, arguments}`` (verifiers' ``ToolCall``) or ``{id, function: <name>, arguments}``
    (inspect_ai's ``ToolCall``). Anything else is returned as it is, for the chat reader to name."""
    if isinstance(call, str):
        call = parse_json(call, where, record=record)
    if not isinstance(call, dict):
        return call
    function = call.get("function")
    if isinstance(function, dict):
        return call
    name = function if isinstance(function, str) else call.get("name")
    if name is None:
        return call
    return {"id": call.get("id"), "function": {"name": name, "arguments": call.get("arguments")}}


__all__ = ["chat_record", "tool_call"]

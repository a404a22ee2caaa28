"""A trajectory from a list of OpenAI-style chat messages, for the loaders of trainers and
harnesses that keep one (verifiers, SkyRL, rLLM, ART, OpenRLHF, inspect_ai after
:func:`trajlens.ingest.inspect_ai.openai_messages`).

The calls are read by the chat-log reader (:func:`trajlens.ingest.agents.openai_chat.conversation`):
one walker of assistant ``tool_calls`` and the ``tool`` results that answer them. This module
adds what a trainer's record says around the messages (ids, group, reward, channels), the
model's own text of each turn (``assistant_text`` on the turn's first call) and its text after
the last call (``response_text``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trajlens.errors import InputError
from trajlens.ingest._fields import parse_json, type_name
from trajlens.ingest.agents._common import FileContext, Record, message_text


def chat_record(messages: Any, *, file: Path, where: str, trajectory_id: str, **row: Any) -> Record:
    """The trajectory of ``messages`` (a list of chat messages), its row updated with ``row``."""
    from trajlens.ingest.agents.openai_chat import conversation

    if not isinstance(messages, list):
        raise InputError(where, field="messages", expected="a list of chat messages", found=type_name(messages))
    messages = [_message(message, where, index) for index, message in enumerate(messages)]
    context = FileContext(path=file, source=str(file), trajectory_id=trajectory_id)
    record = conversation({"messages": messages}, context, trajectory_id, where)
    texts = turn_texts(messages)
    first_of_turn: set[int] = set()
    for call in record.tool_calls:
        if call["turn"] not in first_of_turn:
            first_of_turn.add(call["turn"])
            if call.get("assistant_text") is None:
                call["assistant_text"] = texts[call["turn"]] if call["turn"] < len(texts) else None
    if record.row.get("response_text") is None:
        record.row["response_text"] = final_text(messages)
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


def turn_texts(messages: list[Any]) -> list[str | None]:
    """The text of each assistant message, in order (``None`` where it has none): its
    reasoning (``reasoning_content``, where logged) before its content."""
    texts = []
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant":
            parts = [message.get("reasoning_content"), message_text(message.get("content"))]
            texts.append("\n".join(p for p in parts if isinstance(p, str) and p) or None)
    return texts


def final_text(messages: list[Any]) -> str | None:
    """The last assistant message's text when it issued no call (the answer), else ``None``."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "assistant":
            if message.get("tool_calls") or message.get("function_call"):
                return None
            return message_text(message.get("content")) or None
    return None


__all__ = ["chat_record", "final_text", "tool_call", "turn_texts"]

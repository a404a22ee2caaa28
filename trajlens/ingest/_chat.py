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
from trajlens.ingest._fields import type_name
from trajlens.ingest.agents._common import FileContext, Record, message_text


def chat_record(messages: Any, *, file: Path, where: str, trajectory_id: str, **row: Any) -> Record:
    """The trajectory of ``messages`` (a list of chat messages), its row updated with ``row``."""
    from trajlens.ingest.agents.openai_chat import conversation

    if not isinstance(messages, list):
        raise InputError(where, field="messages", expected="a list of chat messages", found=type_name(messages))
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


def turn_texts(messages: list[Any]) -> list[str | None]:
    """The text of each assistant message, in order (``None`` where it has none)."""
    return [message_text(m.get("content")) or None for m in messages
            if isinstance(m, dict) and m.get("role") == "assistant"]


def final_text(messages: list[Any]) -> str | None:
    """The last assistant message's text when it issued no call (the answer), else ``None``."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "assistant":
            if message.get("tool_calls") or message.get("function_call"):
                return None
            return message_text(message.get("content")) or None
    return None


__all__ = ["chat_record", "final_text", "turn_texts"]

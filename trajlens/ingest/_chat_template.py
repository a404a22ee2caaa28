"""Tool calls and turns recovered from a decoded Qwen ChatML / Hermes-style response.

Trainers such as verl dump the response as text, so the structure of a multi-turn rollout
has to be read back out of the chat template. Two renderings occur:

* with special tokens kept, turns are delimited by ``<|im_start|>ROLE`` and ``<|im_end|>``;
* with ``skip_special_tokens=True`` (what verl's ``rollout_data_dir`` dump uses) those markers
  vanish and only the role word survives, e.g.
  ``...</tool_call>user\\n<tool_response>\\n...\\n</tool_response>\\nassistant\\n<think>...``.
  A bare role word is only taken as a turn boundary in that tool-call context (``user`` or
  ``tool`` directly before ``<tool_response>``; ``assistant`` directly after
  ``</tool_response>``), so prose that happens to say "user" is never split.

Tool calls follow the Hermes convention, ``<tool_call>{"name": ..., "arguments": {...}}
</tool_call>``, matched like verl's ``HermesToolParser`` (``<tool_call>(.*?)</tool_call>``
over the whole assistant text, ``<think>`` blocks included: the harness executes a call
written inside a think block too). Departures from that parser:

* a call it would drop (JSON that does not parse, no ``name``, no ``arguments``, or a
  ``<tool_call>`` cut off before ``</tool_call>``) is kept with ``format_error=True`` and the
  raw body as ``{"raw": ...}``; its name is ``'<unparsed>'`` unless the JSON gave one;
* ``arguments`` given as a string holding a JSON object is decoded to that object; any other
  non-object ``arguments`` is kept as ``{"raw": <the call body>}`` (the harness would pass it on,
  so it is not a format error).

Observations: the ``<tool_response>`` blocks of a tool turn are attached, in order, to the
well-formed calls of the assistant turn just before it. Calls with a format error get none
(the harness never ran them); responses beyond the number of pending calls are counted in
``unmatched_observations`` and otherwise dropped. Text outside ``<tool_response>`` in a user
turn (an interaction's feedback, say) is only recognised when the markers were kept.

Turns: ``num_turns`` counts assistant turns that contain any non-whitespace text, and is at
least 1 (an empty response is one turn that ended at once).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

UNPARSED_TOOL_NAME = "<unparsed>"

# Turn boundaries: an explicit ChatML header, or a bare role word in tool-call context.
_HEADER = re.compile(
    r"<\|im_start\|>(?P<role>[A-Za-z_]+)[ \t]*\n?"
    r"|(?<=</tool_response>)\s*(?P<assistant>assistant)\n"
    r"|(?:^|(?<=\n)|(?<=>))(?P<tool>user|tool)\n(?=\s*<tool_response>)"
)
_END_MARKERS = re.compile(r"<\|im_end\|>|<\|endoftext\|>")
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(</tool_call>|\Z)", re.DOTALL)
_TOOL_RESPONSE = re.compile(r"<tool_response>(.*?)(?:</tool_response>|\Z)", re.DOTALL)
_THINK = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.DOTALL)

_ASSISTANT = "assistant"
_OBSERVATION_ROLES = frozenset({"user", "tool"})


@dataclass(frozen=True)
class ParsedToolCall:
    """One ``<tool_call>`` block of an assistant turn."""

    turn: int
    """Assistant turn that issued the call, from 0."""
    tool_name: str
    """Name the call gave, or ``'<unparsed>'``."""
    arguments: str
    """Arguments as JSON object text (``{"raw": body}`` when they could not be read)."""
    arguments_object: dict | None
    """The decoded arguments, or None when they were not a JSON object."""
    format_error: bool
    """True when the harness would have rejected the call instead of running it."""
    observation: str | None
    """Text of the ``<tool_response>`` attached to the call, if any."""


@dataclass(frozen=True)
class ParsedResponse:
    """Structure recovered from one decoded response."""

    num_turns: int
    """Assistant turns with any text (at least 1)."""
    tool_calls: tuple[ParsedToolCall, ...]
    """Every tool call, in order."""
    reasoning: tuple[str, ...]
    """Text of each ``<think>`` block, in order."""
    unmatched_observations: int
    """Tool responses that had no pending call to attach to."""


@dataclass(frozen=True)
class _Segment:
    role: str
    text: str


def parse_response(text: str) -> ParsedResponse:
    """Split ``text`` (a decoded response) into turns, tool calls, observations and reasoning."""
    turn = -1
    calls: list[dict] = []
    pending: list[dict] = []
    reasoning: list[str] = []
    unmatched = 0
    for segment in _segments(text):
        if segment.role == _ASSISTANT:
            if not segment.text.strip():
                continue
            turn += 1
            pending = []
            reasoning.extend(m.group(1) for m in _THINK.finditer(segment.text))
            for match in _TOOL_CALL.finditer(segment.text):
                call = {"turn": turn, **_read_call(match.group(1), terminated=bool(match.group(2)))}
                call["observation"] = None
                calls.append(call)
                if not call["format_error"]:
                    pending.append(call)
        elif segment.role in _OBSERVATION_ROLES:
            for match in _TOOL_RESPONSE.finditer(segment.text):
                if pending:
                    pending.pop(0)["observation"] = _strip_one_newline(match.group(1))
                else:
                    unmatched += 1
    return ParsedResponse(
        num_turns=max(turn + 1, 1),
        tool_calls=tuple(ParsedToolCall(**call) for call in calls),
        reasoning=tuple(reasoning),
        unmatched_observations=unmatched,
    )


def _segments(text: str) -> list[_Segment]:
    """Cut ``text`` at turn headers; the text before the first header is the model's own turn."""
    segments = []
    role, start = _ASSISTANT, 0
    for match in _HEADER.finditer(text):
        segments.append(_Segment(role, _END_MARKERS.sub("", text[start:match.start()])))
        role = (match.group("role") or match.group("assistant") or match.group("tool")).lower()
        start = match.end()
    segments.append(_Segment(role, _END_MARKERS.sub("", text[start:])))
    return segments


def _read_call(body: str, *, terminated: bool) -> dict:
    raw = json.dumps({"raw": body}, ensure_ascii=False)
    unparsed = {"tool_name": UNPARSED_TOOL_NAME, "arguments": raw, "arguments_object": None, "format_error": True}
    if not terminated:
        return unparsed
    try:
        call = json.loads(body)
    except (ValueError, RecursionError):  # nested past what the parser (verl's too) can read
        return unparsed
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return unparsed
    name = call["name"]
    if "arguments" not in call:
        return {**unparsed, "tool_name": name}
    arguments = call["arguments"]
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)
        except (ValueError, RecursionError):
            decoded = None
        arguments = decoded if isinstance(decoded, dict) else arguments
    if not isinstance(arguments, dict):
        return {"tool_name": name, "arguments": raw, "arguments_object": None, "format_error": False}
    return {
        "tool_name": name,
        "arguments": json.dumps(arguments, ensure_ascii=False),
        "arguments_object": arguments,
        "format_error": False,
    }


def _strip_one_newline(text: str) -> str:
    # The template wraps the tool output as "<tool_response>\n{output}\n</tool_response>".
    if text.startswith("\n"):
        text = text[1:]
    if text.endswith("\n"):
        text = text[:-1]
    return text

"""A per-row reference classifier, slow and easy to follow.

:func:`classify_command_slow` classifies one call with plain Python ``re`` and loops, one
rewrite after another, in the order :mod:`trajlens.classify._vectorised` applies them to whole
columns. It exists to check the vectorised classifier (tests and ``benchmarks/bench_classify.py``
assert identical labels) and to time it against; never call it on a whole table.

Where it departs from a real shell parser (both classifiers share these departures): quotes
are matched left to right without tracking nesting inside ``$(...)``; a heredoc is recognised
only when ``<<`` starts a word and its delimiter starts with a letter; at most three heredocs
per command are cut out; ``if``/``for``/``while`` bodies are read as plain segments.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from trajlens.classify import _syntax as sx
from trajlens.classify.rules import (
    NO_RULE,
    NOT_ACTIONS,
    PIPE_FILTERS,
    PRIORITY,
    REDIRECT_RULE,
    SHELL_ARGUMENT_KEYS,
    SHELL_RULES,
    SHELL_RULES_SOURCE,
    WRAPPER_PATTERN,
)
from trajlens.classify.tool_map import SHELL, ToolEntry, ToolMapLike, resolve_tool_map



@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern[str]:
    return sx.python_regex(pattern)


def _sub(text: str, rewrite: tuple[str, str], count: int = 0) -> str:
    pattern, replacement = rewrite
    return _compiled(pattern).sub(sx.python_replacement(replacement), text, count=count)


def _json_string(arguments: str | None, key: str) -> str | None:
    """The value of a top-level key of a JSON object, as Polars' ``json_path_match`` gives it:
    a string as is, any other value as compact JSON; None for null, a missing key, a value
    holding a surrogate, or text that is not a JSON object."""
    try:
        value = json.loads(arguments) if arguments else None
    except (TypeError, ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or value.get(key) is None or _depth(value) > sx.MAX_JSON_DEPTH:
        return None
    found = value[key]
    if isinstance(found, bool) or not isinstance(found, (int, str)):
        try:
            found = json.dumps(found, separators=(",", ":"), ensure_ascii=False)
        except (ValueError, RecursionError):
            return None
    elif isinstance(found, int):
        found = str(found) if -(2**63) <= found < 2**64 else repr(float(found))
    return None if _has_surrogate(found) else found


def _depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0, ``{}`` is 1)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth + 1)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= char <= "\udfff" for char in text)


@dataclass(frozen=True)
class CallExplanation:
    """The class of one tool call and what decided it (the columns of
    ``classify_calls(..., explain=True)``)."""

    klass: str
    """Primary behaviour class."""
    tool_entry: str | None
    """Id of the tool-map entry the call matched; None when none did."""
    decided_by: str
    """``tool map: <id>``, ``shell rule <name>``, ``shell: no action``, ``shell tool without a
    command`` or ``unmapped tool``."""
    rule_source: str | None
    """The tool-map file of the entry, or ``trajlens/classify/rules.py`` for shell rules."""


def bounded_command(command: str) -> str:
    """The part of a command that is classified: its first MAX_COMMAND_CHARS characters, with
    the ASCII separators read as spaces."""
    return _compiled(sx.SEPARATOR_CONTROLS).sub(" ", command[: sx.MAX_COMMAND_CHARS])


def _entry_matches(entry: ToolEntry, tool: str, arguments: str | None, command: str | None) -> bool:
    if entry.names:
        if tool not in entry.names:
            return False
    elif not _compiled(entry.pattern).search(tool):
        return False
    for key, pattern in entry.arguments:
        value = _json_string(arguments, key)
        if value is None or not _compiled(pattern).search(_compiled(sx.SEPARATOR_CONTROLS).sub(" ", value)):
            return False
    return entry.command is None or (command is not None and _compiled(entry.command).search(command) is not None)


def explain_call_slow(
    tool_name: str | None, arguments: str | None, command: str | None, tool_map: ToolMapLike = None
) -> CallExplanation:
    """Classify one tool call (format errors are the caller's concern) and say what decided."""
    tool = (tool_name or "").lower()
    text = None if command is None else bounded_command(command)
    entry = next((e for e in resolve_tool_map(tool_map).entries if _entry_matches(e, tool, arguments, text)), None)
    if entry is not None and entry.klass != SHELL:
        return CallExplanation(entry.klass, entry.id, f"tool map: {entry.id}", entry.source)
    if text is None:
        for key in SHELL_ARGUMENT_KEYS:
            text = _json_string(arguments, key)
            if text is not None:
                break
        if text is not None and _compiled(sx.ARGV_STRINGS).search(text):
            text = argv_command(json.loads(text))
        text = None if text is None else bounded_command(text)
    entry_id = entry.id if entry else None
    if text is not None:
        actions = [a for a in explain_command(text) if a.klass is not None]
        if not actions:
            return CallExplanation("other", entry_id, "shell: no action", SHELL_RULES_SOURCE)
        first = min(actions, key=lambda a: PRIORITY[cast(str, a.klass)])
        return CallExplanation(cast(str, first.klass), entry_id, f"shell rule {first.rule}", SHELL_RULES_SOURCE)
    if entry is not None:
        return CallExplanation("other", entry_id, "shell tool without a command", entry.source)
    return CallExplanation("other", None, "unmapped tool", None)


def classify_command_slow(
    tool_name: str | None, arguments: str | None, command: str | None, tool_map: ToolMapLike = None
) -> str:
    """The primary behaviour class of one tool call (format errors are the caller's concern)."""
    return explain_call_slow(tool_name, arguments, command, tool_map).klass


def argv_command(argv: list[str]) -> str:
    """One command line from a command logged as argv: ``[bash, -lc, script]`` is the script,
    other words are joined, quoting those that are not plain words."""
    if (len(argv) == 3 and _compiled(sx.ARGV_SHELL).search(argv[0])
            and _compiled(sx.ARGV_SCRIPT_FLAG).search(argv[1])):
        return argv[2]
    return " ".join(_quote_word(word) for word in argv)


def _quote_word(word: str) -> str:
    if _compiled(sx.ARGV_PLAIN_WORD).search(word):
        return word
    if "'" not in word:
        return f"'{word}'"
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def shell_action_classes(command: str) -> list[str]:
    """The class of each action of a shell command, in order."""
    return [klass for klass in (classify_action(stage, index) for stage, index in split_actions(command)) if klass]


def normalise_command(command: str) -> str:
    """Whole-command rewrites: blocks, comments, wrappers, heredocs, quotes, separators."""
    text = command.replace("\r\n", "\n").strip()
    text = _sub(text, sx.SWE_AGENT_BLOCK, count=1)
    text = _sub(_sub(text, sx.COMMENT_LINES), sx.CONTINUATIONS)
    text = _sub(_sub(text, sx.UNWRAP_SINGLE), sx.UNWRAP_DOUBLE)
    text = _sub(text, sx.HERESTRING)
    for _ in range(sx.HEREDOC_PASSES):
        found = _compiled(sx.HEREDOC_DELIMITER).search(text)
        if found is None:
            break
        cut = _cut_heredoc(text, found.group(1))
        text = _sub(text, sx.HEREDOC_UNTERMINATED, count=1) if cut is None else cut
    for rewrite in (sx.COMMAND_SUBSTITUTION, sx.PLAIN_QUOTED, sx.QUOTED, sx.TRAILING_COMMENT):
        text = _sub(text, rewrite)
    for rewrite in (sx.CHAIN_SEPARATORS, sx.PIPES, *sx.REDIRECT_AMPERSANDS, sx.BACKGROUND):
        text = _sub(text, rewrite)
    return text.replace(sx.AMP, "&")


def _cut_heredoc(text: str, delimiter: str) -> str | None:
    """The text with its first ``<<delimiter`` heredoc replaced by the marker; None when the
    heredoc has no terminating line.

    The same split as :func:`trajlens.classify._syntax.heredoc_pattern` (the earliest operator,
    the earliest terminator line after its line), found in three linear steps: that single
    pattern backtracks quadratically in Python's ``re`` on text full of unterminated operators.
    """
    operator = _compiled(r"(?:^|(?<=\s))<<-?[ \t]*['\"]?" + delimiter + r"['\"]?").search(text)
    if operator is None:
        return None
    line_end = text.find("\n", operator.end())
    if line_end < 0:
        return None
    terminator = _compiled(r"(?m)^[ \t]*" + delimiter + r"[ \t]*(?:\n|\Z)").search(text, line_end + 1)
    if terminator is None:
        return None
    after = text[terminator.end():] if text[terminator.end() - 1:terminator.end()] == "\n" else ""
    return f"{text[:operator.start()]} {sx.HEREDOC_MARK} {text[operator.end():line_end]}\n{after}"


def split_actions(command: str) -> list[tuple[str, int]]:
    """(stage text, stage number within its pipeline) for every stage of every segment."""
    stages: list[tuple[str, int]] = []
    for segment in normalise_command(command).split(sx.SEGMENT):
        stages.extend((stage, index) for index, stage in enumerate(segment.split(sx.PIPE)))
    return stages


def normalise_action(stage: str) -> tuple[str, list[str], bool]:
    """(normalised text, redirection targets, run through xargs) of one stage."""
    action = _sub(_sub(stage.strip(), sx.LEADING_SYNTAX), sx.TRAILING_SYNTAX)
    action = _sub(_sub(action, sx.FD_DUPLICATION), sx.DEVICE_REDIRECT)
    writes = [_sub(target, sx.FILE_REDIRECT_TARGET) for target in _compiled(sx.FILE_REDIRECT).findall(action)]
    action = _compiled(sx.FILE_REDIRECT).sub("", action)
    action = _sub(_sub(action, sx.INPUT_REDIRECT).strip(), sx.TRAILING_SYNTAX)
    for _ in range(sx.WRAPPER_PASSES):
        action = _sub(_sub(action, sx.GENERIC_BIN), sx.VENV_BIN)
        action = _compiled(WRAPPER_PATTERN).sub("", action, count=1)
    via_xargs = _compiled(sx.XARGS).search(action) is not None
    action = _compiled(sx.XARGS).sub("", action, count=1)
    for _ in range(sx.WRAPPER_PASSES):
        action = _sub(_sub(action, sx.GENERIC_BIN), sx.VENV_BIN)
        action = _compiled(WRAPPER_PATTERN).sub("", action, count=1)
    for rewrite in (sx.COVERAGE_RUN, sx.INTERPRETER, sx.PYTEST_ALIAS, sx.WHITESPACE):
        action = _sub(action, rewrite)
    return action.strip(), writes, via_xargs


def classify_action(stage: str, index: int) -> str | None:
    """The class of one pipeline stage; None when it is not an action."""
    return explain_action(stage, index).klass


@dataclass(frozen=True)
class ActionExplanation:
    """Why one pipeline stage got its class."""

    stage: str
    """The stage as split from the command (after quotes and heredocs were hidden)."""
    normalised: str
    """The text the rules were matched against."""
    klass: str | None
    """Its class; None when the stage is not an action."""
    reason: str
    """The rule that matched, or why the stage is not an action."""
    rule: str | None = None
    """Name of the rule behind ``klass`` (``redirect-to-file`` when an output redirection made
    it an edit, ``no-rule`` when no rule matched); None when the stage is not an action."""


def explain_action(stage: str, index: int) -> ActionExplanation:
    """Classify one pipeline stage and say which rule decided."""
    action, writes, via_xargs = normalise_action(stage)
    head = action.split(" ", 1)[0] if action else None
    if not head or head in NOT_ACTIONS or _compiled(sx.ASSIGNMENT_ONLY).search(action):
        return ActionExplanation(stage, action, None, "not an action (shell state or syntax)")
    if index > 0 and not via_xargs and head in PIPE_FILTERS and not writes:
        return ActionExplanation(stage, action, None, "not an action (filters piped input)")
    klass, reason, rule_name = "other", "no rule matched", NO_RULE
    for rule in SHELL_RULES:
        text = _compiled(rule.strip).sub(" ", action) if rule.strip else action
        if _compiled(rule.pattern).search(text):
            klass, reason, rule_name = rule.klass, f"rule {rule.name}", rule.name
            break
    if writes and PRIORITY[klass] > PRIORITY["edit"]:
        klass, reason = "edit", f"{reason}; output redirected into {', '.join(writes)}"
        rule_name = REDIRECT_RULE
    return ActionExplanation(stage, action, klass, reason, rule_name)


def explain_command(command: str) -> list[ActionExplanation]:
    """Every stage of a shell command with its class and the rule behind it::

        >>> [(e.normalised, e.klass) for e in explain_command("cd /x && pytest -k foo | tail")]
        [('cd /x', None), ('pytest -k foo', 'test_targeted'), ('tail', None)]
    """
    return [explain_action(stage, index) for stage, index in split_actions(command)]


def classify_rows_slow(rows: Any, tool_map: ToolMapLike = None) -> list[str | None]:
    """Primary classes of an iterable of dicts with tool_name, arguments, command and
    (optionally) format_error: the reference for :func:`trajlens.classify.classify_calls`."""
    return [
        None if row.get("format_error")
        else classify_command_slow(row["tool_name"], row["arguments"], row["command"], tool_map)
        for row in rows
    ]

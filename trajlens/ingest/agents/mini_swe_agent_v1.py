"""mini-swe-agent v1 trajectories (``*.traj.json``, ``trajectory_format: "mini-swe-agent-1"``).

The agent speaks plain text: each assistant message holds a THOUGHT and, when well formed,
exactly one fenced bash block, which is the action. The harness answers with the next
``user`` message: ``<returncode>N</returncode>`` and the ``<output>`` for an executed
command, a timeout notice, the format-error template when the message held no bash block
or several, or the submission (``git diff``) after the submit command.

How the harness is matched (``minisweagent.agents.default.DefaultAgent.parse_action``):

* actions are ``re.findall(action_regex, content, re.DOTALL)`` with the logged
  ``info.config.agent.action_regex`` or the default ``r"```bash\\s*\\n(.*?)\\n```"``;
  the logged pattern is data, so it runs under the ``regex`` package's timeout
  (:attr:`~trajlens.limits.Limits.regex_seconds` per message); a pattern that does not
  compile, runs out of time or is no string is replaced by the default one, and the file's problems say so
  (a note: the trajectory is kept);
* exactly one match is executed, stripped; any other count raises ``FormatError``. A match
  whose first group takes no part in it (``(x)?`` unmatched) has no action: the turn is
  read as a format error (the harness's ``findall`` would run an empty command).

Each assistant message is one turn and yields one tool call named ``bash``: the executed
command, or, for a rejected message, a call with ``format_error=True`` whose command is the
raw first block (``None`` when there was none). Rejected calls were never executed.

``assistant_text`` is the message without its fenced blocks: the model's THOUGHT.
``observation`` is the harness's reply verbatim (tags included), ``return_code`` the number
in ``<returncode>`` where there is one. ``model_tokens`` sums ``completion_tokens`` of the
per-call ``extra.response.usage`` and ``reasoning_tokens`` its ``reasoning_tokens`` where
logged; both are ``None`` when no call logged usage. Verdicts: see
:mod:`trajlens.ingest.agents._mini_swe_agent`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import regex

from trajlens.errors import InputError
from trajlens import limits
from trajlens.ingest.agents import _mini_swe_agent as mini
from trajlens.ingest.agents._common import TOOL_CALL, FileContext, Probe, Record, dumps, load_run, message_text
from trajlens.ingest.tools import observed_return_code
from trajlens.rows import RunData

FILE_NAMES = mini.FILE_NAMES
FORMAT = "mini-swe-agent-v1"
TRAJECTORY_FORMAT = "mini-swe-agent-1"
DEFAULT_ACTION_REGEX = r"```bash\s*\n(.*?)\n```"
FENCED_BLOCK = re.compile(r"```[^\n]*\n.*?```", re.DOTALL)
"""A fenced code block of a message: the action, kept as the command; the rest is the THOUGHT."""


def detect(target: Probe | Path | str) -> bool:
    """A file whose ``trajectory_format`` is ``mini-swe-agent-1``."""
    return mini.trajectory_format(Probe.of(target)) == TRAJECTORY_FORMAT


def load_mini_swe_agent_v1(paths: Any, *, run_id: str | None = None, strict: bool = True) -> RunData:
    """Load mini-swe-agent v1 trajectory files, or folders of them, as one run."""
    return load_run(
        paths, fmt=FORMAT, detect=detect, parse=parse_file, run_id=run_id, strict=strict,
        select=mini.select_scored_runs, trajectory_ids=mini.run_task_ids, names=FILE_NAMES,
    )


def parse_file(context: FileContext) -> Iterator[Record | InputError]:
    """One record per file: the trajectory and one call per assistant message."""
    path = context.path
    data, messages = mini.load_document(path, TRAJECTORY_FORMAT)
    actions = ActionPattern(_action_regex(data), str(path))
    calls: list[dict[str, Any]] = []
    turn = -1
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        turn += 1
        content = message_text(message.get("content")) or ""
        blocks = actions.find(content)
        reply = messages[index + 1] if index + 1 < len(messages) else None
        observation = message_text(reply.get("content")) if reply and reply["role"] == "user" else None
        thought = FENCED_BLOCK.sub("", content).strip() or None
        if len(blocks) == 1 and blocks[0] is not None:
            command = blocks[0].strip()
            calls.append(_call(turn, command, observation, observed_return_code(observation), False, thought))
        else:
            command = blocks[0] if blocks else None
            calls.append(_call(turn, command, observation, None, True, thought))
    unread: list[InputError] = []
    row = mini.trajectory_row(data, path, messages, num_turns=turn + 1, unread=unread)
    notes = [actions.fallback] if actions.fallback is not None else []
    yield Record(row, calls, where=str(path), model=mini.model_name(data), notes=notes, unread=unread)


def _call(turn: int, command: str | None, observation: str | None, return_code: int | None,
          format_error: bool, thought: str | None) -> dict[str, Any]:
    return TOOL_CALL(
        assistant_text=thought,
        turn=turn,
        tool_name="bash",
        arguments=dumps({} if command is None else {"command": command}),
        command=command,
        observation=observation,
        return_code=return_code,
        format_error=format_error,
    )


class ActionPattern:
    """The harness's action pattern from the log, applied with a time limit.

    Its first group (or the whole match) is the action. When the logged pattern does not
    compile or runs out of time on a message, the harness's default pattern takes over for the
    rest of the file and :attr:`fallback` holds the note that says so.
    """

    def __init__(self, pattern: Any, file: str) -> None:
        self.file = file
        self.fallback: InputError | None = None
        self.timeout = limits.current().regex_seconds
        if not isinstance(pattern, str):
            self._fall_back(pattern, f"is no pattern ({type(pattern).__name__}, not a string)")
            return
        try:
            self.pattern = regex.compile(pattern, regex.DOTALL)
        except (regex.error, RecursionError, OverflowError, ValueError) as error:
            self._fall_back(pattern, f"does not compile ({error})")

    def find(self, content: str) -> list[str | None]:
        """The action of each match; ``None`` where the pattern's group took no part in it
        (a turn without a readable action: a format error)."""
        try:
            return self._find(content)
        except TimeoutError:
            self._fall_back(self.pattern.pattern, f"ran past {self.timeout:g} s on one message")
            return self._find(content)

    def _find(self, content: str) -> list[str | None]:
        group = 1 if self.pattern.groups else 0
        return [match.group(group) for match in self.pattern.finditer(content, timeout=self.timeout)]

    def _fall_back(self, pattern: Any, why: str) -> None:
        self.fallback = InputError(self.file, f"the logged action_regex {why}; read with the default pattern instead",
                                   field="info.config.agent.action_regex",
                                   found=pattern if isinstance(pattern, str) else repr(pattern))
        self.pattern = regex.compile(DEFAULT_ACTION_REGEX, regex.DOTALL)


def _action_regex(data: dict[str, Any]) -> Any:
    """The logged ``info.config.agent.action_regex``, or the default pattern when none is logged;
    a logged value that is no string is returned as it is, for :class:`ActionPattern` to note."""
    config = (data.get("info") or {}).get("config")
    agent = config.get("agent") if isinstance(config, dict) else None
    regex = agent.get("action_regex") if isinstance(agent, dict) else None
    return DEFAULT_ACTION_REGEX if regex is None or regex == "" else regex

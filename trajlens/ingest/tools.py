"""Which tools run shell commands, and how their command line is read from the arguments."""

from __future__ import annotations

import re
import shlex
from typing import Any

from trajlens.limits import INT32

SHELL_TOOLS: frozenset[str] = frozenset({
    "bash", "execute_bash", "shell", "run", "run_shell_command", "terminal", "execute_command", "run_command",
})
"""Tool names whose ``command`` (or ``cmd``) argument is a shell command line, across harnesses
(SWE-agent and mini-swe-agent ``bash``, OpenHands ``execute_bash``, Codex ``shell``, Gemini CLI
``run_shell_command``, verl tool agents ``run``/``terminal``)."""

COMMAND_KEYS: tuple[str, ...] = ("command", "cmd")


def shell_command(tool_name: str, arguments: dict[str, Any] | None) -> str | None:
    """The command line of a shell-tool call (an argv list is joined), else ``None``."""
    if tool_name not in SHELL_TOOLS or not isinstance(arguments, dict):
        return None
    for key in COMMAND_KEYS:
        value = arguments.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(isinstance(part, str) for part in value):
            return shlex.join(value)
    return None


RETURN_CODE_RE = re.compile(r"<returncode>\s*(-?\d{1,12})\s*</returncode>")
"""The exit status a tool output opens with, as mini-swe-agent writes it (``<returncode>N</returncode>``
before the ``<output>``) and the environments built on it pass back in tool messages."""


def observed_return_code(observation: str | None) -> int | None:
    """The return code a tool output opens with (``<returncode>N</returncode>``), where it
    does and it fits the column (a longer digit string is not an exit status); else ``None``."""
    match = RETURN_CODE_RE.match(observation.lstrip()) if observation else None
    if match is None:
        return None
    value = int(match.group(1))
    return value if INT32[0] <= value <= INT32[1] else None


__all__ = ["COMMAND_KEYS", "RETURN_CODE_RE", "SHELL_TOOLS", "observed_return_code", "shell_command"]

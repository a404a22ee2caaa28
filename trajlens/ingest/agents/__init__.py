"""Loaders for the logs coding agents write: one module per format.

========================  ============================================================
``mini-swe-agent-v1``     ``*.traj.json``, ``trajectory_format: "mini-swe-agent-1"``
``mini-swe-agent-v2``     ``*.traj.json``, ``trajectory_format: "mini-swe-agent-1.1"``
``swe-agent``             SWE-agent ``*.traj``
``openhands-v0``          OpenHands V0 event lists (``action``/``observation`` events)
``openhands-v1``          OpenHands V1 SDK events (``state_*.json``, ``traj_*.json``)
``openai-chat``           OpenAI-style chat messages with ``tool_calls`` (JSON or JSONL)
========================  ============================================================

Every loader is ``load_<format>(paths, *, run_id=None, strict=True) -> RunData``: ``paths`` is
a file, a directory (walked for files of that format) or a list of them, loaded as one run
whose id defaults to a slug of the file or directory name. Strict mode raises the first
:class:`~trajlens.errors.InputError`; lenient mode skips the bad file (or JSONL line) and
returns it in ``RunData.problems``.

:data:`FORMATS` maps each format name to its ``(detect, load)`` pair; ``detect(path)``
returns the name when it recognises the file from its name and first bytes, else ``None``.
:func:`load_agent_logs` picks the format itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, NamedTuple

from trajlens.errors import ConfigError, InputError
from trajlens.ingest.agents import (
    mini_swe_agent_v1,
    mini_swe_agent_v2,
    openai_chat,
    openhands_v0,
    openhands_v1,
    swe_agent,
)
from trajlens.ingest.agents._common import as_paths, walk
from trajlens.ingest.agents.mini_swe_agent_v1 import load_mini_swe_agent_v1
from trajlens.ingest.agents.mini_swe_agent_v2 import load_mini_swe_agent_v2
from trajlens.ingest.agents.openai_chat import load_openai_chat
from trajlens.ingest.agents.openhands_v0 import load_openhands_v0
from trajlens.ingest.agents.openhands_v1 import load_openhands_v1
from trajlens.ingest.agents.swe_agent import load_swe_agent
from trajlens.model import RunData


class AgentFormat(NamedTuple):
    """How to recognise one log format and how to load it."""

    detect: Callable[[Path], "str | None"]
    load: Callable[..., RunData]


# In detection order: the most specific first (openai-chat also matches what the others hold).
FORMATS: dict[str, AgentFormat] = {
    "mini-swe-agent-v1": AgentFormat(mini_swe_agent_v1.detect, load_mini_swe_agent_v1),
    "mini-swe-agent-v2": AgentFormat(mini_swe_agent_v2.detect, load_mini_swe_agent_v2),
    "swe-agent": AgentFormat(swe_agent.detect, load_swe_agent),
    "openhands-v0": AgentFormat(openhands_v0.detect, load_openhands_v0),
    "openhands-v1": AgentFormat(openhands_v1.detect, load_openhands_v1),
    "openai-chat": AgentFormat(openai_chat.detect, load_openai_chat),
}


def detect_format(path: Path | str) -> str | None:
    """The agent-log format of the file at ``path``, or ``None`` when it is not one."""
    path = Path(path)
    for agent_format in FORMATS.values():
        name = agent_format.detect(path)
        if name is not None:
            return name
    return None


def load_agent_logs(
    paths: Any,
    format: str | None = None,
    run_id: str | None = None,
    strict: bool = True,
) -> RunData:
    """Load agent logs of one format as one run, detecting the format unless given.

    Directories are walked; files that are not agent logs (configs, reports, patches,
    licences) are ignored. All recognised files must share one format: a mix raises an
    :class:`InputError` naming both formats and a file of each.
    """
    if format is not None:
        if format not in FORMATS:
            raise ConfigError([f"unknown agent-log format {format!r}; known: {', '.join(FORMATS)}"])
        return FORMATS[format].load(paths, run_id=run_id, strict=strict)
    given = as_paths(paths)
    seen: dict[str, Path] = {}
    for path in given:
        if path.is_dir():
            found = [(f, detect_format(f)) for f in walk(path)]
            found = [(f, name) for f, name in found if name is not None]
            if not found:
                raise InputError(str(path), "no agent logs in this directory",
                                 expected="one of " + ", ".join(FORMATS), found="none")
        elif path.is_file():
            name = detect_format(path)
            if name is None:
                raise InputError(str(path), expected="an agent log (" + ", ".join(FORMATS) + ")",
                                 found="a file of no known agent-log format")
            found = [(path, name)]
        else:
            raise InputError(str(path), expected="an existing file or directory", found="no such path")
        for file, name in found:
            seen.setdefault(name, file)
    if len(seen) > 1:
        (first, first_file), (second, second_file) = list(seen.items())[:2]
        raise InputError(str(given[0]), f"mixes agent-log formats: {first} ({first_file}) and {second} "
                         f"({second_file})", expected="one format per run")
    (name,) = seen
    return FORMATS[name].load(given, run_id=run_id, strict=strict)


__all__ = [
    "FORMATS",
    "AgentFormat",
    "detect_format",
    "load_agent_logs",
    "load_mini_swe_agent_v1",
    "load_mini_swe_agent_v2",
    "load_openai_chat",
    "load_openhands_v0",
    "load_openhands_v1",
    "load_swe_agent",
]

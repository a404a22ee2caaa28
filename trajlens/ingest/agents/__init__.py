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

:data:`FORMATS` maps each agent-log format name to its entry of the format registry
(:mod:`trajlens.ingest.formats`): ``detect(probe) -> bool`` and ``load``.
:func:`load_agent_logs` picks the format itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trajlens.errors import ConfigError, InputError
from trajlens.ingest.agents._common import as_paths, walk
from trajlens.ingest.agents.mini_swe_agent_v1 import load_mini_swe_agent_v1
from trajlens.ingest.agents.mini_swe_agent_v2 import load_mini_swe_agent_v2
from trajlens.ingest.agents.openai_chat import load_openai_chat
from trajlens.ingest.agents.openhands_v0 import load_openhands_v0
from trajlens.ingest.agents.openhands_v1 import load_openhands_v1
from trajlens.ingest.agents.swe_agent import load_swe_agent
from trajlens.rows import RunData


def agent_formats() -> dict:
    """The agent-log formats of the registry, by name, in detection order."""
    from trajlens.ingest.formats import registry

    agent_loaders = {load_mini_swe_agent_v1, load_mini_swe_agent_v2, load_swe_agent, load_openhands_v0,
                     load_openhands_v1, load_openai_chat}
    return {fmt.name: fmt for fmt in registry() if fmt.load in agent_loaders}


def __getattr__(name: str) -> Any:
    if name == "FORMATS":
        return agent_formats()
    raise AttributeError(name)


def detect_format(path: Path | str) -> str | None:
    """The agent-log format of the file at ``path``, or ``None`` when it is not one."""
    from trajlens.ingest._probe import Probe

    probe = Probe(path)
    for agent_format in agent_formats().values():
        if agent_format.detect(probe):
            return agent_format.name
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
    :class:`InputError` naming both formats and a file of each (``trajlens.ingest`` loads
    such a folder as one run per format instead).
    """
    formats = agent_formats()
    if format is not None:
        if format not in formats:
            raise ConfigError([f"unknown agent-log format {format!r}; known: {', '.join(formats)}"])
        return formats[format].load(paths, run_id=run_id, strict=strict)
    given = as_paths(paths)
    seen: dict[str, Path] = {}
    for path in given:
        if path.is_dir():
            found = [(f, detect_format(f)) for f in walk(path)]
            found = [(f, name) for f, name in found if name is not None]
            if not found:
                raise InputError(str(path), "no agent logs in this directory",
                                 expected="one of " + ", ".join(formats), found="none")
        elif path.is_file():
            name = detect_format(path)
            if name is None:
                raise InputError(str(path), expected="an agent log (" + ", ".join(formats) + ")",
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
    return formats[name].load(given, run_id=run_id, strict=strict)


__all__ = [
    "FORMATS",
    "agent_formats",
    "detect_format",
    "load_agent_logs",
    "load_mini_swe_agent_v1",
    "load_mini_swe_agent_v2",
    "load_openai_chat",
    "load_openhands_v0",
    "load_openhands_v1",
    "load_swe_agent",
]

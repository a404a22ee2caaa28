"""SkyRL-Agent CodeAct traces: ``trace/<run>/step<N>/<instance>/<trajectory>/trace_<time>.json``.

Read as SkyRL-Agent writes them in the code the ``skyrl`` 0.3.0 wheel ships
(``skyrl-agent/skyrl_agent/agents/oh_codeact/codeact_agent.py``, ``CodeActAgent.step``; the
package itself is not on PyPI): at wandb step 1 and every 10th, each agent step writes
``json.dumps(self.messages)`` to
``./trace/<wandb run name>/step<step>/<instance_id>/<trajectory_id>/trace_<UTC %Y%m%d_%H%M%S_%f>.json``.
The messages are the first step's prompt converted by
``convert_fncall_messages_to_non_fncall_messages`` (``skyrl_agent/functional/function_calling.py``:
the tools described in the system prompt, calls as OpenHands ``<function=...>`` XML text, tool
results as user messages ``EXECUTION RESULT of [<tool>]:``), then each raw model response as an
assistant message and each observation as a user message, with the agent's notes appended
(``Steps remaining: N.``, the last-step and out-of-tokens warnings). A trajectory's folder holds
one file per agent step, each holding the one before: the latest (by its name's timestamp) is read.

Mapping: a trajectory is ``step<N>/<instance>/<trajectory>``, at training step ``N``, its
``task_id`` the instance id and its group the instance at that step; the run is named by the
run folder. Each assistant message's XML calls are tool calls (read by the chat-log reader,
:mod:`trajlens.ingest.agents.openai_chat`), answered by the next user message with the
``EXECUTION RESULT`` prefix and the agent's notes taken off; the text before the first call is
the turn's text, and a last response without a call the final answer. The traces keep no reward
or verdict (the trainer computes them elsewhere), so trajectories have none.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from trajlens.errors import InputError
from trajlens.ingest._chat import chat_record
from trajlens.ingest._fields import read_json_file, type_name
from trajlens.ingest._probe import Probe, files_of
from trajlens.ingest.agents._common import message_text
from trajlens.rows import RunBuilder, RunData

FORMAT = "skyrl-agent"
TRACE_NAME = re.compile(r"trace_\d{8}_\d{6}_\d{6}\.json")
STEP_FOLDER = re.compile(r"step(\d+)")
RESULT_PREFIX = re.compile(r"EXECUTION RESULT of \[[^\]\n]*\]:\n")
AGENT_NOTES = re.compile(
    r"(?:\nSteps remaining: \d+\.|\nThis is your last step, make sure to use the finish tool to submit your final answer\."
    r"|\nNote: You are running out of tokens, submit your solution through finish tool now\.)+\Z")
"""What ``CodeActAgent.step`` appends to an observation (and to the prompt near the token limit)."""


def detect(target: Probe | Path | str) -> bool:
    """A ``trace_<time>.json`` file inside ``step<N>/<instance>/<trajectory>/``."""
    path = Probe.of(target).path
    return (TRACE_NAME.fullmatch(path.name) is not None and len(path.parents) > 3
            and STEP_FOLDER.fullmatch(path.parents[2].name) is not None)


def load_skyrl_agent(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None,
                     strict: bool = True) -> RunData:
    """Load SkyRL-Agent trace files (or folders of them) as one run: the latest file of each trajectory."""
    from trajlens.store.writer import joined_source, slug

    latest: dict[Path, Path] = {}
    for file in files_of(paths, detect, strict=strict):
        if file.parent not in latest or file.name > latest[file.parent].name:
            latest[file.parent] = file
    files = sorted(latest.values())
    name = files[0].parents[3].name
    builder = RunBuilder(run_id or slug(name), name=name, source_format=FORMAT, source=joined_source(files))
    for file in files:
        builder.add_record(file, lambda file: trace_record(read_json_file(file), file).trajectories(),
                           where=str(file), strict=strict)
    return builder.build()


def trace_record(messages: Any, file: Path):
    """The trajectory of one trace file's ``messages``, named by its folders."""
    where = str(file)
    if not isinstance(messages, list):
        raise InputError(where, expected="a list of chat messages", found=type_name(messages))
    trajectory, instance, step_folder = file.parents[0].name, file.parents[1].name, file.parents[2].name
    step = int(STEP_FOLDER.fullmatch(step_folder).group(1))  # type: ignore[union-attr]
    cleaned = []
    for index, message in enumerate(messages):
        previous = messages[index - 1] if index else None
        if (isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), str)
                and isinstance(previous, dict) and previous.get("role") == "assistant"):
            content = AGENT_NOTES.sub("", message["content"])
            message = {**message, "content": RESULT_PREFIX.sub("", content, count=1) if RESULT_PREFIX.match(content) else content}
        cleaned.append(message)
    record = chat_record(cleaned, file=file, where=where, trajectory_id=f"{step_folder}/{instance}/{trajectory}",
                         step=step, task_id=instance, group_id=f"{step}:{instance}")
    texts = [_before_call(message_text(m.get("content"))) for m in cleaned
             if isinstance(m, dict) and m.get("role") == "assistant"]
    seen: set[int] = set()
    for call in record.tool_calls:
        if call["turn"] not in seen:
            seen.add(call["turn"])
            call["assistant_text"] = texts[call["turn"]] if call["turn"] < len(texts) else None
    last = next((m for m in reversed(cleaned) if isinstance(m, dict) and m.get("role") == "assistant"), None)
    content = message_text(last.get("content")) if last is not None else None
    record.row["response_text"] = content if content and "<function=" not in content else None
    return record


def _before_call(text: str | None) -> str | None:
    """The model's own text of a response: what comes before its first ``<function=`` call."""
    return (text or "").split("<function=", 1)[0].strip() or None


__all__ = ["FORMAT", "detect", "load_skyrl_agent", "trace_record"]

"""rLLM episodes (DeepSWE and the other rLLM agents): the episode logger's JSON files, or
``Episode.to_dict()`` records.

Read as rLLM writes them at rllm-org/rllm@f56cb74e (``rllm/utils/episode_logger.py``,
``EpisodeLogger.log_episode``): one file per episode,
``<episode_log_dir>/episodes/<mode>_step_<N>_epoch_<E>/episode_hash<task hash>_id<task>_<rollout>.json``,
holding ``training_step``, ``epoch``, ``episode_id`` (``<task_id>:<rollout_idx>``), ``task``,
``is_correct``, ``termination_reason``, ``metrics`` and ``trajectories``: each with ``name``,
``uid``, ``reward`` and ``steps`` (``observation``, ``thought``, ``action``, ``reward``,
``done``, ``model_response``, ``chat_completions``); ``batch_summary.json`` beside them is not
read. ``Episode.to_dict()`` (``rllm/agents/agent.py`` at rllm-org/rllm@1da00850) has ``id`` for
``episode_id`` and steps that also carry ``prompt_ids``, ``response_ids``, ``logprobs`` and
``advantage``; it loads the same way.

Mapping: a trajectory of an episode is a trajectory ``<split>/<step>/<episode_id>`` (then
``/<name>`` when the episode has several; a task's rollout index repeats from step to step)
at the episode's ``training_step``, split ``val`` for a
``val_step_*`` folder; ``task_id`` and ``group_id`` are the episode id's task part, so the
rollouts of a task form a group. ``reward`` is the trajectory's (else its steps' sum);
``resolved`` is ``is_correct``; ``exit_status`` the ``termination_reason``; every numeric
``metrics`` entry is a reward channel. Each step is a turn: its ``action``, as DeepSWE's
``SWEAgent`` leaves it (R2E-Gym's XML call ``<function=execute_bash><parameter=command>...``),
or a list of OpenAI tool calls (``ToolAgent``), gives the calls; the next step's
``observation`` (what the environment answered) is their observation; ``model_response``
(with ``thought`` before it where the response does not hold it) is the turn's text. An
action that is plain text is the answer
(``response_text``), not a call. A scalar ``advantage`` logged on every step alike is the
trajectory's ``logged_advantage``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from trajlens.ingest._chat import tool_call
from trajlens.ingest._fields import INT64, Fields, decode_arguments, type_name
from trajlens.ingest._probe import Probe, files_of, run_name
from trajlens.ingest.agents._common import message_text, shell_command
from trajlens.rows import TOOL_CALL, TRAJECTORY, RunBuilder, RunData

FORMAT = "rllm"
LOGGER_KEYS: frozenset[str] = frozenset({"episode_id", "is_correct", "trajectories"})
"""Keys of an episode logger file."""
EPISODE_KEYS: frozenset[str] = frozenset({"id", "is_correct", "termination_reason", "trajectories"})
"""Keys of ``Episode.to_dict()``."""
FILE_NAMES: tuple[str, ...] = ("episode_*.json",)
"""Names the episode logger gives its files: such a file that is no episode (empty, another
shape) is read and named, not left out."""
_STEP_FOLDER = re.compile(r"^(train|val)_step_(\d+)_epoch_\d+$")


def detect(target: Probe | Path | str) -> bool:
    """An episode (the logger's file, or ``Episode.to_dict()``), in any container."""
    keys = Probe.of(target).record_keys
    return LOGGER_KEYS <= keys or EPISODE_KEYS <= keys


def load_rllm(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None,
              strict: bool = True) -> RunData:
    """Load rLLM episode files (or folders of them) as one run."""
    from trajlens.ingest._records import readable_records
    from trajlens.store.writer import joined_source, slug

    files = files_of(paths, detect, FILE_NAMES, strict=strict)
    name = run_name(paths, files)
    builder = RunBuilder(run_id or slug(Path(name).stem), source_format=FORMAT, source=joined_source(files))
    for file in files:
        folder = _STEP_FOLDER.match(file.parent.name)
        split = folder.group(1) if folder else "train"
        for number, episode in readable_records(file):
            where = f"{file}: record {number}" if file.suffix.lower() == ".jsonl" else str(file)
            builder.add_record(episode, lambda episode: episode_rows(episode, Fields(where), split),
                               where=where, strict=strict)
    return builder.build()


def episode_rows(episode: Any, read: Fields, split: str = "train"):
    """``(trajectory row, calls)`` for each trajectory of one episode."""
    if not isinstance(episode, dict):
        raise read.error(None, "an episode (an object)", type_name(episode))
    episode_id = read.identifier(episode, "episode_id") if "episode_id" in episode else None
    if episode_id is None:
        episode_id = read.identifier(episode, "id", required=True)
    episode_id = str(episode_id)
    step = read.integer(episode, "training_step", bounds=(0, INT64[1])) or 0
    metrics = read.mapping(episode, "metrics") or {}
    channels = [{"name": k, "value": read.number(metrics, k, name=f"metrics.{k}")} for k, v in metrics.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)]
    trajectories = read.items(episode, "trajectories", required=True) or []
    task = episode_id.split(":", 1)[0]
    for index, trajectory in enumerate(trajectories):
        at = read.at(f"trajectory {index}")
        if not isinstance(trajectory, dict):
            raise at.error(None, "a trajectory (an object)", type_name(trajectory))
        steps = at.items(trajectory, "steps") or []
        calls, response, step_rewards, advantages = _steps(steps, at)
        reward = at.number(trajectory, "reward")
        name = at.text(trajectory, "name")
        advantage = advantages[0] if advantages and all(a == advantages[0] for a in advantages) else None
        yield TRAJECTORY(
            trajectory_id=f"{split}/{step}/{episode_id}" + ("" if len(trajectories) == 1 else f"/{name or index}"),
            step=step, split=split, task_id=task, group_id=task,
            reward=reward if reward is not None else (sum(step_rewards) if step_rewards else None),
            reward_channels=channels, resolved=read.boolean(episode, "is_correct"),
            exit_status=read.text(episode, "termination_reason"), num_turns=len(steps),
            response_text=response, logged_advantage=advantage,
        ), calls


def _steps(steps: list[Any], read: Fields):
    calls: list[dict[str, Any]] = []
    rewards: list[float] = []
    advantages: list[float] = []
    response = None
    for turn, step in enumerate(steps):
        at = read.at(f"{read.record}, step {turn}")
        if not isinstance(step, dict):
            raise at.error(None, "a step (an object)", type_name(step))
        reward = at.number(step, "reward")
        if reward is not None:
            rewards.append(reward)
        advantage = step.get("advantage")
        if isinstance(advantage, (int, float)) and not isinstance(advantage, bool):
            advantages.append(at.number(step, "advantage") or 0.0)
        following = steps[turn + 1] if turn + 1 < len(steps) else None
        observation = _observation(following.get("observation")) if isinstance(following, dict) else None
        text = _turn_text(at.text(step, "thought"), at.text(step, "model_response"))
        functions = _functions(step.get("action"), at)
        if functions is None:
            action = step.get("action")
            response = action if isinstance(action, str) and action else text
            continue
        response = None
        for position, (name, raw) in enumerate(functions):
            arguments, arguments_json = decode_arguments(raw, at.file, at.record)
            calls.append(TOOL_CALL(turn=turn, tool_name=name, arguments=arguments_json,
                                   command=shell_command(name, arguments), format_error=arguments is None,
                                   observation=observation if position == len(functions) - 1 else None,
                                   assistant_text=text if position == 0 else None))
    return calls, response, rewards, advantages


def _turn_text(thought: str | None, response: str | None) -> str | None:
    """The model's text of a turn: its response, with the thought before it unless the
    response already holds it (DeepSWE parses the thought out of the response)."""
    if thought and response and thought in response:
        return response
    return "\n".join(p for p in (thought, response) if p) or None


def _functions(action: Any, read: Fields) -> list[tuple[str, Any]] | None:
    """The calls of an action, ``(name, arguments)`` each; ``None`` for an answer in plain text."""
    from trajlens.ingest.agents.openai_chat import _xml_calls

    if isinstance(action, str):
        found = _xml_calls(action)
        return [(f["name"], f["arguments"]) for f in found] or None
    if isinstance(action, dict):
        action = [action]
    if isinstance(action, list) and action:
        functions = []
        for position, raw in enumerate(action):
            call = tool_call(raw, read.file, f"{read.record}, call {position}")
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise read.error("action", "a tool call {function: {name, arguments}} or an XML function call",
                                 type_name(raw))
            functions.append((function["name"], function.get("arguments")))
        return functions
    return None


def _observation(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), (str, list)):
        return message_text(value["content"])
    import json

    return json.dumps(value, sort_keys=True, default=str)


__all__ = ["EPISODE_KEYS", "FORMAT", "LOGGER_KEYS", "detect", "episode_rows", "load_rllm"]

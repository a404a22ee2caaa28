"""``verifiers`` rollout episodes: the ``traces.jsonl`` of a verifiers 0.4 results folder.

Read as verifiers 0.4.0 writes them (``verifiers/v1/utils/trace_store.py``: ``write_episode``
appends each finished ``Episode`` as one line of ``<results folder>/traces.jsonl``, dumped by
pydantic with ``exclude_none``; ``verifiers/v1/cli/output.py`` ``write_config`` puts the
resolved run config at ``configs/resolved/<cli>.json`` beside it). An ``Episode``
(``verifiers/v1/episode.py``) holds ``id``, ``env`` (``{id, name}``), ``task`` (``type``,
``data``, ``key``, ``hash``), ``group`` (``{id}``, when the consumer grouped rollouts), ``run``
(a training run's ``work``: ``{type: train|eval, step}``), ``ok``, ``is_timeout``, ``errors``
and ``traces``: one ``Trace`` (``verifiers/v1/trace.py``) per agent, whose messages are a graph,
``nodes`` (``verifiers/v1/graph.py`` ``MessageNode``: ``parent``, ``message``, ``sampled``,
``token_ids``, ``mask``, ``logprobs`` and ``advantages`` over the sampled tokens), with
``rewards`` (name -> ``{score, weight}`` or null when scoring did not run), ``metrics``,
``stop_condition``, ``is_completed``, ``errors`` and the computed ``num_output_tokens``.

Mapping: a trace is a trajectory named by the episode id (``<episode id>/<n>`` for the n-th
trace of an episode with several agents); ``task_id`` is the task's ``key`` (else its
``hash``, else the episode id); ``group_id`` the episode's ``group.id``, else the task; ``step``
the run's ``work.step`` (0 without a training run), ``split`` ``val`` for a training run's eval
work. Every scored reward is a reward channel (its ``score``) and ``reward`` is the trace's own
``reward``, the weighted sum ``sum(score * weight)``. ``exit_status`` is ``error`` for a trace
or episode with errors, ``timeout`` for one past a deadline, else ``stop_condition``. The nodes'
messages, in node order (each message once, however many branches share it), give the calls:
assistant ``tool_calls`` (verifiers' flat ``{id, name, arguments}``) answered by ``tool``
messages, the model's text per turn and its final answer. ``model_tokens`` is
``num_output_tokens`` where the provider reported usage. A trace whose graph is one branch
with token ids has token arrays: the nodes' ``mask`` as response mask, ``logprobs`` and the
trainer's ``advantages`` spread onto the sampled tokens (``Branch.spread``) as ``log_probs``
and ``logged_advantages``; a trace of several branches (sub-agents, compaction) has none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from trajlens.errors import InputError
from trajlens.ingest._chat import chat_record
from trajlens.ingest._fields import Fields, read_json_file, type_name
from trajlens.ingest._probe import Probe, files_of
from trajlens.ingest._records import readable_records
from trajlens.rows import TOKENS, RunBuilder, RunData

FORMAT = "verifiers-traces"
KEYS: frozenset[str] = frozenset({"env", "task", "traces"})
"""Keys of every ``Episode`` line."""
CONFIG_DIR = ("configs", "resolved")


def detect(target: Probe | Path | str) -> bool:
    """Episode records, in any container."""
    return KEYS <= Probe.of(target).record_keys


def load_verifiers_traces(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None,
                          strict: bool = True) -> RunData:
    """Load verifiers ``traces.jsonl`` files (or folders of them) as one run."""
    from trajlens.store.writer import joined_source, slug

    files = files_of(paths, detect, strict=strict)
    config = _config(files[0])
    given = Path(paths) if isinstance(paths, (str, Path)) else files[0]
    name = files[0].parent.name if len(files) == 1 or given.is_file() else given.name
    builder = RunBuilder(run_id or slug(name), name=name, config=config, source_format=FORMAT,
                         source=joined_source(files))
    for file in files:
        prefix = "" if len(files) == 1 else f"{file.parent.name}:"
        for number, episode in readable_records(file):
            where = f"{file}: record {number}"
            builder.add_record(episode, lambda episode: episode_trajectories(episode, file, where, prefix),
                               where=where, strict=strict)
    return builder.build()


def _config(file: Path) -> dict[str, Any]:
    """The resolved run config beside ``file`` (``configs/resolved/*.json``), else none."""
    folder = file.parent.joinpath(*CONFIG_DIR)
    found = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not found:
        return {}
    data = read_json_file(found[0])
    if not isinstance(data, dict):
        raise InputError(str(found[0]), expected="the run's resolved config (a JSON object)", found=type_name(data))
    return data


def episode_trajectories(episode: Any, file: Path, where: str, prefix: str = ""):
    """``(trajectory row, tool calls, tokens)`` for each trace of one ``Episode``."""
    read = Fields(where)
    if not isinstance(episode, dict):
        raise read.error(None, "an episode (an object)", type_name(episode))
    episode_id = str(read.identifier(episode, "id", required=True))
    task = read.mapping(episode, "task", required=True) or {}
    task_id = str(task.get("key") or task.get("hash") or episode_id)
    group = read.mapping(episode, "group")
    group_id = str(read.identifier(group, "id", required=True, name="group.id")) if group else task_id
    step, split = _work(read.mapping(episode, "run"), read)
    traces = read.items(episode, "traces", required=True) or []
    episode_failed = bool(episode.get("errors")) or read.boolean(episode, "is_timeout") is True
    for index, trace in enumerate(traces):
        at = read.at(f"{read.record}, trace {index}")
        if not isinstance(trace, dict):
            raise at.error("traces", "a trace (an object)", type_name(trace))
        trajectory_id = prefix + (episode_id if len(traces) == 1 else f"{episode_id}/{index}")
        nodes = at.items(trace, "nodes") or []
        messages = []
        for position, node in enumerate(nodes):
            if not isinstance(node, dict) or "message" not in node:
                raise at.error(f"nodes[{position}]", "a message node {parent, message, ...}", type_name(node))
            messages.append(node["message"])
        channels, reward = _rewards(trace, at)
        output_tokens = at.integer(trace, "num_output_tokens", bounds=(0, 2**62))
        record = chat_record(
            messages, file=file, where=f"{where}, trace {index}", trajectory_id=trajectory_id,
            step=step, split=split, task_id=task_id, group_id=group_id, reward=reward, reward_channels=channels,
            exit_status=_exit_status(trace, at, episode_failed), model_tokens=output_tokens or None,
            source=f"{file}:{where.rsplit(' ', 1)[-1]}",
        )
        yield record.row, record.tool_calls, _tokens(nodes, at)


def _work(run: dict[str, Any] | None, read: Fields) -> tuple[int, str]:
    """The training step and split of an episode's ``run`` (step 0, ``train`` without one)."""
    work = read.mapping(run, "work", name="run.work") if run else None
    if not work:
        return 0, "train"
    step = read.integer(work, "step", name="run.work.step", bounds=(0, 2**62)) or 0
    return step, "val" if work.get("type") == "eval" else "train"


def _rewards(trace: dict[str, Any], read: Fields) -> tuple[list[dict[str, Any]], float | None]:
    rewards = read.mapping(trace, "rewards") or {}
    channels, total = [], None
    for name, reward in rewards.items():
        if reward is None:
            continue
        if not isinstance(reward, dict):
            raise read.error(f"rewards.{name}", "a reward {score, weight}", type_name(reward))
        score = read.number(reward, "score", required=True, name=f"rewards.{name}.score")
        weight = read.number(reward, "weight", name=f"rewards.{name}.weight")
        channels.append({"name": str(name), "value": score})
        total = (total or 0.0) + (score or 0.0) * (1.0 if weight is None else weight)
    return channels, total


def _exit_status(trace: dict[str, Any], read: Fields, episode_failed: bool) -> str | None:
    if trace.get("errors"):
        return "error"
    if read.boolean(trace, "is_timeout") is True:
        return "timeout"
    return read.text(trace, "stop_condition") or ("error" if episode_failed else None)


def _tokens(nodes: list[dict[str, Any]], read: Fields) -> dict[str, Any] | None:
    """The token arrays of a one-branch graph with token ids (``Branch.token_ids``, ``sampled_mask``,
    ``logprobs``, ``advantages``); None for several branches or none recorded."""
    parents = [node.get("parent") for node in nodes]
    if not nodes or parents[0] is not None or any(p != i for i, p in enumerate(parents[1:])):
        return None  # not a single chain from the root: several branches
    mask: list[bool] = []
    log_probs: list[float] = []
    advantages: list[float] = []
    assigned = False
    for index, node in enumerate(nodes):
        at = f"nodes[{index}]"
        ids = read.items(node, "token_ids", name=f"{at}.token_ids") or []
        flags = read.items(node, "mask", name=f"{at}.mask") or []
        if len(flags) != len(ids) or any(not isinstance(flag, bool) for flag in flags):
            raise read.error(f"{at}.mask", f"{len(ids)} booleans (one per token id)", f"{len(flags)} entries")
        mask += flags
        log_probs += _spread(flags, read.items(node, "logprobs", name=f"{at}.logprobs"), f"{at}.logprobs", read)
        node_advantages = read.items(node, "advantages", name=f"{at}.advantages")
        assigned = assigned or node_advantages is not None
        advantages += _spread(flags, node_advantages, f"{at}.advantages", read)
    if not any(mask):
        return None
    return TOKENS(response_mask=mask, log_probs=log_probs, logged_advantages=advantages if assigned else None)


def _spread(mask: list[bool], values: list[Any] | None, name: str, read: Fields) -> list[float]:
    """Values over a node's sampled tokens widened to all its tokens, 0.0 elsewhere (``Branch.spread``)."""
    values = values or []
    if values and len(values) != sum(mask):
        raise read.error(name, f"{sum(mask)} numbers (one per sampled token)", f"{len(values)}")
    numbers = iter(read.number({name: v}, name) or 0.0 for v in values)
    return [next(numbers, 0.0) if sampled else 0.0 for sampled in mask]


__all__ = ["FORMAT", "KEYS", "detect", "episode_trajectories", "load_verifiers_traces"]

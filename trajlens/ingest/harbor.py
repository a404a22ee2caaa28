"""Harbor job and trial folders, with the agent's ATIF ``trajectory.json``.

Read as harbor 0.26.0 writes them. A trial folder (``harbor/models/trial/paths.py``
``TrialPaths``) holds ``result.json``, a ``TrialResult`` (``harbor/models/trial/result.py``:
``task_name``, ``trial_name``, ``agent_info``, ``agent_result`` with ``n_output_tokens``,
``verifier_result.rewards`` (name -> number), ``exception_info``, ``config``) and
``agent/trajectory.json``, an ATIF ``Trajectory`` (``harbor/models/trajectories/``:
``schema_version``, ``session_id``, ``agent``, ``steps``, ``final_metrics``). A job folder
holds one folder per trial. Terminal-Bench 2 runs through Harbor and writes the same. A
``result.json`` beside a trial's ``agent/`` folder is that trial's result whatever it holds: one
that is empty or no ``TrialResult`` is an error naming it, never left out or its trajectory
read as one of its own.

Mapping: a trial is a trajectory named by its ``trial_name``; ``task_id`` and ``group_id``
are its ``task_name`` (the attempts at one task form a group). Every verifier reward is a
reward channel; ``reward`` is the one named ``reward`` (else the only one). ``exit_status``
is the exception's type where the trial raised one, else ``completed``; ``model_tokens`` is
``agent_result.n_output_tokens`` (else the trajectory's
``final_metrics.total_completion_tokens``). A ``trajectory.json`` with no ``result.json``
above it is a trajectory of its own, without reward, named by its ``session_id``.

Steps: each ``source: "agent"`` step is a turn. Its ``tool_calls`` (``tool_call_id``,
``function_name``, ``arguments``) are the calls; its ``observation.results`` answer them by
``source_call_id``, and a result without one (Terminus 2 gives one terminal output for a batch
of commands, ``harbor/agents/terminus_2/terminus_2.py``) is the observation of the step's
last call. ``reasoning_content`` then ``message`` is the turn's text; the last agent step's
text after its last call is the response. Terminus 2's ``bash_command`` calls carry
``keystrokes``, which are the command (a trailing newline, the Enter key, dropped).
The ``config`` and ``agent_info`` of the first trial that loads are the run's config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from trajlens.errors import InputError
from trajlens.ingest._fields import INT64, Fields, dumps, read_json_file, type_name
from trajlens.ingest._probe import Probe, files_of, run_name
from trajlens.ingest.agents._common import message_text, shell_command
from trajlens.rows import TOOL_CALL, TRAJECTORY, RunBuilder, RunData
from trajlens.store.writer import joined_source

FORMAT = "harbor"
RESULT_KEYS: frozenset[str] = frozenset({"task_name", "trial_name", "agent_info"})
"""Keys of a trial's ``result.json`` (``TrialResult``)."""
TRAJECTORY_KEYS: frozenset[str] = frozenset({"schema_version", "agent", "steps"})
"""Keys of an ATIF ``trajectory.json``."""
TRAJECTORY_FILE = Path("agent") / "trajectory.json"
RESULT_FILE = "result.json"
KEYSTROKE_TOOLS: frozenset[str] = frozenset({"bash_command"})
"""Tools whose ``keystrokes`` argument is typed into a terminal (Terminus 2)."""


def detect(target: Probe | Path | str) -> bool:
    """A trial folder (holding a trial's ``result.json``), a trial's ``result.json``, or an ATIF
    ``trajectory.json``. A trial folder is taken whole: the agent's own logs in it (Terminus 2's
    ``episode-<n>/debug.json`` holds chat messages) are not logs of another format."""
    probe = Probe.of(target)
    if probe.is_dir:
        return is_result(Probe(probe.path / RESULT_FILE))
    return is_result(probe) or TRAJECTORY_KEYS <= probe.record_keys


def is_result(probe: Probe) -> bool:
    """Whether a file is a trial's ``result.json``: by its keys, or by where harbor writes it
    (beside the trial's ``agent/`` folder), so one that is empty or no ``TrialResult`` is read,
    and named, as its trial's result rather than left out or its trajectory read alone."""
    if RESULT_KEYS <= probe.record_keys:
        return True
    return probe.path.name == RESULT_FILE and probe.is_file and (probe.path.parent / TRAJECTORY_FILE.parent).is_dir()


def load_harbor(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None,
                strict: bool = True) -> RunData:
    """Load Harbor trial folders (a job folder, trial folders, or their files) as one run."""
    from trajlens.store.writer import slug

    files = files_of(paths, detect, strict=strict)
    results = [f for f in files if is_result(Probe(f))]
    claimed = {(f.parent / TRAJECTORY_FILE).resolve() for f in results}
    loose = [f for f in files if f not in results and f.resolve() not in claimed]
    run = run_id or slug(Path(run_name(paths, files)).stem)
    builder = None
    skipped: list[InputError] = []
    for file in [*results, *loose]:
        try:
            result = _object(file) if file in results else None
            trajectory_file = file.parent / TRAJECTORY_FILE if result is not None else file
            trajectory = _object(trajectory_file) if trajectory_file.is_file() else None
            row, calls = trial(result, trajectory, file, trajectory_file)
            if builder is None:  # the run's config is the first trial's that loads, not a skipped one's
                builder = _builder(run, result, files)
            builder.add_trajectory(row, calls, where=str(file))
        except InputError as error:
            if strict:
                raise
            skipped.append(error)
    builder = builder or _builder(run, None, files)
    for error in skipped:
        builder.skip(error)
    return builder.build()


def _builder(run_id: str, result: dict[str, Any] | None, files: list[Path]) -> RunBuilder:
    config: dict[str, Any] = {}
    if result is not None:
        for key in ("config", "agent_info"):
            if isinstance(result.get(key), dict):
                config[key] = result[key]
    return RunBuilder(run_id, config=config, source_format=FORMAT, source=joined_source(files))


def _object(path: Path) -> dict[str, Any]:
    data = read_json_file(path)
    if not isinstance(data, dict):
        raise InputError(str(path), expected="a JSON object", found=type_name(data))
    return data


def trial(result: dict[str, Any] | None, trajectory: dict[str, Any] | None, file: Path,
          trajectory_file: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One trial (its result, its ATIF trajectory, either may be missing) as a row and its calls."""
    read = Fields(file)
    calls: list[dict[str, Any]] = []
    turns, response, tokens = 0, None, None
    if trajectory is not None:
        calls, turns, response = _steps(trajectory, Fields(trajectory_file))
        final = Fields(trajectory_file).mapping(trajectory, "final_metrics")
        if final is not None:
            tokens = Fields(trajectory_file).integer(final, "total_completion_tokens", bounds=(0, INT64[1]),
                                                     name="final_metrics.total_completion_tokens")
    if result is None:
        session = Fields(trajectory_file).identifier(trajectory or {}, "session_id")
        name = str(session) if session is not None else trajectory_file.parent.name
        return TRAJECTORY(trajectory_id=name, task_id=name, num_turns=turns, model_tokens=tokens,
                          response_text=response, source=str(trajectory_file)), calls
    channels = _rewards(result, read)
    reward = next((c["value"] for c in channels if c["name"] == "reward"), None)
    if reward is None and len(channels) == 1:
        reward = channels[0]["value"]
    agent = read.mapping(result, "agent_result")
    output = read.integer(agent, "n_output_tokens", bounds=(0, INT64[1]), name="agent_result.n_output_tokens") \
        if agent else None
    exception = read.mapping(result, "exception_info")
    status = read.text(exception, "exception_type", name="exception_info.exception_type") if exception else None
    task = read.text(result, "task_name", required=True)
    return TRAJECTORY(
        trajectory_id=read.text(result, "trial_name", required=True), task_id=task, group_id=task,
        reward=reward, reward_channels=channels, exit_status=status or "completed", num_turns=turns,
        model_tokens=output if output is not None else tokens, response_text=response, source=str(file),
    ), calls


def _rewards(result: dict[str, Any], read: Fields) -> list[dict[str, Any]]:
    verifier = read.mapping(result, "verifier_result")
    rewards = read.mapping(verifier, "rewards", name="verifier_result.rewards") if verifier else None
    return [{"name": name, "value": read.number(rewards, name, name=f"verifier_result.rewards.{name}")}
            for name in (rewards or {})]


def _steps(trajectory: dict[str, Any], read: Fields) -> tuple[list[dict[str, Any]], int, str | None]:
    calls: list[dict[str, Any]] = []
    turn = -1
    response = None
    for index, step in enumerate(read.items(trajectory, "steps", required=True) or []):
        at = read.at(f"step {index}")
        if not isinstance(step, dict):
            raise at.error(None, "a step (an object)", type_name(step))
        if at.text(step, "source", required=True) != "agent":
            continue
        turn += 1
        text = _text(step, at)
        answers = _answers(step, at)
        step_calls = at.items(step, "tool_calls") or []
        for position, call in enumerate(step_calls):
            here = at.at(f"step {index}, call {position}")
            if not isinstance(call, dict):
                raise here.error(None, "a tool call (an object)", type_name(call))
            name = here.text(call, "function_name", required=True)
            arguments = here.mapping(call, "arguments") or {}
            call_id = here.identifier(call, "tool_call_id")
            observation = answers.get(call_id)
            if observation is None and position == len(step_calls) - 1:
                observation = answers.get(None)
            calls.append(TOOL_CALL(turn=turn, tool_name=name, arguments=dumps(arguments),
                                   command=_command(name, arguments), observation=observation,
                                   assistant_text=text if position == 0 else None))
        response = None if step_calls else text
    return calls, turn + 1, response


def _text(step: dict[str, Any], read: Fields) -> str | None:
    reasoning = read.text(step, "reasoning_content")
    message = message_text(step.get("message"))
    return "\n".join(p for p in (reasoning, message) if p) or None


def _answers(step: dict[str, Any], read: Fields) -> dict[Any, str | None]:
    observation = read.mapping(step, "observation")
    answers: dict[Any, str | None] = {}
    for position, result in enumerate(read.items(observation, "results", name="observation.results") or []
                                      if observation else []):
        if not isinstance(result, dict):
            raise read.error(f"observation.results[{position}]", "an object", type_name(result))
        key = read.identifier(result, "source_call_id", name="observation.results.source_call_id")
        text = message_text(result.get("content"))
        answers[key] = text if key not in answers else "\n".join(p for p in (answers[key], text) if p)
    return answers


def _command(name: str, arguments: dict[str, Any]) -> str | None:
    if name in KEYSTROKE_TOOLS and isinstance(arguments.get("keystrokes"), str):
        return arguments["keystrokes"].rstrip("\n") or None
    return shell_command(name, arguments)


__all__ = ["FORMAT", "RESULT_KEYS", "TRAJECTORY_KEYS", "detect", "is_result", "load_harbor", "trial"]

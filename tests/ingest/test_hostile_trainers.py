"""The trainers' and eval harnesses' formats against hostile values: each mutated record loads,
or fails as one line naming the file; never a traceback."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hostile import HOSTILE_VALUES, _set  # noqa: E402

from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import load  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"


def _first_line(path: Path) -> Any:
    return json.loads(path.read_text().splitlines()[0])


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


VERIFIERS = DATA / "verifiers" / "outputs" / "evals" / "tool-math--mock-model" / "0a1b2c3d" / "results.jsonl"
VERIFIERS_TRACES = DATA / "verifiers_traces" / "outputs" / "tool-math--mock-model--default--0a1b2c3d" / "traces.jsonl"
SKYRL_AGENT = DATA / "skyrl_agent" / "trace" / "demo-run" / "step10" / "astropy__astropy-12907" / "0" / "trace_20260101_000000_000002.json"
SKYRL = DATA / "skyrl" / "export" / "dumped_evals" / "global_step_2_evals" / "gsm8k.jsonl"
RLLM = next((DATA / "rllm" / "logs" / "deepswe" / "run1" / "episodes" / "train_step_3_epoch_0").glob("*_0.json"))
HARBOR = DATA / "harbor" / "jobs" / "2026-01-01__00-00-00" / "hello-world__trial1"
PRIME_HOSTED = DATA / "prime_hosted" / "rollouts_step_10.json"
TERMINAL = next((DATA / "terminal_bench" / "runs").glob("*/hello-world/*"))

# format: (base document, where to write it as (folder, document) -> path, paths to mutate)
Write = Callable[[Path, Any], Path]


def _jsonl(name: str) -> Write:
    def write(folder: Path, document: Any) -> Path:
        (folder / name).write_text(json.dumps(document) + "\n")
        return folder / name
    return write


def _trial(source: Path, file: str) -> Write:
    def write(folder: Path, document: Any) -> Path:
        trial = folder / "run" / "task" / source.name
        shutil.copytree(source, trial)
        (trial / file).write_text(json.dumps(document))
        return folder / "run"
    return write


def _nested(name: str) -> Write:
    def write(folder: Path, document: Any) -> Path:
        path = folder / name
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(document))
        return path
    return write


def _file(name: str) -> Write:
    def write(folder: Path, document: Any) -> Path:
        (folder / name).write_text(json.dumps(document))
        return folder / name
    return write


FORMATS: dict[str, tuple[Any, Write, list[str]]] = {
    "verifiers": (_first_line(VERIFIERS), _jsonl("results.jsonl"),
                  ["example_id", "reward", "metrics.correct_answer", "completion.0.tool_calls.0", "completion.1.content",
                   "stop_condition", "token_usage.output_tokens", "completion"]),
    "verifiers-traces": (_first_line(VERIFIERS_TRACES), _jsonl("traces.jsonl"),
                         ["id", "task", "group.id", "run.work.step", "traces.0.rewards.correct", "traces.0.nodes.2.message",
                          "traces.0.nodes.2.message.tool_calls.0", "traces.0.nodes.2.mask", "traces.0.nodes.2.advantages",
                          "traces.0.nodes.1.parent", "traces.0.num_output_tokens", "traces"]),
    "prime-hosted": (_json(PRIME_HOSTED), _file("rollouts.json"),
                     ["run_id", "samples", "samples.0", "samples.0.step", "samples.0.example_id", "samples.0.reward",
                      "samples.0.advantage", "samples.0.metrics", "samples.0.metrics.tests_passed", "samples.0.completion",
                      "samples.0.completion.0.tool_calls.0", "samples.0.completion.1.content",
                      "samples.0.trajectory.0.num_output_tokens"]),
    "skyrl-agent": (_json(SKYRL_AGENT), _nested("trace/r/step1/task/0/trace_20260101_000000_000000.json"),
                    ["0", "2", "2.content", "2.role", "3.content", "3.role", "6.content"]),
    "skyrl": (_first_line(SKYRL), _jsonl("gsm8k.jsonl"), ["input_prompt", "output_response", "score", "stop_reason"]),
    "rllm": (_json(RLLM), _file("episode.json"),
             ["episode_id", "training_step", "trajectories.0.steps.0.action", "trajectories.0.steps.1.observation",
              "trajectories.0.reward", "is_correct", "trajectories.0.steps", "metrics.solver_acc"]),
    "harbor": (_json(HARBOR / "agent" / "trajectory.json"), _trial(HARBOR, "agent/trajectory.json"),
               ["steps.1.tool_calls.0.function_name", "steps.1.tool_calls.0.arguments", "steps.1.observation",
                "steps.1.message", "final_metrics.total_completion_tokens", "steps"]),
    "harbor-result": (_json(HARBOR / "result.json"), _trial(HARBOR, "result.json"),
                      ["task_name", "trial_name", "verifier_result.rewards", "agent_result.n_output_tokens",
                       "exception_info"]),
    "terminal-bench": (_json(TERMINAL / "results.json"), _trial(TERMINAL, "results.json"),
                       ["trial_name", "task_id", "is_resolved", "parser_results", "total_output_tokens",
                        "failure_mode"]),
}

CASES = [(fmt, path, label) for fmt, (_, _, paths) in FORMATS.items() for path in paths for label in HOSTILE_VALUES]


@pytest.mark.parametrize("fmt, path, label", CASES, ids=[f"{f}:{p}={v}" for f, p, v in CASES])
def test_a_hostile_value_loads_or_fails_in_one_line(tmp_path, fmt, path, label):
    base, write, _ = FORMATS[fmt]
    source = write(tmp_path, _set(base, path, HOSTILE_VALUES[label]))
    try:
        run = load(source)
    except InputError as error:
        message = str(error)
        assert "\n" not in message and str(tmp_path) in message
        message.encode("utf-8")
        return
    assert run.trajectories.num_rows >= 1

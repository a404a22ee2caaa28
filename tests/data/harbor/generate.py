"""Write the Harbor fixture with harbor's own models and serialisers (no Docker, no model).

    /root/.pyenv/versions/3.12.1/bin/python -m venv /tmp/venv-harbor
    /tmp/venv-harbor/bin/pip install harbor==0.26.0
    /tmp/venv-harbor/bin/python tests/data/harbor/generate.py

A job folder of two trials of one task, as a Terminus 2 agent leaves them: each trial folder
holds ``result.json`` (``TrialResult.model_dump_json(indent=4)``, ``harbor/trial/trial.py``)
and ``agent/trajectory.json`` (an ATIF ``Trajectory`` written with
``format_trajectory_json(trajectory.to_json_dict())``, ``harbor/agents/terminus_2/terminus_2.py``).
The steps are built as Terminus 2 builds them: ``bash_command`` calls with ``keystrokes``, one
observation for a batch of commands, ``mark_task_complete`` at the end.
"""

from __future__ import annotations

import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path

from harbor.models.task.id import LocalTaskId
from harbor.models.trajectories import (
    Agent, FinalMetrics, Metrics, Observation, ObservationResult, Step, ToolCall, Trajectory,
)
from harbor.models.trial.config import TaskConfig, TrialConfig
from harbor.models.trial.result import AgentInfo, ModelInfo, TrialResult
from harbor.models.agent.context import AgentContext
from harbor.models.verifier.result import VerifierResult
from harbor.utils.trajectory_utils import format_trajectory_json

HERE = Path(__file__).resolve().parent
JOB = HERE / "jobs" / "2026-01-01__00-00-00"
WHEN = datetime(2026, 1, 1, tzinfo=timezone.utc)


def bash(episode: int, index: int, keys: str) -> ToolCall:
    return ToolCall(tool_call_id=f"call_{episode}_{index}", function_name="bash_command",
                    arguments={"keystrokes": keys, "duration": 1.0})


def trajectory(session: str, solved: bool) -> Trajectory:
    steps = [
        Step(step_id=1, source="system", message="You are an agent in a terminal. Create hello.txt."),
        Step(step_id=2, source="agent", model_name="mock", message="Look first.",
             reasoning_content="The folder may already hold it.",
             tool_calls=[bash(1, 1, "ls -la\n")],
             observation=Observation(results=[ObservationResult(source_call_id="call_1_1", content="total 0\n")]),
             metrics=Metrics(prompt_tokens=100, completion_tokens=12)),
        Step(step_id=3, source="agent", model_name="mock", message="Write the file and check it.",
             tool_calls=[bash(2, 1, "echo 'Hello, world!' > hello.txt\n"),
                         bash(2, 2, "cat hello.txt\n" if solved else "cat hello.text\n")],
             observation=Observation(results=[ObservationResult(
                 content="Hello, world!\n" if solved else "cat: hello.text: No such file or directory\n")]),
             metrics=Metrics(prompt_tokens=140, completion_tokens=20)),
        Step(step_id=4, source="agent", model_name="mock", message="Done.",
             tool_calls=[ToolCall(tool_call_id="call_3_task_complete", function_name="mark_task_complete",
                                  arguments={})],
             observation=Observation(results=[ObservationResult(content="")]),
             metrics=Metrics(prompt_tokens=170, completion_tokens=5)),
    ]
    return Trajectory(schema_version="ATIF-v1.6", session_id=session,
                      agent=Agent(name="terminus-2", version="2.0.0", model_name="mock"), steps=steps,
                      final_metrics=FinalMetrics(total_prompt_tokens=410, total_completion_tokens=37, total_steps=4))


def main() -> None:
    if JOB.exists():
        shutil.rmtree(JOB)
    for number, solved in ((1, True), (2, False)):
        name = f"hello-world__trial{number}"
        folder = JOB / name
        (folder / "agent").mkdir(parents=True)
        (folder / "agent" / "trajectory.json").write_text(
            format_trajectory_json(trajectory(f"session-{number}", solved).to_json_dict()))
        result = TrialResult(
            id=uuid.UUID(int=number), task_name="hello-world", trial_name=name, trial_uri=f"file:///jobs/{JOB.name}/{name}",
            task_id=LocalTaskId(path=Path("tasks/hello-world")), task_checksum="0" * 64,
            config=TrialConfig(task=TaskConfig(path=Path("tasks/hello-world")), trial_name=name),
            agent_info=AgentInfo(name="terminus-2", version="2.0.0", model_info=ModelInfo(name="mock")),
            agent_result=AgentContext(n_input_tokens=410, n_output_tokens=37 + number),
            verifier_result=VerifierResult(rewards={"reward": 1.0 if solved else 0.0}),
            started_at=WHEN, finished_at=WHEN,
        )
        (folder / "result.json").write_text(result.model_dump_json(indent=4))


if __name__ == "__main__":
    main()

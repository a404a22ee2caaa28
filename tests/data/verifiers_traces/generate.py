"""Write the verifiers 0.4 traces fixture with verifiers' own writer (no model service needed).

    python -m venv /tmp/venv-vf4 && /tmp/venv-vf4/bin/pip install verifiers==0.4.0
    /tmp/venv-vf4/bin/python tests/data/verifiers_traces/generate.py

``write_episode`` (``verifiers/v1/utils/trace_store.py``) appends each ``Episode`` to the results
folder's ``traces.jsonl``, as ``vf-eval`` and the trainer's orchestrator do. The episodes are
what a tool environment's rollouts leave during training: two tasks, two rollouts each, at
training step 3, each a message graph of system, user, an assistant turn calling ``bash``, its
tool result and the answer, with token ids, the sampled mask, log-probs and the advantages the
trainer assigned; scored by two weighted rewards. A fifth episode's scoring did not run (an
error): its rewards are null. Ids, timestamps and timings are fixed so the output does not change.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from verifiers.v1.configs.agent import WireAgentConfig
from verifiers.v1.episode import EnvInfo, Episode, GroupInfo, TrainRunInfo, TrainWorkInfo
from verifiers.v1.graph import MessageNode
from verifiers.v1.trace import AgentInfo, Error, Reward, Timing, Trace, TraceTask, VersionInfo
from verifiers.v1.types import AssistantMessage, SystemMessage, ToolCall, ToolMessage, UserMessage
from verifiers.v1.utils.trace_store import write_episode

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "outputs" / "tool-math--mock-model--default--0a1b2c3d"
TASKS = {"q0": ("What is 6*7?", "echo $((6*7))", "42\n"), "q1": ("What is 3+4?", "echo $((3+4))", "7\n")}


def node(parent, message, tokens, sampled=False, advantage=None, stamp=0.0):
    """A message node of ``tokens`` ids; an assistant node samples its last three."""
    mask = [False] * (len(tokens) - 3) + [True] * 3 if sampled else [False] * len(tokens)
    return MessageNode(parent=parent, message=message, sampled=sampled, timestamp=stamp, token_ids=tokens, mask=mask,
                       logprobs=[-0.5, -0.25, -0.125] if sampled else [],
                       advantages=[advantage] * 3 if sampled and advantage is not None else None)


def episode(number: int, task: str, rollout: int, correct: float, advantage: float | None, scored: bool = True):
    question, command, output = TASKS[task]
    call = ToolCall(id=f"call_{number}", name="bash", arguments=json.dumps({"command": command}))
    answer = output.strip() if correct else "I do not know."
    nodes = [
        node(None, SystemMessage(content="Use bash."), [1, 2]),
        node(0, UserMessage(content=question), [3, 4, 5]),
        node(1, AssistantMessage(content="Let me compute it.", reasoning_content="I should run it.", tool_calls=[call]),
             [6, 7, 8, 9], sampled=True, advantage=advantage),
        node(2, ToolMessage(tool_call_id=call.id, content=output), [10, 11]),
        node(3, AssistantMessage(content=answer), [12, 13, 14, 15], sampled=True, advantage=advantage),
    ]
    rewards = {"correct": Reward(score=correct, weight=1.0), "format": Reward(score=1.0, weight=0.5)} if scored \
        else {"correct": None, "format": None}
    trace = Trace(
        id=f"trace-{number}", verifiers=VersionInfo(version="0.4.0"), task=TraceTask(type="Task", data={"prompt": question}, key=task),
        agent=AgentInfo(config=WireAgentConfig(model="mock-model")), nodes=nodes, rewards=rewards,
        metrics={"num_tool_calls": 1.0}, is_completed=scored, ok=scored, stop_condition="completed" if scored else None,
        errors=[] if scored else [Error(type="SandboxError", message="sandbox lost")], timing=Timing(start=0.0),
    )
    return Episode(
        id=f"ep-{number}", env=EnvInfo(id="tool-math"), task=trace.task, group=GroupInfo(id=f"3:{task}"),
        run=TrainRunInfo(id="run-1", work=TrainWorkInfo(step=3)), ok=scored, traces=[trace],
    )


def main() -> None:
    shutil.rmtree(RESULTS, ignore_errors=True)
    RESULTS.mkdir(parents=True)
    episodes = [episode(0, "q0", 0, 1.0, 0.5), episode(1, "q0", 1, 0.0, -0.5),
                episode(2, "q1", 0, 1.0, 0.0), episode(3, "q1", 1, 1.0, 0.0),
                episode(4, "q1", 2, 0.0, None, scored=False)]
    for item in episodes:
        write_episode(RESULTS, item)


if __name__ == "__main__":
    main()

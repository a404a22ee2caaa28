"""Write the ART fixture with ART's own writer (no GPU, no model service needed).

    python -m venv /tmp/venv-art && /tmp/venv-art/bin/pip install openpipe-art==0.5.18 pyarrow
    /tmp/venv-art/bin/python tests/data/art/generate.py

``write_trajectory_groups_parquet`` (``art/utils/trajectory_logging.py``) writes the groups
to ``<model>/trajectories/<split>/<step:04d>.parquet`` as ``Model.log`` does
(``art/model.py``): two groups of two trajectories at step 1, the model's turns as OpenAI
``Choice`` objects (trainable), a ``search`` tool answered by a tool message.
"""

from __future__ import annotations

import json
from pathlib import Path

from openai.types.chat.chat_completion import ChatCompletionMessage, Choice
from openai.types.chat.chat_completion_message_function_tool_call import ChatCompletionMessageFunctionToolCall, Function

from art import Trajectory, TrajectoryGroup
from art.utils.trajectory_logging import write_trajectory_groups_parquet

HERE = Path(__file__).resolve().parent
OUT = HERE / "email-agent" / "models" / "agent-001" / "trajectories" / "train"


def trajectory(question: str, query: str, found: str, answer: str, reward: float, correct: bool) -> Trajectory:
    call = ChatCompletionMessageFunctionToolCall(
        id="call_1", type="function", function=Function(name="search_inbox", arguments=json.dumps({"keywords": query})))
    return Trajectory(
        messages_and_choices=[
            {"role": "system", "content": "Answer from the inbox."},
            {"role": "user", "content": question},
            Choice(finish_reason="tool_calls", index=0,
                   message=ChatCompletionMessage(role="assistant", content="Let me search.", tool_calls=[call])),
            {"role": "tool", "tool_call_id": "call_1", "content": found},
            Choice(finish_reason="stop", index=0, message=ChatCompletionMessage(role="assistant", content=answer)),
        ],
        reward=reward, metrics={"correct": correct, "num_turns": 2},
    )


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    groups = [
        TrajectoryGroup([trajectory("When is the offsite?", "offsite", "Offsite: 3 May", "3 May", 1.0, True),
                         trajectory("When is the offsite?", "meeting", "no results", "I could not find it.", 0.0,
                                    False)], metadata={"scenario_id": "offsite"}),
        TrajectoryGroup([trajectory("Who sent the invoice?", "invoice", "From: Ana", "Ana", 1.0, True),
                         trajectory("Who sent the invoice?", "invoice", "From: Ana", "Bob", 0.0, False)],
                        metadata={"scenario_id": "invoice"}),
    ]
    write_trajectory_groups_parquet(groups, OUT / "0001.parquet")


if __name__ == "__main__":
    main()

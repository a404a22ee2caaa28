"""Write the verifiers fixture with verifiers' own writer functions (no model service needed).

    python -m venv /tmp/venv-vf && /tmp/venv-vf/bin/pip install verifiers==0.3.1
    /tmp/venv-vf/bin/python tests/data/verifiers/generate.py

``state_to_output``, ``save_outputs`` and ``save_metadata`` (``verifiers/legacy/utils/save_utils.py``)
turn rollout states into ``vf-eval``'s results folder: ``results.jsonl`` (one ``RolloutOutput``
per rollout) and ``metadata.json``. The states are those a multi-turn tool environment leaves:
two examples, two rollouts each, an assistant that calls ``bash`` and then answers, scored by
two reward functions. Timings are fixed so the output does not change between runs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from verifiers.legacy.types import RolloutTiming
from verifiers.legacy.utils.save_utils import save_metadata, save_outputs, state_to_output

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "outputs" / "evals" / "tool-math--mock-model" / "0a1b2c3d"


def state(example_id: int, question: str, command: str, output: str, answer: str, correct: float,
          rollout: int) -> dict:
    call = {"id": f"call_{example_id}_{rollout}", "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
    completion = [
        {"role": "assistant", "content": "Let me compute it.", "reasoning_content": "I should run it.",
         "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": output},
        {"role": "assistant", "content": answer},
    ]
    return {
        "example_id": example_id,
        "prompt": [{"role": "system", "content": "Use bash."}, {"role": "user", "content": question}],
        "completion": completion,
        "answer": "42" if example_id == 0 else "7",
        "info": {},
        "reward": correct + 0.1,
        "metrics": {"correct_answer": correct, "format_reward": 0.1},
        "timing": RolloutTiming(start_time=1_700_000_000.0 + rollout),
        "is_completed": True,
        "is_truncated": rollout == 1 and example_id == 1,
        "stop_condition": "no_tools" if not (rollout == 1 and example_id == 1) else "max_turns_reached",
        "token_usage": {"input_tokens": 120.0, "output_tokens": 30.0 + rollout},
    }


def main() -> None:
    states = [
        state(0, "What is 6*7?", "python3 -c 'print(6*7)'", "42\n", "42", 1.0, 0),
        state(0, "What is 6*7?", "echo $((6*8))", "48\n", "48", 0.0, 1),
        state(1, "What is 49/7?", "python3 -c 'print(49//7)'", "7\n", "7", 1.0, 0),
        state(1, "What is 49/7?", "cat /tmp/answer.txt", "cat: /tmp/answer.txt: No such file", "I am not sure.",
              0.0, 1),
    ]
    if RESULTS.exists():
        shutil.rmtree(RESULTS)
    save_outputs([state_to_output(s) for s in states], RESULTS, mode="w")
    save_metadata({
        "env_id": "tool-math", "env_args": {}, "model": "mock-model", "base_url": "http://localhost:8000/v1",
        "num_examples": 2, "rollouts_per_example": 2, "sampling_args": {"temperature": 1.0, "max_tokens": 256},
        "date": "2026-01-01", "time": 1.0, "avg_reward": 0.6, "avg_metrics": {"correct_answer": 0.5},
        "avg_error": 0.0, "pass_at_k": {}, "pass_all_k": {}, "pass_threshold": 0.5, "usage": None,
        "version_info": {}, "state_columns": [], "path_to_save": RESULTS, "tools": None,
    }, RESULTS)


if __name__ == "__main__":
    main()

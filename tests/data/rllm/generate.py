"""Write the rLLM fixture: episode logger files of DeepSWE-style episodes, built by hand.

rLLM needs verl, Ray and a model server to run an episode, so the files are written here the
way ``EpisodeLogger.log_episode`` (rllm-org/rllm@f56cb74e, ``rllm/utils/episode_logger.py``)
writes them: ``episodes/<mode>_step_<N>_epoch_<E>/episode_hash<sha256(task)[:8]>_id<id>.json``
holding ``json.dumps(episode_data, indent=2, default=str)``, its keys as that function builds
them. Steps are those DeepSWE's ``SWEAgent`` records: the environment's observation before
the model's turn, the model's response, and the R2E-Gym XML function call as the action.

    python tests/data/rllm/generate.py
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOGS = HERE / "logs" / "deepswe" / "run1"
TASK = {"instance_id": "astropy__astropy-12907", "problem_statement": "separability_matrix is wrong for nested models"}


def call(name: str, **parameters: str) -> str:
    body = "".join(f"<parameter={k}>{v}</parameter>\n" for k, v in parameters.items())
    return f"<function={name}>\n{body}</function>"


def step(observation: str, thought: str, action: str, reward: float = 0.0, done: bool = False) -> dict:
    return {"observation": observation, "thought": thought, "action": action, "reward": reward, "done": done,
            "model_response": f"{thought}\n{action}", "chat_completions": [], "timing": {}}


def episode(rollout: int, solved: bool, training_step: int) -> dict:
    steps = [
        step(TASK["problem_statement"], "Find the function.",
             call("search", search_term="def separability_matrix", path="/testbed/astropy")),
        step("Found 1 match in /testbed/astropy/modeling/separable.py", "Open it.",
             call("str_replace_editor", command="view", path="/testbed/astropy/modeling/separable.py")),
        step("def separability_matrix(transform): ...", "Run the tests.",
             call("execute_bash", command="python -m pytest astropy/modeling/tests/test_separable.py -q")),
        step("1 failed, 10 passed" if not solved else "11 passed", "Submit.", call("finish", command="submit"),
             reward=1.0 if solved else 0.0, done=True),
    ]
    episode_id = f"{TASK['instance_id']}:{rollout}"
    return {
        "training_step": training_step, "epoch": 0, "episode_id": episode_id, "task": TASK,
        "task_hash": hashlib.sha256(json.dumps(TASK, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:8],
        "is_correct": solved, "termination_reason": "ENV_DONE", "metrics": {"solver_acc": float(solved)},
        "timing": {},
        "trajectories": [{"name": "solver", "uid": f"00000000-0000-4000-8000-00000000000{rollout}",
                          "reward": 1.0 if solved else 0.0, "num_steps": len(steps), "timing": {}, "steps": steps}],
    }


def main() -> None:
    if LOGS.exists():
        shutil.rmtree(LOGS)
    for mode, training_step, rollouts in (("train", 3, ((0, True), (1, False))), ("val", 4, ((0, True),))):
        folder = LOGS / "episodes" / f"{mode}_step_{training_step}_epoch_0"
        folder.mkdir(parents=True)
        for rollout, solved in rollouts:
            data = episode(rollout, solved, training_step)
            safe = data["episode_id"].replace(":", "_").replace("/", "_")
            (folder / f"episode_hash{data['task_hash']}_id{safe}.json").write_text(
                json.dumps(data, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()

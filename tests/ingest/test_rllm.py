"""rLLM episode logger files (DeepSWE-style episodes with R2E-Gym XML calls)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from end_to_end import through_every_surface  # noqa: E402

from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import formats, load  # noqa: E402

LOGS = Path(__file__).resolve().parents[1] / "data" / "rllm" / "logs"
TRAIN = LOGS / "deepswe" / "run1" / "episodes" / "train_step_3_epoch_0"


def test_episodes_at_their_steps_grouped_by_task_with_calls_and_observations():
    assert [s.format.name for s in formats.plan(LOGS)] == ["rllm"]
    run = load(LOGS)
    rows = [(r["trajectory_id"], r["step"], r["split"], r["group_id"], r["reward"], r["resolved"], r["exit_status"])
            for r in run.trajectories.to_pylist()]
    assert rows == [
        ("train/3/astropy__astropy-12907:0", 3, "train", "astropy__astropy-12907", 1.0, True, "ENV_DONE"),
        ("train/3/astropy__astropy-12907:1", 3, "train", "astropy__astropy-12907", 0.0, False, "ENV_DONE"),
        ("val/4/astropy__astropy-12907:0", 4, "val", "astropy__astropy-12907", 1.0, True, "ENV_DONE")]
    calls = [(c["turn"], c["tool_name"], c["command"], c["observation"]) for c in run.tool_calls.to_pylist()][4:8]
    assert calls == [
        (0, "search", None, "Found 1 match in /testbed/astropy/modeling/separable.py"),
        (1, "str_replace_editor", None, "def separability_matrix(transform): ..."),
        (2, "execute_bash", "python -m pytest astropy/modeling/tests/test_separable.py -q", "1 failed, 10 passed"),
        (3, "finish", None, None)]
    assert run.tool_calls.column("assistant_text")[0].as_py().startswith("Find the function.\n<function=search>")


def test_tool_call_actions_plain_answers_and_logged_advantages(tmp_path):
    data = json.loads(next(TRAIN.glob("*_0.json")).read_text())
    steps = data["trajectories"][0]["steps"]
    steps[0]["action"] = [{"id": "c1", "type": "function",
                           "function": {"name": "execute_bash", "arguments": '{"command": "ls"}'}}]
    steps[-1]["action"] = "The fix is in separable.py."
    for step in steps:
        step["advantage"] = 0.5
    path = tmp_path / "episode.json"
    path.write_text(json.dumps(data))
    run = load(path)
    row = run.trajectories.to_pylist()[0]
    assert (row["response_text"], row["logged_advantage"]) == ("The fix is in separable.py.", 0.5)
    assert run.tool_calls.column("command").to_pylist()[0] == "ls"
    assert run.tool_calls.num_rows == 3


def test_a_bad_action_is_named(tmp_path):
    folder = tmp_path / "episodes"
    shutil.copytree(TRAIN, folder)
    path = next(folder.glob("*_1.json"))
    data = json.loads(path.read_text())
    data["trajectories"][0]["steps"][1]["action"] = [{"oops": 1}]
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as caught:
        load(folder)
    assert caught.value.field == "action" and "step 1" in str(caught.value)
    assert load(folder, strict=False).trajectories.num_rows == 1


def test_rllm_episodes_ingest_classify_report_and_check(tmp_path):
    _, classes = through_every_surface(LOGS, tmp_path)
    assert [kind for _, kind in classes.rows()][:4] == ["search", "view", "test_targeted", "submit"]


def _episodes_with_grpo_advantages() -> list[dict]:
    """``Episode.to_dict()`` records of two tasks, four rollouts each, every step carrying the
    GRPO advantage of its rollout's reward (group mean, unbiased group std, eps 1e-6)."""
    import statistics

    episodes = []
    for task, rewards in (("t1", [1.0, 0.0, 0.0, 1.0]), ("t2", [1.0, 1.0, 0.0, 1.0])):
        mean, std = statistics.mean(rewards), statistics.stdev(rewards)
        for index, reward in enumerate(rewards):
            advantage = (reward - mean) / (std + 1e-6)
            steps = [{"observation": "task", "thought": "", "model_response": "", "reward": 0.0, "done": False,
                      "action": "<function=execute_bash>\n<parameter=command>ls</parameter>\n</function>",
                      "advantage": advantage, "prompt_ids": [1], "response_ids": [2], "logprobs": [-0.1]},
                     {"observation": "a.txt", "thought": "", "model_response": "Done.", "reward": reward, "done": True,
                      "action": "Done.", "advantage": advantage, "prompt_ids": [1], "response_ids": [3],
                      "logprobs": [-0.2]}]
            episodes.append({"id": f"{task}:{index}", "task": {"q": task}, "termination_reason": "ENV_DONE",
                             "is_correct": reward == 1.0, "metrics": {}, "info": {},
                             "trajectories": [{"uid": f"{task}{index}", "name": "solver", "task": {"q": task},
                                               "steps": steps, "reward": reward, "info": {}}]})
    return episodes


def test_logged_step_advantages_are_identified_as_the_estimator_that_made_them(tmp_path):
    from cli_run import run_cli

    path = tmp_path / "episodes.json"
    path.write_text(json.dumps(_episodes_with_grpo_advantages()))
    assert run_cli("ingest", path, "--store", tmp_path / "store").returncode == 0
    done = run_cli("advantages", tmp_path / "store", "--run", "episodes", "--identify", "--json", tmp_path / "id.json")
    assert done.returncode == 0, done.stderr
    best = json.loads((tmp_path / "id.json").read_text())["best"]
    assert (best["label"], best["n"]) == ("verl_grpo", 8) and best["max_abs_diff"] < 1e-6

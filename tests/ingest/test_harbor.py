"""Harbor job folders: trials' results and ATIF trajectories, written by harbor's own models."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from cli_run import run_cli  # noqa: E402
from end_to_end import through_every_surface  # noqa: E402

from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import formats, load  # noqa: E402

JOBS = Path(__file__).resolve().parents[1] / "data" / "harbor" / "jobs"
TRIAL = JOBS / "2026-01-01__00-00-00" / "hello-world__trial1"


def test_trials_are_trajectories_grouped_by_task_with_their_steps():
    assert [s.format.name for s in formats.plan(JOBS)] == ["harbor"]
    run = load(JOBS)
    rows = [(r["trajectory_id"], r["group_id"], r["reward"], r["exit_status"], r["num_turns"], r["model_tokens"])
            for r in run.trajectories.to_pylist()]
    assert rows == [("hello-world__trial1", "hello-world", 1.0, "completed", 3, 38),
                    ("hello-world__trial2", "hello-world", 0.0, "completed", 3, 39)]
    calls = [(c["turn"], c["tool_name"], c["command"], c["observation"], c["assistant_text"])
             for c in run.tool_calls.to_pylist()][:4]
    assert calls == [
        (0, "bash_command", "ls -la", "total 0\n", "The folder may already hold it.\nLook first."),
        (1, "bash_command", "echo 'Hello, world!' > hello.txt", None, "Write the file and check it."),
        (1, "bash_command", "cat hello.txt", "Hello, world!\n", None),  # a batch's one output: its last call's
        (2, "mark_task_complete", None, "", "Done."),
    ]
    config = json.loads(run.runs.column("config")[0].as_py())
    assert config["agent_info"]["name"] == "terminus-2"


def test_a_trajectory_without_a_result_is_a_trajectory_of_its_own(tmp_path):
    shutil.copy(TRIAL / "agent" / "trajectory.json", tmp_path / "trajectory.json")
    run = load(tmp_path / "trajectory.json")
    row = run.trajectories.to_pylist()[0]
    assert (row["trajectory_id"], row["reward"], row["model_tokens"], row["num_turns"]) == ("session-1", None, 37, 3)


def test_a_bad_reward_is_named(tmp_path):
    trial = tmp_path / "job" / "t"
    shutil.copytree(TRIAL, trial)
    result = json.loads((trial / "result.json").read_text())
    result["verifier_result"]["rewards"]["reward"] = "pass"
    (trial / "result.json").write_text(json.dumps(result))
    with pytest.raises(InputError) as caught:
        load(tmp_path / "job")
    assert caught.value.field == "verifier_result.rewards.reward"


def test_harbor_jobs_ingest_classify_report_and_check(tmp_path):
    _, classes = through_every_surface(JOBS, tmp_path)
    assert [kind for _, kind in classes.rows()][:4] == ["search", "edit", "view", "submit"]


def test_the_agent_s_own_chat_logs_in_a_trial_do_not_split_the_job(tmp_path):
    job = tmp_path / "job"
    shutil.copytree(JOBS / "2026-01-01__00-00-00", job)
    for trial in job.iterdir():
        episode = trial / "agent" / "episode-0"
        episode.mkdir()
        (episode / "debug.json").write_text(json.dumps({"model": "mock", "messages": [
            {"role": "user", "content": "Create hello.txt."}, {"role": "assistant", "content": "ok"}]}))
    (job / "result.json").write_text(json.dumps({"id": "j", "n_total_trials": 2, "stats": {}}))
    sources = formats.plan(job)
    assert [(s.format.name, s.run_id, len(s.paths)) for s in sources] == [("harbor", "job", 2)]
    assert load(job).trajectories.num_rows == 2


@pytest.mark.parametrize("text, found", [
    ("", "expected JSON, found an empty file"),
    ("[]", "expected a JSON object, found a list"),
    ('{"foo": 1}', "field 'task_name': expected a string, found no such key"),
], ids=["empty", "array", "no-trial-result"])
def test_a_trial_s_result_gone_bad_is_named_not_read_as_a_trajectory_of_its_own(tmp_path, text, found):
    """A result.json beside a trial's agent/ folder is that trial's result whatever it holds."""
    jobs = tmp_path / "jobs"
    shutil.copytree(JOBS, jobs)
    result = jobs / TRIAL.relative_to(JOBS) / "result.json"
    result.write_text(text)
    done = run_cli("ingest", jobs, "--store", tmp_path / "store")
    assert done.returncode == 1 and not (tmp_path / "store").exists()
    assert done.stderr == f"error: {result}: {found}\n"
    run = load(jobs, strict=False)
    assert run.trajectories.column("trajectory_id").to_pylist() == ["hello-world__trial2"]
    assert [p.message for p in run.problems] == [f"{result}: {found}"]
    assert json.loads(run.runs.column("config")[0].as_py())["agent_info"]["name"] == "terminus-2"


def test_a_trial_whose_result_is_gone_bad_and_has_no_trajectory_is_named(tmp_path):
    jobs = tmp_path / "jobs"
    shutil.copytree(JOBS, jobs)
    trial = jobs / TRIAL.relative_to(JOBS)
    (trial / "agent" / "trajectory.json").unlink()
    (trial / "result.json").write_text("")
    with pytest.raises(InputError, match="expected JSON, found an empty file") as caught:
        load(jobs)
    assert caught.value.file == str(trial / "result.json")

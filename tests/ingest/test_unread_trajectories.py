"""A file named as a trajectory of the format being loaded (``*.traj.json`` in a mini-swe-agent
run, ``rollouts_step_<N>.json`` among Prime hosted samples, ``episode_*.json`` in an rLLM episode
folder, OpenHands' ``state_<task>.json`` and ``traj_<task>.json``) that cannot be read as one is never
left out of the run without a word: an empty file, one of another ``trajectory_format`` or
shape, one beside logs of two formats. Strict ingest stops with
the standard one-line error naming it; lenient ingest skips it with that problem. Files named
otherwise (a README, a JSON config) are still left out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_run import run_cli as trajlens
from hostile import OPENHANDS_V1, SWE_AGENT

from trajlens.errors import InputError
from trajlens.ingest import load
from trajlens.ingest.agents import load_mini_swe_agent_v2

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "real"
real_logs = pytest.mark.skipif(not REAL.is_dir(), reason="real fixture logs not present")
KNOWN = "(the formats known: 'mini-swe-agent-1' or 'mini-swe-agent-1.1')"


def mini_v2(task: str) -> dict:
    return {
        "trajectory_format": "mini-swe-agent-1.1", "instance_id": task, "info": {"exit_status": "Submitted"},
        "messages": [
            {"role": "system", "content": "use bash"}, {"role": "user", "content": "task"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.py", "extra": {"returncode": 0}},
        ],
    }


def mini_v1(task: str) -> dict:
    return {
        "trajectory_format": "mini-swe-agent-1", "instance_id": task, "info": {"exit_status": "Submitted"},
        "messages": [
            {"role": "system", "content": "use bash"}, {"role": "user", "content": "task"},
            {"role": "assistant", "content": "THOUGHT\n```bash\nls\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>a.py</output>"},
        ],
    }


def task_run(tmp_path, second: str):
    """``run/t1/t1.traj.json`` (a good trajectory) and ``run/t2/t2.traj.json`` holding ``second``,
    one folder per task as ``mini-extra swebench`` writes them; a README and a config beside."""
    run = tmp_path / "run"
    for task, text in (("t1", json.dumps(mini_v2("t1"))), ("t2", second)):
        (run / task).mkdir(parents=True)
        (run / task / f"{task}.traj.json").write_text(text)
    (run / "README.md").write_text("notes")
    (run / "config.json").write_text(json.dumps({"model": "m"}))
    return run


@pytest.mark.parametrize("second, reason", [
    ("", "expected JSON, found an empty file"),
    (json.dumps({**mini_v2("t2"), "trajectory_format": "mini-swe-agent-1.2"}),
     f"field 'trajectory_format': expected 'mini-swe-agent-1.1' {KNOWN}, found 'mini-swe-agent-1.2'"),
])
def test_a_task_file_that_is_no_trajectory_is_named_not_dropped(tmp_path, second, reason):
    run = task_run(tmp_path, second)
    bad = run / "t2" / "t2.traj.json"
    done = trajlens("ingest", run, "--store", tmp_path / "store")
    assert done.returncode == 1 and not (tmp_path / "store").exists()
    assert done.stderr == f"error: {bad}: {reason}\n"
    lenient = trajlens("ingest", run, "--store", tmp_path / "store", "--lenient")
    assert lenient.returncode == 0, lenient.stderr
    assert lenient.stderr == f"skipped: {bad}: {reason}\n"
    assert "skipped 1 (each named above)" in lenient.stdout
    with pytest.raises(InputError, match="t2.traj.json"):
        load_mini_swe_agent_v2(run)
    assert load_mini_swe_agent_v2(run, strict=False).trajectories.column("task_id").to_pylist() == ["t1"]


def test_files_not_named_as_trajectories_are_still_left_out(tmp_path):
    run = task_run(tmp_path, json.dumps(mini_v2("t2")))
    (run / "t2" / "summary.json").write_text("")
    done = trajlens("ingest", run, "--store", tmp_path / "store")
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_a_lone_trajectory_file_of_another_version_says_which(tmp_path):
    path = tmp_path / "t.traj.json"
    path.write_text(json.dumps({**mini_v2("t"), "trajectory_format": "mini-swe-agent-9"}))
    done = trajlens("ingest", path, "--store", tmp_path / "store")
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {path}: field 'trajectory_format': expected 'mini-swe-agent-1' {KNOWN}, "
                                  "found 'mini-swe-agent-9'")


def test_in_a_mixed_folder_a_trajectory_file_goes_to_the_one_format_it_is_named_for(tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    # a long info first: the keys its head shows are not a short file's, so no key match makes it a stray
    good = mini_v2("a")
    (folder / "a.traj.json").write_text(json.dumps({"info": {**good.pop("info"), "pad": "x" * 70_000}, **good}))
    (folder / "state_x.json").write_text(json.dumps(OPENHANDS_V1))
    (folder / "e.traj.json").write_text(json.dumps({**mini_v2("e"), "trajectory_format": "mini-swe-agent-9"}))
    done = trajlens("ingest", folder, "--store", tmp_path / "store")
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {folder / 'e.traj.json'}: field 'trajectory_format': ")


def test_in_a_mixed_folder_a_file_two_formats_claim_is_reported(tmp_path):
    """Beside logs of v1 and v2, an empty ``*.traj.json`` is read by neither, but said to be."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "a.traj.json").write_text(json.dumps(mini_v1("a")))
    (folder / "b.traj.json").write_text(json.dumps(mini_v2("b")))
    (folder / "c.traj.json").write_text("")
    done = trajlens("ingest", folder, "--store", tmp_path / "store")
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"error: {folder / 'c.traj.json'}: left out: it looks like a log of "
                                  "mini-swe-agent-v1 and of mini-swe-agent-v2 gone bad")
    assert done.stderr.strip().endswith("found an empty file")
    lenient = trajlens("ingest", folder, "--store", tmp_path / "store", "--lenient")
    assert lenient.returncode == 0, lenient.stderr
    assert lenient.stderr.startswith(f"skipped: {folder / 'c.traj.json'}: left out")
    assert "ingested 2 run(s)" in lenient.stdout


@pytest.mark.parametrize("name", ["x.jsonl", "x.json"])
def test_an_empty_file_is_said_to_be_empty(tmp_path, name):
    path = tmp_path / name
    path.write_text("")
    done = trajlens("ingest", path, "--store", tmp_path / "store")
    assert done.returncode == 1 and done.stderr.strip().endswith("found an empty file"), done.stderr


def test_an_empty_swe_agent_trajectory_beside_good_ones_is_named(tmp_path):
    run = tmp_path / "run"
    for task in ("a", "b"):
        (run / task).mkdir(parents=True)
    (run / "a" / "a.traj").write_text(json.dumps(SWE_AGENT))
    (run / "b" / "b.traj").write_text("")
    done = trajlens("ingest", run, "--store", tmp_path / "store")
    assert done.stderr == f"error: {run / 'b' / 'b.traj'}: expected JSON, found an empty file\n"


def with_notes_beside(folder: Path) -> Path:
    """A README and a JSON config beside the logs of ``folder``: neither is a log gone bad."""
    (folder / "README.md").write_text("notes")
    (folder / "config.json").write_text(json.dumps({"model": "m"}))
    return folder


def named_not_dropped(tmp_path: Path, folder: Path, bad: Path, reason: str, kept: int) -> None:
    """Strict ingest of ``folder`` stops with the one-line error naming ``bad``; lenient ingest
    skips it with that problem and keeps the ``kept`` trajectories of the other logs."""
    done = trajlens("ingest", folder, "--store", tmp_path / "store")
    assert done.returncode == 1 and not (tmp_path / "store").exists()
    assert done.stderr == f"error: {bad}: {reason}\n"
    lenient = trajlens("ingest", folder, "--store", tmp_path / "store", "--lenient")
    assert lenient.returncode == 0, lenient.stderr
    assert lenient.stderr == f"skipped: {bad}: {reason}\n"
    assert "skipped 1 (each named above)" in lenient.stdout
    assert load(folder, strict=False).trajectories.num_rows == kept


def prime_hosted(tmp_path: Path) -> Path:
    return with_notes_beside(Path(shutil.copytree(DATA / "prime_hosted", tmp_path / "hosted",
                                                  ignore=shutil.ignore_patterns("*.py"))))


@pytest.mark.parametrize("text, reason", [
    ("", "expected JSON, found an empty file"),
    ('{"data": []}', "record 0: field 'step': expected an integer from 0 to 9223372036854775807, found no such key"),
    ('"hello"', "record 0: expected a rollout sample (an object), found a string"),
    ("hello", "record line 1, column 1: not JSON (Expecting value), expected JSON"),
])
def test_a_prime_hosted_page_that_is_no_page_is_named_not_dropped(tmp_path, text, reason):
    """``rollouts_step_10.json`` holds the 8 samples of step 10: gone bad, the run is not step 20 alone."""
    folder = prime_hosted(tmp_path)
    (folder / "rollouts_step_10.json").write_text(text)
    named_not_dropped(tmp_path, folder, folder / "rollouts_step_10.json", reason, kept=8)


def test_beside_prime_hosted_samples_files_named_otherwise_are_still_left_out(tmp_path):
    folder = prime_hosted(tmp_path)
    (folder / "notes.json").write_text("")
    done = trajlens("ingest", folder, "--store", tmp_path / "store")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert load(folder).trajectories.num_rows == 16


RLLM_EPISODE = Path("deepswe/run1/episodes/train_step_3_epoch_0/episode_hashe956f804_idastropy__astropy-12907_1.json")


@pytest.mark.parametrize("text, reason", [
    ("", "expected JSON, found an empty file"),
    ('{"foo": 1}', "field 'id': expected a string or integer id, found no such key"),
])
def test_an_rllm_episode_file_that_is_no_episode_is_named_not_dropped(tmp_path, text, reason):
    logs = Path(shutil.copytree(DATA / "rllm" / "logs", tmp_path / "logs"))
    with_notes_beside(logs / RLLM_EPISODE.parent)
    (logs / RLLM_EPISODE).write_text(text)
    named_not_dropped(tmp_path, logs, logs / RLLM_EPISODE, reason, kept=2)


def test_beside_rllm_episodes_files_named_otherwise_are_still_left_out(tmp_path):
    logs = Path(shutil.copytree(DATA / "rllm" / "logs", tmp_path / "logs"))
    with_notes_beside(logs / RLLM_EPISODE.parent)
    (logs / RLLM_EPISODE.parent / "batch_summary.json").write_text("")
    done = trajlens("ingest", logs, "--store", tmp_path / "store")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert load(logs).trajectories.num_rows == 3


def openagentsafety(tmp_path: Path) -> Path:
    """Two OpenHands V1 tasks of OpenAgentSafety, the grade of one and the events export of a
    third, as the harness writes them side by side; a README and a config beside."""
    outputs = next((REAL / "openhands-benchmarks-openagentsafety").rglob("state_safety-flattening.json")).parent
    folder = tmp_path / "outputs"
    folder.mkdir()
    for name in ("state_safety-flattening.json", "eval_safety-flattening.json", "state_safety-unsafe-feedback-form.json",
                 "traj_safety-transitions.json"):
        shutil.copyfile(outputs / name, folder / name)
    return with_notes_beside(folder)


@real_logs
@pytest.mark.parametrize("name, text, reason", [
    ("state_safety-flattening.json", "", "expected JSON, found an empty file"),
    ("state_safety-flattening.json", '{"events": 1}', "field 'history': expected a list, found no such key"),
    ("traj_safety-transitions.json", "", "expected JSON, found an empty file"),
])
def test_an_openhands_v1_task_log_that_is_no_log_is_named_not_dropped(tmp_path, name, text, reason):
    folder = openagentsafety(tmp_path)
    (folder / name).write_text(text)
    named_not_dropped(tmp_path, folder, folder / name, reason, kept=2)


def runtime_trajs(tmp_path: Path) -> Path:
    """OpenHands V0 event lists, ``basic.json`` under the name TheAgentCompany's harness gives a
    task's events (``traj_<task>.json``); a README and a config beside."""
    folder = tmp_path / "trajs"
    folder.mkdir()
    for log in (REAL / "OpenHands" / "tests" / "runtime" / "trajs").glob("*.json"):
        shutil.copyfile(log, folder / ("traj_basic.json" if log.name == "basic.json" else log.name))
    return with_notes_beside(folder)


@real_logs
@pytest.mark.parametrize("text, reason", [
    ("", "expected JSON, found an empty file"),
    ('{"events": 1}', "expected a JSON list of OpenHands events, found an object"),
])
def test_an_openhands_v0_task_log_that_is_no_log_is_named_not_dropped(tmp_path, text, reason):
    folder = runtime_trajs(tmp_path)
    (folder / "traj_basic.json").write_text(text)
    named_not_dropped(tmp_path, folder, folder / "traj_basic.json", reason, kept=3)


@real_logs
@pytest.mark.parametrize("make, logs", [(openagentsafety, 3), (runtime_trajs, 4)], ids=["v1", "v0"])
def test_beside_openhands_logs_files_named_otherwise_are_still_left_out(tmp_path, make, logs):
    """The grader's ``eval_<task>.json``, a README, a config and an empty note are no logs."""
    folder = make(tmp_path)
    (folder / "notes.json").write_text("")
    done = trajlens("ingest", folder, "--store", tmp_path / "store")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert load(folder).trajectories.num_rows == logs

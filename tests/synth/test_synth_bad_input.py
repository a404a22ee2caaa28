"""``trajlens synth`` on bad input: one line, exit 1, no traceback, and nothing left behind.

Every size is bounded (a mistyped number fails at once instead of running until killed or
overflowing a step number), every scenario's sizes are checked the same way, and the run is
written beside ``--out`` and moved into place only at the end, so a run that fails or is
interrupted leaves no folder under the ``--out`` name.
"""

from __future__ import annotations

import errno
import importlib
import signal
import subprocess
import sys
import time

import pytest

from cli_run import REPO, run_cli
from trajlens.errors import ConfigError
from trajlens.synth import generate
from trajlens.synth.generate import MAX_STEP, MAX_STEPS, configure

TINY = ("--steps", "2", "--batch", "2", "--calls", "3", "--tokens", "50")


def assert_refused(done: subprocess.CompletedProcess[str], *named: str) -> None:
    """Exit 1 with one line on stderr naming every one of ``named``, and no traceback."""
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    err = done.stderr.strip()
    assert "Traceback" not in done.stderr and "\n" not in err, done.stderr
    assert err.startswith("error: "), err
    for name in named:
        assert name in err, (name, err)


def assert_empty(folder) -> None:
    """Nothing was left in ``folder``: no run directory, no partial sibling."""
    assert sorted(p.name for p in folder.iterdir()) == []


@pytest.mark.parametrize(("args", "named"), [
    (["sao-r6", "--steps", "2", "--batch", "2", "--first-step", "99999999999999999999"], ["--first-step", "2,147,483,647"]),
    (["sao-r6", "--steps", "2", "--batch", "2", "--first-step", "9223372036854775807"], ["--first-step"]),
    (["sao-r6", "--steps", "2", "--batch", "2", "--first-step", str(MAX_STEP)], ["--first-step", "2,147,483,646"]),
    (["sao-r6", "--steps", "2", "--batch", "2", "--first-step", "0"], ["--first-step"]),
    (["sao-r6", "--steps", "2", "--batch", "2", "--first-step", "-5"], ["--first-step"]),
    (["sao-r6", "--steps", "0"], ["--steps", "100,000"]),
    (["sao-r6", "--steps", "99999999999999999999"], ["--steps", "100,000"]),
    (["sao-r6", "--steps", "2", "--batch", "2", "--calls", "99999999"], ["--calls", "1,000"]),
    (["sao-r6", "--steps", "2", "--batch", "99999999"], ["--batch", "16,384"]),
    (["sao-r6", "--steps", "2", "--batch", "-4"], ["--batch"]),
    (["sao-r6", "--steps", "2", "--tokens", "1000000000"], ["--tokens", "200,000"]),
    (["sao-r6", "--steps", "2", "--batch", "16384", "--tokens", "200000"], ["--batch x --tokens", "50,000,000"]),
    (["sao-r6", "--steps", "2", "--batch", "16384", "--calls", "1000"], ["--batch x --calls", "1,000,000"]),
    (["resume-lr", "--batch", "-3", "--calls", "-1", "--tokens", "5"], ["--batch", "--calls", "--tokens"]),
    (["resume-lr", "--steps", "99999999999"], ["--steps"]),
    (["resume-lr", "--first-step", "5"], ["--first-step"]),
])
def test_bad_sizes_are_one_line_and_leave_nothing(tmp_path, monkeypatch, args, named):
    """Refused before any work: without a bound some of these ran until killed or out of memory."""
    def no_work(*args, **kwargs):
        raise AssertionError("generation started despite bad input")

    monkeypatch.setattr(importlib.import_module("trajlens.synth.generate"), "_generate", no_work)
    monkeypatch.setattr(importlib.import_module("trajlens.synth._resume"), "generate_resume", no_work)
    done = run_cli("synth", *args, "--out", "sy", cwd=tmp_path)
    assert_refused(done, *named)
    assert_empty(tmp_path)


def test_the_largest_documented_sizes_are_allowed(tmp_path):
    configure("sao-r7", tmp_path / "a", steps=200, batch=64, tool_calls_per_trajectory=50, tokens_per_trajectory=60_000)
    configure("multireward", tmp_path / "b", batch=1024, tool_calls_per_trajectory=3, tokens_per_trajectory=100)
    configure("sao-r6", tmp_path / "c", steps=1000, batch=16)
    configure("sao-r6", tmp_path / "d", steps=MAX_STEPS, first_step=MAX_STEP - MAX_STEPS + 1, seed=2**63 - 1)
    assert_empty(tmp_path)


def test_the_last_allowed_step_is_written(tmp_path):
    done = run_cli("synth", "sao-r6", *TINY, "--first-step", MAX_STEP - 1, "--out", "sy", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "sy" / "trajectories").iterdir()) == [
        f"step={MAX_STEP - 1}", f"step={MAX_STEP}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sy"]


def test_resume_scenarios_are_checked_like_the_others(tmp_path):
    with pytest.raises(ConfigError) as error:
        generate("resume-lr", tmp_path / "x", batch=-3, tool_calls_per_trajectory=-1, tokens_per_trajectory=5)
    assert len(error.value.problems) == 3
    assert [p.split()[0] for p in error.value.problems] == ["batch", "tool_calls_per_trajectory", "tokens_per_trajectory"]
    assert_empty(tmp_path)


def test_an_existing_out_is_refused_and_kept(tmp_path):
    (tmp_path / "sy").mkdir()
    (tmp_path / "sy" / "keep.txt").write_text("mine")
    done = run_cli("synth", "sao-r6", *TINY, "--out", "sy", cwd=tmp_path)
    assert_refused(done, "--out sy", "already exists")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sy"]
    assert sorted(p.name for p in (tmp_path / "sy").iterdir()) == ["keep.txt"]


def test_an_interrupted_run_leaves_nothing_and_the_next_run_succeeds(tmp_path, monkeypatch):
    import contextlib

    command = importlib.import_module("trajlens.cli.synth")

    @contextlib.contextmanager
    def interrupting_bar(description, total=None):
        def tick(label):
            raise KeyboardInterrupt  # Ctrl-C once the first step is written

        yield tick

    with monkeypatch.context() as patch:
        patch.setattr(command, "progress_bar", interrupting_bar)
        done = run_cli("synth", "sao-r6", *TINY, "--out", "runs/sy", cwd=tmp_path)
    assert done.returncode == 130 and "Traceback" not in done.stderr
    assert_empty(tmp_path)  # not even the parent folder made for it
    done = run_cli("synth", "sao-r6", *TINY, "--out", "runs/sy", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"to {'runs/sy'}; truth in runs/sy/truth.json" in done.stdout.replace("\\", "/")
    assert (tmp_path / "runs" / "sy" / "truth.json").is_file()


def test_a_failure_while_writing_leaves_nothing(tmp_path, monkeypatch):
    from trajlens.synth.truth import TruthRecorder

    def full_disk(self, directory, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(directory / "truth.json"))

    monkeypatch.setattr(TruthRecorder, "write", full_disk)
    done = run_cli("synth", "sao-r6", *TINY, "--out", "sy", cwd=tmp_path)
    assert_refused(done, "--out sy/truth.json", "No space left on device")
    assert ".partial" not in done.stderr
    assert_empty(tmp_path)


def test_a_partial_folder_left_by_a_killed_run_does_not_block(tmp_path):
    (tmp_path / ".sy.0123abcd.partial" / "tokens").mkdir(parents=True)
    done = run_cli("synth", "sao-r6", *TINY, "--out", "sy", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "sy" / "truth.json").is_file()


@pytest.mark.slow
def test_ctrl_c_in_a_real_process_leaves_nothing(tmp_path):
    """The reported case: SIGINT while a large run is being written."""
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))}
    process = subprocess.Popen([sys.executable, "-m", "trajlens", "synth", "sao-r6", "--out", "sy", "--steps", "500",
                                "--batch", "64"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        # wait until a step has been written, so that the interrupt lands mid-run
        while not list(tmp_path.glob("*/trajectories/step=*")) and process.poll() is None:
            assert time.monotonic() < deadline, "no step written within 120 s"
            time.sleep(0.05)
        assert process.poll() is None, process.communicate()
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert_empty(tmp_path)


def test_a_reward_channel_the_loop_did_not_collapse_is_declared_not_moved(tmp_path):
    """Four steps of the two-channel loop: its format rate never halves, so truth.json names the
    declared collapse as not made, as it names a class whose policy stood still."""
    import json

    done = run_cli("synth", "causal-multireward", "--steps", "4", "--batch", "64", "--seed", "3", "--out", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    truth = json.loads((tmp_path / "r" / "truth.json").read_text())
    rates = truth["per_step"]["format_rate"]
    assert min(rates[-1:]) > max(rates[:1]) / 2  # the last quarter's rate is more than half the first's
    collapse = {"primary_class": "reward channel format", "direction": "collapsed", "verdict": "estimator artefact"}
    assert truth["summary"]["verdicts"] == [] and truth["summary"]["not_moved"] == [{**collapse, "unmoved": "channel"}]
    shipped = json.loads((REPO / "sample_data" / "causal-multireward" / "truth.json").read_text())["summary"]
    assert shipped["verdicts"] == [collapse] and shipped["not_moved"] == []


def test_a_causal_scenario_runs_from_the_cli_with_the_verdicts_it_should_get(tmp_path):
    """The causal loops were reachable from Python only; their truth.json now names the verdicts
    attribution should give the drifts they cause, and whether the run is a control."""
    import json

    done = run_cli("synth", "causal-r6", "--steps", "5", "--batch", "8", "--seed", "3", "--out", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "r" / "truth.json").read_text())["summary"]
    # five steps do not reach the hard tasks from which think takes off: no drift to find, and truth.json says so
    think = {"primary_class": "think", "direction": "grew", "verdict": "estimator artefact"}
    assert summary["verdicts"] == [] and summary["not_moved"] == [{**think, "unmoved": "policy"}]
    assert summary["control"] is False
    shipped = json.loads((REPO / "sample_data" / "causal-r6" / "truth.json").read_text())["summary"]
    assert shipped["verdicts"] == [think] and shipped["not_moved"] == []  # 90 steps: think takes off
    assert json.loads((tmp_path / "r" / "truth.json").read_text())["sizes"] == {
        "steps": 5, "batch": 8, "group_size": 1, "calls_per_trajectory": 10}
    done = run_cli("synth", "causal-r6", "--calls", "5", "--steps", "0", "--out", tmp_path / "bad")
    assert_refused(done, "--calls", "--steps")
    assert not (tmp_path / "bad").exists()

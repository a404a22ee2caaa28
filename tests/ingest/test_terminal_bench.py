"""Terminal-Bench ``tb run`` folders: trials' results and the keys sent to their terminals."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from cli_run import run_cli  # noqa: E402
from end_to_end import through_every_surface  # noqa: E402

from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import formats, load  # noqa: E402

RUNS = Path(__file__).resolve().parents[1] / "data" / "terminal_bench" / "runs"
HELLO = RUNS / "2026-01-01__00-00-00" / "hello-world" / "hello-world.1-of-1.2026-01-01__00-00-00"


def test_trials_with_their_verdicts_tests_and_keys():
    assert [s.format.name for s in formats.plan(RUNS)] == ["terminal-bench"]
    run = load(RUNS)
    rows = [(r["trajectory_id"].split(".")[0], r["group_id"], r["reward"], r["resolved"], r["exit_status"],
             r["num_turns"], r["model_tokens"]) for r in run.trajectories.to_pylist()]
    assert rows == [("fix-permissions", "fix-permissions", 0.0, False, "agent_timeout", 4, 81),
                    ("hello-world", "hello-world", 1.0, True, "none", 3, 80)]
    assert [r["reward_channels"] for r in run.trajectories.to_pylist()] == [
        [{"name": "tests_passed", "value": 0.5}], [{"name": "tests_passed", "value": 1.0}]]
    commands = run.tool_calls.column("command").to_pylist()
    assert commands == ["ls -l process_data.sh", "chmod +x process_data.sh", None, "./process_data.sh", "ls -la",
                        "cat > hello.txt << 'EOF'\nHello, world!\nEOF", "cat hello.txt"]  # the test run left out


@pytest.mark.parametrize("line, found", [("__import__('os').system('x')", "__import__"), ("{'a': 1}", "an object")])
def test_a_commands_line_that_is_not_keys_is_named_and_never_run(tmp_path, line, found):
    trial = tmp_path / "run" / "t" / "t.1"
    shutil.copytree(HELLO, trial)
    (trial / "commands.txt").write_text(f"['ls', 'Enter']\n{line}\n")
    with pytest.raises(InputError, match=f"commands.txt: record line 2: .*found .*{found}") as caught:
        load(tmp_path / "run")
    assert "\n" not in str(caught.value)
    assert load(tmp_path / "run", strict=False).trajectories.num_rows == 0


def test_terminal_bench_runs_ingest_classify_report_and_check(tmp_path):
    _, classes = through_every_surface(RUNS, tmp_path)
    # the keys' text goes through the shell rules; a bare C-c types no command
    assert [kind for _, kind in classes.rows()] == ["search", "other", "other", "run_script", "search", "edit", "view"]


def test_the_agent_s_own_logs_in_a_trial_do_not_split_the_run(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RUNS / "2026-01-01__00-00-00", run)
    for results in run.glob("*/*/results.json"):
        episode = results.parent / "agent-logs" / "episode-0"
        episode.mkdir(parents=True)
        (episode / "debug.json").write_text('{"messages": [{"role": "user", "content": "hi"}]}')
    assert [(s.format.name, s.run_id) for s in formats.plan(run)] == [("terminal-bench", "run")]
    assert load(run).trajectories.num_rows == 2


@pytest.mark.parametrize("text, found", [
    ("", "expected JSON, found an empty file"),
    ("[]", "expected a trial's results (an object), found a list"),
    ('{"foo": 1}', "field 'task_id': expected a string, found no such key"),
], ids=["empty", "array", "no-trial-results"])
def test_a_trial_s_results_gone_bad_are_named_and_the_run_keeps_its_name(tmp_path, text, found):
    """A results.json in a folder named as the harness names trials is that trial's whatever it holds."""
    runs = tmp_path / "runs"
    shutil.copytree(RUNS, runs)
    results = runs / HELLO.relative_to(RUNS) / "results.json"
    results.write_text(text)
    done = run_cli("ingest", runs, "--store", tmp_path / "store")
    assert done.returncode == 1 and not (tmp_path / "store").exists()
    assert done.stderr == f"error: {results}: {found}\n"
    assert [(s.format.name, s.run_id) for s in formats.plan(runs)] == [("terminal-bench", "runs")]
    run = load(runs, strict=False)
    assert [r["trajectory_id"].split(".")[0] for r in run.trajectories.to_pylist()] == ["fix-permissions"]
    assert run.runs.column("run_id").to_pylist() == ["runs"]
    assert [p.message for p in run.problems] == [f"{results}: {found}"]

"""A problem that left a record out is a skip; one on a record that was kept (a logged pattern
replaced by the harness default) is a note: the command line says which, and counts only skips."""

from __future__ import annotations

import json

import pytest
from cli_run import run_cli as trajlens
from hostile import MINI_V1, _set

import trajlens as api
from trajlens.ingest import Limits

PATTERN_NOTE = ("field 'info.config.agent.action_regex': the logged action_regex ran past 0.2 s on one message; "
                "read with the default pattern instead, found (a|aa)+$")


@pytest.fixture
def logs(tmp_path):
    """A run folder of two mini-swe-agent tasks: one whose logged action_regex backtracks
    without end (read with the default pattern), one whose messages are no list (bad)."""
    folder = tmp_path / "mini"
    folder.mkdir()
    slow = _set(MINI_V1, "info.config.agent.action_regex", "(a|aa)+$")
    slow["messages"].insert(2, {"role": "assistant", "content": "a" * 40 + "!"})
    (folder / "task-1.traj.json").write_text(json.dumps(slow))
    (folder / "task-2.traj.json").write_text(json.dumps({**MINI_V1, "instance_id": "task-2", "messages": None}))
    return folder


def test_a_pattern_replaced_by_the_default_is_a_note_and_nothing_is_counted_skipped(logs, tmp_path):
    (logs / "task-2.traj.json").unlink()
    done = trajlens("ingest", logs, "--store", tmp_path / "store", "--limit", "regex_seconds=0.2")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [f"note: {logs / 'task-1.traj.json'}: {PATTERN_NOTE}"]
    assert done.stdout.strip() == f"ingested 1 run(s) into {tmp_path / 'store'}: mini"
    store = api.open(tmp_path / "store")
    assert store.sql("SELECT count(*) FROM tool_calls").item() == 2


def test_lenient_ingest_counts_the_skipped_record_and_not_the_note(logs, tmp_path):
    done = trajlens("ingest", logs, "--store", tmp_path / "store", "--limit", "regex_seconds=0.2", "--lenient")
    assert done.returncode == 0, done.stderr
    lines = sorted(done.stderr.splitlines())
    assert lines[0] == f"note: {logs / 'task-1.traj.json'}: {PATTERN_NOTE}"
    assert lines[1].startswith(f"skipped: {logs / 'task-2.traj.json'}: field 'messages'") and len(lines) == 2
    assert done.stdout.strip().endswith("; skipped 1 (each named above)")


def test_the_python_result_carries_each_problem_with_its_kind(logs, tmp_path):
    result = api.ingest([logs], tmp_path / "store", strict=False, limits=Limits(regex_seconds=0.2))
    kinds = sorted((problem.kind, problem.file) for problem in result.problems)
    assert kinds == [("note", str(logs / "task-1.traj.json")), ("skipped", str(logs / "task-2.traj.json"))]
    assert [problem.file for problem in result.skipped] == [str(logs / "task-2.traj.json")]


def test_a_record_skipped_has_its_skip_and_no_note(logs, tmp_path):
    """A record whose pattern was replaced and whose observation is past the field limit is not
    in the run: it is one skip, with no note on it."""
    (logs / "task-2.traj.json").unlink()
    slow = json.loads((logs / "task-1.traj.json").read_text())
    observation = next(m for m in slow["messages"] if "<output>" in str(m["content"]))
    observation["content"] = "<returncode>0</returncode>\n<output>" + "x" * 3000 + "</output>"
    (logs / "task-1.traj.json").write_text(json.dumps(slow))
    (logs / "task-3.traj.json").write_text(json.dumps({**MINI_V1, "instance_id": "task-3"}))
    result = api.ingest([logs], tmp_path / "store", strict=False, limits=Limits(regex_seconds=0.2, field_mb=0.001))
    assert [(problem.kind, problem.file) for problem in result.problems] == [("skipped", str(logs / "task-1.traj.json"))]


def test_lenient_ingest_with_no_record_left_names_the_first_bad_record_not_a_run_folder_left_out(tmp_path):
    """A folder of runs leaves out a run without a harness summary; when every record of the
    others is bad, the line gives the first bad record's reason, as ingest without --lenient does."""
    root = tmp_path / "runs"
    bad, left_out = root / "runA" / "task-1", root / "runB" / "task-2"
    bad.mkdir(parents=True)
    left_out.mkdir(parents=True)
    (bad / "task-1.traj.json").write_text(json.dumps({**MINI_V1, "messages": None}))
    (root / "runA" / "model.runA.json").write_text(json.dumps({"resolved_ids": [], "unresolved_ids": ["task-1"]}))
    (left_out / "task-2.traj.json").write_text(json.dumps({**MINI_V1, "instance_id": "task-2"}))
    strict = trajlens("ingest", root, "--store", tmp_path / "store")
    lenient = trajlens("ingest", root, "--store", tmp_path / "store", "--lenient")
    assert strict.returncode == lenient.returncode == 1 and not (tmp_path / "store").exists()
    assert strict.stderr.startswith(f"error: {bad / 'task-1.traj.json'}: field 'messages'"), strict.stderr
    reason = strict.stderr.removeprefix("error: ").strip()
    assert lenient.stderr.strip() == f"error: {root}: no record left to ingest: 2 skipped; the first: {reason}"

"""A log of a folder's format gone bad (a value of the wrong type) is read and named, not left
out of the folder without a word: a whole-file log (OpenHands V1's ``state_*.json``) whose
record has a good log's keys is read as one of them, as a stream file beside its kind is."""

from __future__ import annotations

import json

import pytest
from cli_run import run_cli as trajlens
from hostile import OPENHANDS_V1


@pytest.fixture
def folder(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "state_a.json").write_text(json.dumps(OPENHANDS_V1))
    (logs / "state_b.json").write_text(json.dumps({**OPENHANDS_V1, "instance_id": "y", "history": None}))
    (logs / "notes.json").write_text(json.dumps({"model": "m", "seed": 1}))  # not a log: still left out
    return logs


def test_strict_ingest_names_the_bad_log(folder, tmp_path):
    done = trajlens("ingest", folder, "--store", tmp_path / "store")
    assert done.returncode == 1 and not (tmp_path / "store").exists()
    assert done.stderr.strip() == f"error: {folder / 'state_b.json'}: field 'history': expected a list, found null"


def test_lenient_ingest_skips_it_with_a_line(folder, tmp_path):
    done = trajlens("ingest", folder, "--store", tmp_path / "store", "--lenient")
    assert done.returncode == 0, done.stderr
    assert f"skipped: {folder / 'state_b.json'}: field 'history'" in done.stderr
    assert "; skipped 1 (each named above)" in done.stdout and "notes.json" not in done.stderr


def test_lenient_ingest_of_logs_that_are_all_bad_writes_no_empty_run(tmp_path):
    """Every record skipped leaves nothing to ingest: one line and exit 1, no store, rather
    than an empty run published with exit 0."""
    bad = tmp_path / "chat.jsonl"
    record = {"task_id": "t", "reward": "high", "messages": [{"role": "user", "content": "hi"},
                                                             {"role": "assistant", "content": "ok"}]}
    bad.write_text("".join(json.dumps({**record, "id": name}) + "\n" for name in ("a", "b")))
    done = trajlens("ingest", bad, "--store", tmp_path / "store", "--lenient")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and not (tmp_path / "store").exists()
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}: no record left to ingest"), done.stderr
    strict = trajlens("ingest", bad, "--store", tmp_path / "store")
    assert strict.returncode == 1 and strict.stderr.startswith(f"error: {bad}: line 1: field 'reward': ")
    assert lines[0] == f"error: {bad}: no record left to ingest: 2 skipped; the first: " + strict.stderr[7:].strip()


@pytest.mark.parametrize("name, text", [
    ("metrics.jsonl", '{"_step": 1, "actor/lr": "abc"}\n{"_step": 2, "actor/lr": [1]}\n'),
    ("metrics.csv", "step,actor/lr\n1,abc\n"),
])
def test_lenient_ingest_of_a_metrics_file_whose_every_record_is_bad_writes_no_empty_run(tmp_path, name, text):
    metrics = tmp_path / name
    metrics.write_text(text)
    strict = trajlens("ingest", metrics, "--store", tmp_path / "store")
    lenient = trajlens("ingest", metrics, "--store", tmp_path / "store", "--lenient")
    assert strict.returncode == lenient.returncode == 1 and not (tmp_path / "store").exists()
    assert lenient.stderr.startswith(f"error: {metrics}: no record left to ingest: ")
    assert lenient.stderr.strip().endswith("; the first: " + strict.stderr.removeprefix("error: ").strip())


@pytest.mark.parametrize("name, text", [
    ("deepargs.jsonl", json.dumps({"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "bash", "arguments": "[" * 301 + "]" * 301}}]}]}) + "\n"),
    ("deep.json", '{"messages": [{"role": "user", "content": "hi"}], "x": ' + "[" * 100_000 + "]" * 100_000 + "}"),
])
def test_lenient_ingest_of_a_file_whose_only_record_is_past_a_limit_names_the_limit(tmp_path, name, text):
    """The line says what ingest without --lenient says of the record: its file, its record,
    the limit and how to raise it."""
    log = tmp_path / name
    log.write_text(text)
    strict = trajlens("ingest", log, "--store", tmp_path / "store")
    lenient = trajlens("ingest", log, "--store", tmp_path / "store", "--lenient")
    reason = strict.stderr.removeprefix("error: ").strip()
    assert strict.returncode == lenient.returncode == 1 and not (tmp_path / "store").exists()
    assert "(raise it with --limit depth=...)" in reason and reason.startswith(f"{log}: ")
    assert name == "deep.json" or "record message 1, call 0" in reason  # a whole file is its only record
    assert lenient.stderr == f"error: {log}: no record left to ingest: 1 skipped; the first: {reason}\n"

"""``trajlens verify``: a damaged store is diagnosed file by file, and repaired from its sources."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_run import run_cli as trajlens

import trajlens as library
from trajlens.store.integrity import file_sha256
from trajlens.store.verify import repair_store, verify_store

REPO = Path(__file__).resolve().parents[2]
VERL_DUMP = REPO / "tests" / "data" / "verl" / "grpo-sandbox"


@pytest.fixture
def store(tmp_path, tiny_run_dir):
    """Two runs (a Parquet run and a verl dump, each from a source of its own) and their classes."""
    sources = tmp_path / "sources"
    sources.mkdir()
    shutil.copytree(tiny_run_dir, sources / "tiny")
    shutil.copytree(VERL_DUMP, sources / "grpo-sandbox")
    path = tmp_path / "store"
    library.ingest([sources / "tiny"], path)
    library.ingest([sources / "grpo-sandbox"], path)
    assert trajlens("classify", path).returncode == 0
    return path


def _digests(store: Path) -> dict[str, str]:
    return {str(p.relative_to(store)): file_sha256(p) for p in sorted(store.rglob("*.parquet"))}


def _first(store: Path, run: str, table: str) -> Path:
    return sorted((store / "runs" / run / table).rglob("*.parquet"))[0]


def test_a_store_as_written_verifies(store):
    done = trajlens("verify", store)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"{store}: every file matches its checksum"
    assert verify_store(store).findings == []


def test_a_truncated_a_deleted_and_a_replaced_file_are_each_one_line(store):
    truncated = _first(store, "tiny", "trajectories")
    deleted = _first(store, "grpo-sandbox", "tool_calls")
    replaced = _first(store, "tiny", "step_metrics")
    truncated.write_bytes(truncated.read_bytes()[:-100])
    deleted.unlink()
    shutil.copyfile(_first(store, "grpo-sandbox", "step_metrics"), replaced)  # valid Parquet, other rows
    classes = store / "derived" / "call_classes" / "tiny.parquet"
    classes.write_bytes(classes.read_bytes()[:50])
    done = trajlens("verify", store)
    assert done.returncode == 1
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 4, done.stdout
    assert any(line.startswith(f"{truncated}: cannot be read (") for line in lines)
    assert f"{deleted}: deleted (ingest.json records it)" in lines
    assert any(line.startswith(f"{replaced}: changed since it was written") for line in lines)
    assert any(line.startswith(f"{classes}: cannot be read (") for line in lines)
    only_tiny = verify_store(store, "tiny")
    assert {f.run_id for f in only_tiny.findings} == {"tiny"} and len(only_tiny.findings) == 3


def test_repair_writes_the_runs_again_from_their_unchanged_sources(store):
    before = _digests(store)
    _first(store, "tiny", "trajectories").write_bytes(b"PAR1 cut")
    _first(store, "grpo-sandbox", "tool_calls").unlink()
    classes = store / "derived" / "call_classes" / "grpo-sandbox.parquet"
    shutil.copyfile(store / "derived" / "call_classes" / "tiny.parquet", classes)
    done = trajlens("verify", store, "--repair")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "repaired: wrote run tiny again from its source" in done.stdout
    assert "repaired: wrote run grpo-sandbox again from its source" in done.stdout
    assert f"`trajlens classify {store}` computes it again" in done.stdout
    # a restored run's analyses may have been computed from its damaged files: they go too
    assert ("repaired: removed run tiny's analyses (call_classes, trajectory_measures, unknown_tools), which may "
            f"have been computed from its damaged files; `trajlens classify {store}` computes them again") in done.stdout
    after = _digests(store)
    # the damaged classes go with the other tables `trajlens classify` wrote for the run
    removed = {f"derived/{table}/{run}.parquet" for table in ("call_classes", "trajectory_measures", "unknown_tools")
               for run in ("grpo-sandbox", "tiny")}
    expected = {name: digest for name, digest in before.items() if name not in removed}
    assert after == expected  # the runs' files byte for byte
    assert verify_store(store).ok
    assert trajlens("classify", store).returncode == 0
    assert _digests(store) == before


def test_repair_says_what_it_cannot_when_the_source_is_gone_or_changed(store, tmp_path):
    _first(store, "tiny", "trajectories").unlink()
    _first(store, "grpo-sandbox", "trajectories").unlink()
    shutil.rmtree(tmp_path / "sources" / "tiny")
    dump = tmp_path / "sources" / "grpo-sandbox" / "1.jsonl"
    dump.write_text(dump.read_text().replace('"score": 1.0', '"score": 0.5', 1))
    notes = [f.line(store) for f in verify_store(store).findings if f.kind == "note"]
    assert any("its source" in note and "no longer exists" in note for note in notes)
    assert any("its source" in note and "changed since ingest" in note for note in notes)
    done = trajlens("verify", store, "--repair")
    assert done.returncode == 1
    assert "cannot repair: run tiny: cannot write it again: its source" in done.stdout
    assert "cannot repair: run grpo-sandbox: cannot restore it: its source now gives other content" in done.stdout
    assert "trajlens ingest LOGS --store" in done.stdout
    assert len(verify_store(store).problems) == 2  # left as they were


@pytest.mark.parametrize("spelled", ["store", "./store/", "{tmp_path}/store"])
def test_repair_restores_a_log_ingested_by_a_relative_path(tmp_path, monkeypatch, spelled):
    """The recorded call names the source by its absolute path; the run it writes again is the
    run ingested as ``sources/grpo-sandbox``, so its content hash matches the record. Its
    analyses go, however the store is spelled (they were kept when it was relative)."""
    shutil.copytree(VERL_DUMP, tmp_path / "sources" / "grpo-sandbox")
    monkeypatch.chdir(tmp_path)
    assert trajlens("ingest", "sources/grpo-sandbox", "--store", "store").returncode == 0
    assert trajlens("classify", "store").returncode == 0
    _first(tmp_path / "store", "grpo-sandbox", "tool_calls").write_bytes(b"cut")
    store = spelled.format(tmp_path=tmp_path)
    done = trajlens("verify", store, "--repair")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "repaired: wrote run grpo-sandbox again from its source: its files are as ingested" in done.stdout
    assert ("repaired: removed run grpo-sandbox's analyses (call_classes, trajectory_measures, unknown_tools), which "
            f"may have been computed from its damaged files; `trajlens classify {Path(store)}` computes them again"
            ) in done.stdout
    assert not list((tmp_path / "store" / "derived").rglob("*.parquet"))
    assert verify_store(tmp_path / "store").ok


def test_repair_of_a_copied_store_says_what_it_cannot_while_a_run_stays_damaged(store, tmp_path):
    """A copy's database no longer matches its record, so repair writes its views again, which
    cannot be done over a file that cannot be read: with the run not restorable (its source
    changed), each is a `cannot repair` line, not an error; ingesting the run again mends both."""
    copy = tmp_path / "copy"
    shutil.copytree(store, copy)
    _first(copy, "grpo-sandbox", "tool_calls").write_bytes(b"cut")
    dump = tmp_path / "sources" / "grpo-sandbox" / "1.jsonl"
    original = dump.read_text()
    dump.write_text(original.replace('"score": 1.0', '"score": 0.5', 1))
    done = trajlens("verify", copy, "--repair")
    assert done.returncode == 1 and done.stderr == "", done.stderr
    assert "cannot repair: run grpo-sandbox: cannot restore it: its source now gives other content" in done.stdout
    assert ("cannot repair: the views of trajlens.duckdb are not written again while run grpo-sandbox cannot be read; "
            "ingesting it again writes them") in done.stdout
    dump.write_text(original)
    assert trajlens("ingest", tmp_path / "sources" / "grpo-sandbox", "--store", copy, "--replace").returncode == 0
    assert verify_store(copy).ok


def test_stale_views_interrupted_writes_and_their_repair(store):
    (store / "trajlens.duckdb").unlink()
    found = verify_store(store)
    assert [f.path for f in found.problems] == ["trajlens.duckdb"]
    (store / ".staging" / "dead-writer").mkdir(parents=True)
    (store / ".trajlens.duckdb.1234.partial").write_text("cut")
    assert sorted(f.path for f in verify_store(store).problems) == [".staging/dead-writer",
                                                                    ".trajlens.duckdb.1234.partial"]
    repair_store(store)
    assert verify_store(store).ok
    assert (store / "trajlens.duckdb").is_file() and not (store / ".staging").exists()


def test_repair_says_it_wrote_the_views_of_a_store_moved_elsewhere(store, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(store, moved)
    assert [f.path for f in verify_store(moved).problems] == ["trajlens.duckdb"]
    assert repair_store(moved).done == ["wrote the views of trajlens.duckdb again: they list the store's files as "
                                        "they are now"]
    assert verify_store(moved).ok


_CRASH_AT = """
import os, sys
from trajlens.store import publish
publish.fault_point = lambda step: os._exit(9) if step == sys.argv[3] else None
import trajlens
trajlens.ingest([sys.argv[1]], sys.argv[2])
"""


def test_repair_after_a_crash_that_set_an_unchanged_run_aside_keeps_its_analyses(store):
    """A source touched (same bytes, a new time) is read again, and its run is written anew with
    a fresh record; a crash while the old run is set aside, then repair: the interrupted write is
    finished first, so the run's analyses are not taken for analyses of a run that is gone."""
    import os
    import subprocess
    import sys

    source = Path(library.store.writer.RunRecord.read(store / "runs" / "tiny").source)
    path = sorted(source.rglob("*.parquet"))[0]
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000_000))
    analyses = sorted(p.name for p in (store / "derived").rglob("tiny.parquet"))
    crashed = subprocess.run([sys.executable, "-c", _CRASH_AT, str(source), str(store), "aside runs/tiny"],
                             capture_output=True, text=True)
    assert crashed.returncode == 9, crashed.stderr
    repair_store(store)
    assert verify_store(store).ok
    assert sorted(p.name for p in (store / "derived").rglob("tiny.parquet")) == analyses != []


@pytest.mark.parametrize("command", [("classify", "{store}"), ("sql", "{store}", "SELECT count(*) FROM trajectories"),
                                     ("report", "{store}", "--run", "tiny", "--out", "{tmp}/r.html")])
def test_other_commands_name_the_file_that_fails_to_read_and_suggest_verify(store, tmp_path, command):
    cut = _first(store, "tiny", "trajectories")
    data = bytearray(cut.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    data[-8 - footer:-8] = b"\xff" * footer  # the footer overwritten at the size written: only the read fails
    cut.write_bytes(bytes(data))
    (store / "trajlens.duckdb").unlink()  # the next read rebuilds the views, and meets the file first
    done = trajlens(*(arg.format(store=store, tmp=tmp_path) for arg in command))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: {cut}: cannot be read (") and f"`trajlens verify {store}`" in lines[0]


@pytest.mark.parametrize("command", [("classify", "{store}"), ("sql", "{store}", "SELECT count(*) FROM tool_calls"),
                                     ("check", "{store}", "--run", "grpo-sandbox")])
def test_a_deleted_file_is_a_damaged_store_not_fewer_rows(store, command):
    """Reads list the files on disk: a run file ingest.json records but the disk lacks would
    silently take its rows out of every answer, and of the analyses saved from them."""
    deleted = _first(store, "grpo-sandbox", "tool_calls")
    deleted.unlink()
    classes = _digests(store / "derived")
    done = trajlens(*(arg.format(store=store) for arg in command))
    assert done.returncode in (1, 2)
    assert done.stderr == (f"error: {deleted}: cannot be read (missing, though the run's ingest.json records it); "
                           f"the store is damaged: run `trajlens verify {store}` (--repair restores what it can)\n")
    assert _digests(store / "derived") == classes
    repair_store(store)
    assert trajlens(*(arg.format(store=store) for arg in command)).returncode in (0, 1)


def test_verify_of_a_folder_that_is_not_a_store(tmp_path):
    (tmp_path / "runs").mkdir()
    done = trajlens("verify", tmp_path)
    assert done.returncode == 1 and "not a trajlens store" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


def test_a_run_recorded_before_per_file_checksums_is_checked_as_a_whole(store):
    import json

    record_path = store / "runs" / "tiny" / "ingest.json"
    record = json.loads(record_path.read_text())
    del record["files"]
    record_path.write_text(json.dumps(record))
    assert verify_store(store).ok
    replaced = _first(store, "tiny", "step_metrics")
    shutil.copyfile(_first(store, "grpo-sandbox", "step_metrics"), replaced)
    assert [(f.path, f.message) for f in verify_store(store).problems] == [
        ("runs/tiny", "its files changed since ingest (the run's content_hash differs)")]


def test_verify_one_run_through_the_command(store):
    _first(store, "grpo-sandbox", "trajectories").unlink()
    assert trajlens("verify", store, "--run", "tiny").returncode == 0
    done = trajlens("verify", store, "--run", "grpo-sandbox")
    assert done.returncode == 1 and len(done.stdout.strip().splitlines()) == 1
    done = trajlens("verify", store, "--run", "nope")
    assert done.returncode == 1 and "no run 'nope'" in done.stderr


def test_repair_removes_the_whole_set_one_command_wrote_for_the_run(store):
    """A damaged part of one analysis table goes with the other tables its command wrote for that
    run (classify's three, attribute's nine): a set missing one part would read as whole."""
    measures = sorted((store / "derived" / "trajectory_measures").glob("*.parquet"))
    run = measures[0].stem
    with open(measures[0], "ab") as part:
        part.write(b"x")
    repair = repair_store(store)
    assert repair.done and "call_classes" in repair.done[0] and "unknown_tools" in repair.done[0]
    assert verify_store(store).ok
    for table in ("call_classes", "trajectory_measures", "unknown_tools"):
        left = sorted(p.stem for p in (store / "derived" / table).glob("*.parquet"))
        assert run not in left and left  # the other run's part stays


def test_a_write_under_way_is_a_note_not_a_problem(store):
    """A writer's staging folder is not left over by an interrupted write while the writer holds the lock."""
    from trajlens.store.publish import STAGING_DIR, StoreLock

    writer = StoreLock(store)
    assert writer.acquire()
    staged = store / STAGING_DIR / "write-1"
    staged.mkdir(parents=True)
    try:
        done = trajlens("verify", store)
        assert done.returncode == 0, done.stdout
        assert done.stdout.strip().splitlines()[0] == (
            f"note: {store}/.lock: another trajlens command is writing to the store now; what it writes may be seen "
            "half done: verify again once it ends")
    finally:
        writer.release()
    done = trajlens("verify", store)  # no writer now: the folder was left over
    assert done.returncode == 1 and f"{staged}: left over by a write that did not finish" in done.stdout


def test_a_database_restored_in_place_verifies_and_one_copied_elsewhere_or_changed_does_not(store, tmp_path):
    """Its file's time is new after `cp -a` back, its views are right; read back, they tell."""
    import os

    import duckdb

    database = store / "trajlens.duckdb"
    os.utime(database, ns=(database.stat().st_atime_ns, database.stat().st_mtime_ns + 10**9))
    assert verify_store(store).ok
    copy = tmp_path / "copy"
    shutil.copytree(store, copy)  # its views still name the first store's files
    assert [f.path for f in verify_store(copy).problems] == ["trajlens.duckdb"]
    with duckdb.connect(str(database)) as other_client:
        other_client.execute("DROP VIEW tool_calls")
    assert [f.path for f in verify_store(store).problems] == ["trajlens.duckdb"]


def test_what_an_interrupted_write_left_is_named_by_verify_and_removed_by_the_next_ingest_with_a_note(tmp_path, tiny_run_dir):
    """A first ingest killed while it staged leaves no store, only its staging: verify says so
    (not just "not a store"), and the next ingest says what it removed."""
    from trajlens.store.publish import LOCK_FILE, STAGING_DIR

    store = tmp_path / "store"
    staged = store / STAGING_DIR / "write-1"
    staged.mkdir(parents=True)
    (staged / "part.parquet").write_bytes(b"PAR1")
    (store / LOCK_FILE).touch()
    done = trajlens("verify", store)
    assert done.returncode == 1
    assert done.stderr == (f"error: {store}: not a trajlens store yet: the first write into it did not finish, and left "
                           f"{STAGING_DIR}; `trajlens ingest LOGS --store {store}` removes it and writes the runs\n")
    done = trajlens("ingest", tiny_run_dir, "--store", store)
    assert done.returncode == 0, done.stderr
    assert f"note: {store}: removed what a write that did not finish had staged ({STAGING_DIR}/write-1)" in done.stderr
    assert not (store / STAGING_DIR).exists()
    assert trajlens("verify", store).returncode == 0

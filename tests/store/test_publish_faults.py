"""Publishing under faults: a crash or an error at every publish step, SIGKILL at random moments,
two ingests at once, read-only and full stores, and analyses that appear all together or not at all.

Read-only stores and unwritable folders are made with ``chmod`` when the tests run as an
ordinary user. Root ignores file modes, so as root the same faults are injected as the
``OSError`` the system would raise (EROFS, EACCES); a full disk is always injected (ENOSPC),
since a size-limited mount needs privileges the test machine may not have.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest

import trajlens
from tinyrun import tiny_run
from trajlens.cli import main
from trajlens.errors import StoreError
from trajlens.store import publish
from trajlens.store.layout import RunDirWriter

REPO = Path(__file__).resolve().parents[2]
AS_ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False
PUBLISH_STEPS = ["staged", "journal", "aside runs/tiny", "placed runs/tiny",
                 "dropped derived/call_classes/tiny.parquet", "dropped derived/call_classes/.tiny.parquet.sha256",
                 "dropped derived/trajectory_measures/tiny.parquet",
                 "dropped derived/trajectory_measures/.tiny.parquet.sha256",
                 "dropped derived/unknown_tools/tiny.parquet", "dropped derived/unknown_tools/.tiny.parquet.sha256",
                 "database", "journal removed"]


def write_run(directory: Path, *, without: str | None = None) -> None:
    """The tiny run (8 trajectories), or without one trajectory (7), as a run directory."""
    shutil.rmtree(directory, ignore_errors=True)
    run = tiny_run()
    if without is not None:
        for name in ("trajectories", "tool_calls", "tokens"):
            table = getattr(run, name)
            setattr(run, name, table.filter(pc.not_equal(table.column("trajectory_id"), without)))
    with RunDirWriter(directory, run.runs) as writer:
        writer.write_run(run)


def state(store: Path) -> dict[str, object]:
    """What a reader sees: trajectory count per run and the analysis tables present."""
    opened = trajlens.open(store)
    counts = dict(opened.sql("SELECT run_id, count(*) AS n FROM trajectories GROUP BY 1").iter_rows())
    return {"counts": counts, "tables": sorted(set(opened.tables()) - {"runs", "trajectories", "tool_calls",
                                                                       "tokens", "step_metrics"})}


# Rebuilt from the files after a rolled-back publish: compared by what they read, not by bytes.
DERIVED_FILES = (".lock", ".generation", "trajlens.duckdb", ".trajlens-views")


def content(store: Path) -> dict[str, bytes]:
    """Every file of the store but the lock and the database rebuilt from the others."""
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*"))
            if p.is_file() and p.name not in DERIVED_FILES}


def database_counts(store: Path) -> int:
    import duckdb

    connection = duckdb.connect(str(store / "trajlens.duckdb"), read_only=True)
    try:
        return connection.execute("SELECT count(*) FROM trajectories").fetchone()[0]
    finally:
        connection.close()


@pytest.fixture
def changed(tmp_path):
    """A store holding the tiny run with its analyses, and its source changed since (7 trajectories)."""
    from trajlens.report import classify_store

    source = tmp_path / "src"
    write_run(source)
    store = tmp_path / "store"
    trajlens.ingest([source], store)
    classify_store(trajlens.open(store))
    write_run(source, without="2-b-1")
    return source, store


OLD = {"counts": {"tiny": 8}, "tables": ["call_classes", "trajectory_measures", "unknown_tools"]}
NEW = {"counts": {"tiny": 7}, "tables": []}


def test_publish_passes_every_named_step(changed, monkeypatch):
    source, store = changed
    seen = []
    monkeypatch.setattr(publish, "fault_point", seen.append)
    trajlens.ingest([source], store)
    assert seen == PUBLISH_STEPS
    assert state(store) == NEW


CRASH = """
import os, sys
from trajlens.store import publish
def crash(step):
    if step == sys.argv[3]:
        os._exit(9)
publish.fault_point = crash
import trajlens
trajlens.ingest([sys.argv[1]], sys.argv[2])
"""


@pytest.mark.slow
@pytest.mark.parametrize("step", PUBLISH_STEPS)
def test_crash_at_each_publish_step_recovers(changed, step):
    source, store = changed
    done = subprocess.run([sys.executable, "-c", CRASH, str(source), str(store), step], capture_output=True, text=True)
    assert done.returncode == 9, done.stderr
    # Before the journal exists the old run stands; from then on the publish is finished on open.
    assert state(store) == (OLD if step == "staged" else NEW)
    assert not (store / publish.JOURNAL_FILE).exists()
    trajlens.ingest([source], store)
    assert state(store) == NEW
    assert not (store / publish.STAGING_DIR).exists()


@pytest.mark.parametrize("step", PUBLISH_STEPS[:-1])
def test_error_at_each_publish_step_leaves_the_store_as_it_was(changed, step, monkeypatch):
    source, store = changed
    trajlens.open(store)
    before = content(store)

    def fail(name):
        if name == step:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(publish, "fault_point", fail)
    with pytest.raises(StoreError, match="No space left on device") as caught:
        trajlens.ingest([source], store)
    assert "\n" not in str(caught.value)
    assert content(store) == before
    assert database_counts(store) == 8
    assert state(store) == OLD


def test_interrupt_while_publishing_exits_130_and_keeps_the_store(changed, monkeypatch, capsys):
    source, store = changed
    trajlens.open(store)
    before = content(store)

    def interrupt(name):
        if name == "placed runs/tiny":
            raise KeyboardInterrupt

    monkeypatch.setattr(publish, "fault_point", interrupt)
    assert main(["ingest", str(source), "--store", str(store)]) == 130
    assert capsys.readouterr().err.strip().splitlines() == ["interrupted"]
    assert content(store) == before


def test_interrupt_while_loading_exits_130_and_keeps_the_store(changed, monkeypatch, capsys):
    source, store = changed
    trajlens.open(store)
    before = content(store)

    def interrupt(self, table, path):
        raise KeyboardInterrupt

    monkeypatch.setattr(RunDirWriter, "_write", interrupt)
    assert main(["ingest", str(source), "--store", str(store)]) == 130
    assert content(store) == before


def test_a_multi_run_ingest_is_all_or_nothing(tmp_path):
    runs = tmp_path / "runs"
    for run_id in ("a-first", "b-second"):
        run = tiny_run(run_id)
        with RunDirWriter(runs / run_id, run.runs) as writer:
            writer.write_run(run)
    store = tmp_path / "store"
    trajlens.ingest([runs / "a-first"], store)
    shutil.rmtree(runs / "a-first")  # the first run changes (4 trajectories), the second is broken
    run = tiny_run("a-first")
    run.trajectories = run.trajectories.slice(0, 4)
    run.tool_calls = run.tool_calls.filter(pc.is_in(run.tool_calls.column("trajectory_id"), run.trajectories.column("trajectory_id")))
    run.tokens = run.tokens.filter(pc.is_in(run.tokens.column("trajectory_id"), run.trajectories.column("trajectory_id")))
    with RunDirWriter(runs / "a-first", run.runs) as writer:
        writer.write_run(run)
    sorted((runs / "b-second" / "tokens").rglob("*.parquet"))[0].write_bytes(b"broken")
    with pytest.raises(trajlens.InputError):
        trajlens.ingest([runs], store)
    assert state(store)["counts"] == {"a-first": 8}


def test_stale_staging_and_torn_journal_are_cleared(changed):
    source, store = changed
    junk = store / publish.STAGING_DIR / "deadbeef" / "new" / "runs" / "tiny"
    junk.mkdir(parents=True)
    (junk / "half.parquet").write_bytes(b"half")
    (store / publish.JOURNAL_FILE).write_text('{"staging": ')  # torn before its rename: never committed
    assert state(store) == OLD
    assert not (store / publish.STAGING_DIR).exists() and not (store / publish.JOURNAL_FILE).exists()


def test_failed_report_leaves_no_analysis_tables(tmp_path, capsys):
    source = tmp_path / "src"
    write_run(source)
    store = tmp_path / "store"
    trajlens.ingest([source], store)
    (tmp_path / "a-file").write_text("x")
    status = main(["report", str(store), "--out", str(tmp_path / "a-file")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and len(lines) == 1 and lines[0].startswith("error: ")
    assert state(store)["tables"] == []
    assert not (store / "derived").exists() or not any((store / "derived").rglob("*.parquet"))


def _inject(monkeypatch, target, attribute, code, reason):
    def fail(*args, **kwargs):
        raise OSError(code, reason, str(args[0]) if args else None)

    monkeypatch.setattr(target, attribute, fail)


def test_read_only_store_is_a_one_line_error_and_still_queries(changed, monkeypatch, capsys):
    source, store = changed
    trajlens.open(store)
    before = content(store)
    if AS_ROOT:  # root ignores modes: the store's first write fails as on a read-only mount
        def read_only(path, *args, **kwargs):
            raise OSError(errno.EROFS, "Read-only file system", str(path))

        monkeypatch.setattr(publish, "open", read_only, raising=False)
        reason = "Read-only file system"
    else:
        for path in [store, *store.rglob("*")]:
            if path.is_dir():
                path.chmod(0o555)
        reason = "Permission denied"
    try:
        assert main(["ingest", str(source), "--store", str(store)]) == 1
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and reason in lines[0] and str(store) in lines[0]
        assert content(store) == before
        assert main(["sql", str(store), "SELECT count(*) AS n FROM trajectories"]) == 0
        assert "8" in capsys.readouterr().out
    finally:
        for path in [store, *store.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)


def test_unwritable_parent_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    source = tmp_path / "src"
    write_run(source)
    parent = tmp_path / "locked"
    parent.mkdir()
    if AS_ROOT:
        _inject(monkeypatch, Path, "mkdir", errno.EACCES, "Permission denied")
    else:
        parent.chmod(0o555)
    try:
        assert main(["ingest", str(source), "--store", str(parent / "store")]) == 1
    finally:
        parent.chmod(0o755)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "Permission denied" in lines[0] and "cannot create the store" in lines[0]
    assert not (parent / "store").exists()


@pytest.mark.parametrize("where", ["write", "journal"])
def test_full_disk_is_a_one_line_error_and_the_store_is_unchanged(changed, monkeypatch, capsys, where):
    source, store = changed
    trajlens.open(store)
    before = content(store)
    if where == "write":
        _inject(monkeypatch, RunDirWriter, "_write", errno.ENOSPC, "No space left on device")
    else:
        _inject(monkeypatch, publish, "write_durably", errno.ENOSPC, "No space left on device")
    assert main(["ingest", str(source), "--store", str(store)]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0]
    assert content(store) == before
    monkeypatch.undo()
    trajlens.ingest([source], store)
    assert state(store) == NEW


def test_store_path_that_is_a_file(tmp_path):
    source = tmp_path / "src"
    write_run(source)
    (tmp_path / "store").write_text("a file")
    with pytest.raises(StoreError, match="expected a store directory, found a file"):
        trajlens.ingest([source], tmp_path / "store")
    with pytest.raises(StoreError, match="found a file"):
        trajlens.open(tmp_path / "store")
    assert (tmp_path / "store").read_text() == "a file"


def wait_until_writing(process: subprocess.Popen, store: Path, limit: float = 60.0) -> None:
    """Return once the ingest has started writing into the store (or has ended)."""
    deadline = time.monotonic() + limit
    while process.poll() is None and time.monotonic() < deadline:
        if (store / publish.STAGING_DIR).exists():
            return
        time.sleep(0.01)


def _ingest_process(source: Path, store: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "trajlens", "ingest", str(source), "--store", str(store), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_two_ingests_into_one_store_at_once(tmp_path):
    sources = []
    for run_id in ("first", "second", "third"):
        run = tiny_run(run_id)
        with RunDirWriter(tmp_path / run_id, run.runs) as writer:
            writer.write_run(run)
        sources.append(tmp_path / run_id)
    store = tmp_path / "store"
    processes = [_ingest_process(source, store) for source in sources]
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
    assert state(store)["counts"] == {"first": 8, "second": 8, "third": 8}
    assert not (store / publish.STAGING_DIR).exists()


@pytest.mark.slow
def test_sigkill_at_random_moments_leaves_a_valid_store(tmp_path):
    source = REPO / "sample_data" / "sao-r7"
    reference = tmp_path / "reference"
    trajlens.ingest([source], reference)
    expected = state(reference)["counts"]
    store = tmp_path / "store"
    chance = random.Random(7)
    for attempt in range(5):
        if attempt == 3:  # later attempts re-ingest into a store that already holds the run
            trajlens.ingest([source], store)
        process = _ingest_process(source, store, "--replace")
        wait_until_writing(process, store)
        time.sleep(chance.uniform(0.0, 1.5))
        process.send_signal(signal.SIGKILL)
        process.communicate()
        if (store / "runs").is_dir():
            seen = state(store)["counts"]
            assert seen in ({}, expected), f"attempt {attempt}: {seen}"
    trajlens.ingest([source], store)
    assert state(store)["counts"] == expected
    assert not (store / publish.STAGING_DIR).exists() and not (store / publish.JOURNAL_FILE).exists()

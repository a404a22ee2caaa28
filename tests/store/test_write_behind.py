"""A run directory's step files are written on a background thread while the caller goes on
(store.layout.RunDirWriter), and a run directory's files read one ahead while the one before is
checked (ingest.parquet.copy_run): the files and the errors are those of doing it in turn."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tinyrun import tiny_run

import trajlens
from trajlens.errors import InputError
from trajlens.store import layout
from trajlens.store.layout import RunDirWriter

SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data"

STEP_TABLES = ("trajectories", "tool_calls", "tokens")


def _write(directory: Path, run) -> None:
    with RunDirWriter(directory, run.runs) as writer:
        writer.write_run(run)  # a file per step of each table


def test_step_files_are_written_on_the_writing_thread_and_complete_when_the_writer_closes(tmp_path, monkeypatch):
    run = tiny_run("behind")
    threads: dict[str, str] = {}
    direct = pq.write_table

    def recorded(table, where, **options):
        threads[Path(where).relative_to(tmp_path / "run").as_posix()] = threading.current_thread().name
        direct(table, where, **options)

    monkeypatch.setattr(layout.pq, "write_table", recorded)
    _write(tmp_path / "run", run)
    steps = {path: name for path, name in threads.items() if "/step=" in path}
    assert len(steps) == 3 * 2
    assert all(name.startswith("trajlens-write") for name in steps.values())
    for name in STEP_TABLES:  # every row written, each step in its own file
        rows = sum(pq.ParquetFile(path).metadata.num_rows for path in (tmp_path / "run" / name).rglob("*.parquet"))
        assert rows == run.table(name).num_rows > 0
    assert not any(t.name.startswith("trajlens-write") for t in threading.enumerate())


def test_a_write_that_fails_raises_by_the_next_call_and_nothing_is_written_after_it(tmp_path, monkeypatch):
    run = tiny_run("fails")
    direct, written = pq.write_table, []

    def failing(table, where, **options):
        if "trajectories/step=000001" in str(where):
            raise OSError(28, "No space left on device")
        direct(table, where, **options)
        written.append(str(where))

    monkeypatch.setattr(layout.pq, "write_table", failing)
    with pytest.raises(OSError, match="No space left"):
        _write(tmp_path / "run", run)
    assert not any("/step=000002" in path for path in written)  # nothing after the write that failed
    assert not any(t.name.startswith("trajlens-write") for t in threading.enumerate())


def test_ingest_refuses_an_unreadable_step_file_read_ahead_naming_it(tmp_path):
    """The file after a damaged one was read ahead; the error is still the damaged file's, in
    the order of the files (not a later damaged one's), and the store is left without the run."""
    source = tmp_path / "sao-r6"
    shutil.copytree(SAMPLE_DATA / "sao-r6", source)
    files = sorted((source / "tool_calls").rglob("*.parquet"))
    assert len(files) >= 4
    for damaged in (files[1], files[3]):
        damaged.write_bytes(b"PAR1 not parquet at all PAR1")
    store = tmp_path / "store"
    with pytest.raises(InputError) as raised:
        trajlens.ingest([source], store)
    assert str(raised.value).startswith(f"{files[1]}: not a readable Parquet file")
    assert not (store / "runs" / "sao-r6").exists()
    assert not any(t.name.startswith(("trajlens-read", "trajlens-write")) for t in threading.enumerate())

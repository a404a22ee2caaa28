"""Ctrl-C ends a command with status 130 and leaves nothing behind: during a table write, though
Polars raises the interrupt itself while Python's own flag is still set, so that a second one
would land in the clean-up (:mod:`trajlens.interrupts`); during a DuckDB query, which DuckDB
ends with an error of its own; between the runs of ``classify``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from trajlens.cli._app import INTERRUPTED, main
from trajlens.store.handle import Store


def _interrupt_once_written(partial: Path, done: threading.Event) -> None:
    """Send this process SIGINT as soon as ``partial`` holds bytes: in the middle of the write."""
    while not done.is_set():
        try:
            if partial.stat().st_size > 0:
                os.kill(os.getpid(), signal.SIGINT)
                return
        except FileNotFoundError:  # not made yet, or renamed into place
            pass
        time.sleep(0.001)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_ctrl_c_in_the_middle_of_a_write_leaves_no_partial_file(samples_store_path, tmp_path, capsys, suffix):
    """``sql --out`` of 11 million rows, interrupted once its partial file holds bytes."""
    target = tmp_path / f"rows{suffix}"
    query = "SELECT a.step, b.step AS other, a.trajectory_id FROM trajectories a, trajectories b WHERE b.step < 3"
    done = threading.Event()
    watcher = threading.Thread(target=_interrupt_once_written, args=(target.with_name(target.name + ".partial"), done))
    watcher.start()
    try:
        status = main(["sql", str(samples_store_path), query, "--out", str(target)])
    finally:
        done.set()
        watcher.join()
    assert status == INTERRUPTED and capsys.readouterr().err == "interrupted\n"
    assert [p.name for p in tmp_path.iterdir()] == []


@pytest.mark.parametrize("ending", [
    lambda: RuntimeError("Query interrupted"),  # DuckDB fetching a result
    lambda: __import__("duckdb").InterruptException("INTERRUPT Error: Interrupted!"),
])
def test_a_query_ctrl_c_ended_is_an_interrupt_not_a_traceback(samples_store_path, tmp_path, monkeypatch, capsys, ending):
    def interrupted(self, query, params=None, **options):
        raise ending()

    monkeypatch.setattr(Store, "sql_batches", interrupted)
    status = main(["sql", str(samples_store_path), "SELECT 1", "--out", str(tmp_path / "rows.csv")])
    assert status == INTERRUPTED
    assert capsys.readouterr().err == "interrupted\n"
    assert list(tmp_path.iterdir()) == []


def test_another_runtime_error_is_not_taken_for_an_interrupt(samples_store_path, monkeypatch):
    def broken(self, query, params=None, **options):
        raise RuntimeError("Query failed for another reason")

    monkeypatch.setattr(Store, "sql_batches", broken)
    with pytest.raises(RuntimeError, match="another reason"):
        main(["sql", str(samples_store_path), "SELECT 1"])


def test_ctrl_c_between_runs_of_classify_publishes_none_of_them(samples_store_copy, monkeypatch, capsys):
    """classify publishes every run's tables together: Ctrl-C after the first run was
    classified leaves the store as it was, its analysis tables and staging included."""
    import trajlens.engine.classify as engine_classify

    real = engine_classify.classify_run_on
    done: list[str] = []

    def classify_then_stop(engine, location, run_id, *args, **kwargs):
        if done:
            raise KeyboardInterrupt
        done.append(run_id)
        return real(engine, location, run_id, *args, **kwargs)

    monkeypatch.setattr(engine_classify, "classify_run_on", classify_then_stop)
    before = sorted(str(p.relative_to(samples_store_copy)) for p in samples_store_copy.rglob("*"))
    assert main(["classify", str(samples_store_copy), "--run", "sao-r6", "--run", "grpo-leg"]) == INTERRUPTED
    assert done == ["sao-r6"] and capsys.readouterr().err.endswith("interrupted\n")
    assert sorted(str(p.relative_to(samples_store_copy)) for p in samples_store_copy.rglob("*")) == before


def test_ctrl_c_stops_a_long_query_at_once(samples_store_path):
    """DuckDB notices no interrupt of the process while a recursive query runs (it ran on for
    minutes): the query runs beside the main thread, which interrupts the connection; the process
    ends with 130, and no query thread is left running to abort the interpreter at its end."""
    query = ("WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 100000000000) "
             "SELECT count(*) FROM t")
    command = subprocess.Popen([sys.executable, "-m", "trajlens", "sql", str(samples_store_path), query],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(4)  # well into the query
    command.send_signal(signal.SIGINT)
    try:
        _, stderr = command.communicate(timeout=30)
    finally:
        command.kill()
    assert (command.returncode, stderr) == (INTERRUPTED, "interrupted\n")

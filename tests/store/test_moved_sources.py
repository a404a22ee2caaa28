"""A run whose recorded source no longer exists: the same logs at a new place are the same run
(a project folder moved), other logs under its id are refused."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from cli_run import run_cli

import trajlens

DATA = Path(__file__).resolve().parents[1] / "data"


def _ingest(source, store):
    return run_cli("ingest", source, "--store", store, "--run", "tiny")


def test_a_moved_source_is_the_same_run_with_its_analyses(tiny_run_dir, tmp_path):
    first = tmp_path / "project" / "logs"
    shutil.copytree(tiny_run_dir, first)
    store = tmp_path / "store"
    assert _ingest(first, store).returncode == 0
    assert run_cli("classify", store).returncode == 0
    moved = tmp_path / "moved" / "logs"
    shutil.move(tmp_path / "project", tmp_path / "moved")

    done = _ingest(moved, store)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (f"run tiny moved from {first} to {moved}: the same content, kept with "
                                           "its analyses")
    handle = trajlens.open(store)
    assert "call_classes" in handle.tables()
    assert handle.sql("SELECT count(*) AS n FROM runs")["n"][0] == 1
    again = _ingest(moved, store)
    assert again.stderr.splitlines()[0] == "run tiny is unchanged: kept as it was, with its analyses"
    assert run_cli("verify", store).returncode == 0


def test_other_logs_in_place_of_a_source_that_is_gone_are_refused(tiny_run_dir, tmp_path):
    first = tmp_path / "logs"
    shutil.copytree(tiny_run_dir, first)
    store = tmp_path / "store"
    assert _ingest(first, store).returncode == 0
    other = tmp_path / "other"
    shutil.move(first, other)
    for table in ("trajectories", "tool_calls", "tokens"):  # one step fewer: other data
        shutil.rmtree(other / table / "step=000002")

    done = _ingest(other, store)
    assert done.returncode == 1
    assert done.stderr == (f"error: {other}: run id 'tiny' is already in {store} from {first}, which no longer "
                           "exists, and this source holds other data; choose another id with --run, or pass "
                           "--replace to replace it\n")
    assert trajlens.open(store).sql("SELECT max(step) AS last FROM trajectories")["last"][0] == 2
    assert _ingest(other, store).returncode == 1
    assert run_cli("ingest", other, "--store", store, "--run", "tiny", "--replace").returncode == 0


def test_a_source_that_still_exists_is_another_source(tiny_run_dir, tmp_path):
    store = tmp_path / "store"
    assert _ingest(tiny_run_dir, store).returncode == 0
    copy = tmp_path / "copy"
    shutil.copytree(tiny_run_dir, copy)
    done = _ingest(copy, store)
    assert done.returncode == 1
    assert done.stderr == (f"error: {copy}: run id 'tiny' is already in {store} from another source "
                           f"({tiny_run_dir}); choose another id with --run, or pass --replace to replace it\n")


@pytest.mark.parametrize("logs", ["trl/grpo-run", "verl/grpo-sandbox"])
def test_a_moved_log_folder_whose_run_names_its_files_is_the_same_run(logs, tmp_path):
    """A log format's loader records the files as they were given in the ``source`` of the runs
    table (TRL) and of each trajectory (verl dumps, ``path:line``): where a row was read, not what
    the run holds."""
    first = tmp_path / "project" / Path(logs).name
    shutil.copytree(DATA / logs, first)
    store = tmp_path / "store"
    assert run_cli("ingest", first, "--store", store).returncode == 0
    assert run_cli("classify", store).returncode == 0
    shutil.move(tmp_path / "project", tmp_path / "moved")
    moved = tmp_path / "moved" / Path(logs).name

    done = run_cli("ingest", moved, "--store", store)
    assert done.returncode == 0, done.stderr
    assert "moved from" in done.stderr and "the same content, kept with its analyses" in done.stderr
    handle = trajlens.open(store)
    assert "call_classes" in handle.tables()
    assert str(moved) in handle.sql("SELECT source FROM runs")["source"][0]
    assert run_cli("verify", store).returncode == 0


@pytest.mark.parametrize("logs", ["verl/grpo-sandbox", "trl/grpo-run"])
def test_a_log_named_by_another_spelling_of_its_path_is_the_same_run(logs, tmp_path, monkeypatch):
    """``./grpo-sandbox`` from its folder, then its absolute path after its files were touched (so
    the store reads it again): the same content, kept with its analyses. The store records where
    rows were read as absolute paths, as ``ingest.json`` records the source."""
    folder = tmp_path / "project"
    shutil.copytree(DATA / logs, folder / Path(logs).name)
    store = tmp_path / "store"
    monkeypatch.chdir(folder)
    assert run_cli("ingest", f"./{Path(logs).name}", "--store", store).returncode == 0
    assert run_cli("classify", store).returncode == 0
    for file in (folder / Path(logs).name).rglob("*"):
        os.utime(file)
    monkeypatch.chdir(tmp_path)

    done = run_cli("ingest", folder / Path(logs).name, "--store", store)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == f"run {Path(logs).name} is unchanged: kept as it was, with its analyses"
    handle = trajlens.open(store)
    assert "call_classes" in handle.tables()
    assert handle.sql("SELECT source FROM runs")["source"].to_list() == [str(folder / Path(logs).name)]
    where = handle.sql("SELECT source FROM trajectories WHERE source IS NOT NULL")["source"].to_list()
    assert all(value.startswith(str(folder)) for value in where)

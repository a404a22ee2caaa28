"""`trajlens check` on a trainer's run directory refuses the files `trajlens ingest` refuses, with
the same line naming the file, record and field, and exits 2 (an input error), never checking a
run ingest would not store nor ending in a traceback."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_run import run_cli

from trajlens.store.layout import table_files


def _nan_reward(table: pa.Table) -> pa.Table:
    rewards = table.column("reward").to_pylist()
    rewards[1] = float("nan")
    return table.set_column(table.schema.get_field_index("reward"), "reward", pa.array(rewards, pa.float64()))


def _text_step(table: pa.Table) -> pa.Table:
    return table.set_column(table.schema.get_field_index("step"), "step", pa.array(["x"] * table.num_rows))


def _no_trajectory_id(table: pa.Table) -> pa.Table:
    return table.drop(["trajectory_id"])


def _step_not_its_folder_s(table: pa.Table) -> pa.Table:
    return table.set_column(table.schema.get_field_index("step"), "step", pa.array([999] * table.num_rows, pa.int64()))


@pytest.mark.parametrize("damage", [_nan_reward, _text_step, _no_trajectory_id, _step_not_its_folder_s])
def test_check_refuses_what_ingest_refuses_with_its_line(tmp_path, tiny_run_dir, damage):
    path = table_files(tiny_run_dir, "trajectories")[-1]
    pq.write_table(damage(pq.read_table(path)), path)
    before = path.read_bytes()
    ingested = run_cli("ingest", tiny_run_dir, "--store", tmp_path / "store")
    checked = run_cli("check", tiny_run_dir)
    assert ingested.returncode == 1 and checked.returncode == 2
    for done in (ingested, checked):
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert checked.stderr == ingested.stderr and checked.stderr.startswith(f"error: {path}: ")
    assert path.read_bytes() == before


def _duplicate_id(table: pa.Table) -> pa.Table:
    ids = table.column("trajectory_id").to_pylist()
    return table.set_column(table.schema.get_field_index("trajectory_id"), "trajectory_id", pa.array([ids[0]] * len(ids)))


def _another_run(table: pa.Table) -> pa.Table:
    return table.set_column(table.schema.get_field_index("run_id"), "run_id", pa.array(["other"] * table.num_rows))


def _stray_call(table: pa.Table) -> pa.Table:  # of tool_calls: calls of a trajectory that is not there
    return table.set_column(table.schema.get_field_index("trajectory_id"), "trajectory_id",
                            pa.array(["nobody"] * table.num_rows))


@pytest.mark.parametrize("table, damage", [("trajectories", _duplicate_id), ("trajectories", _another_run),
                                           ("tool_calls", _stray_call)])
def test_check_refuses_a_run_ingest_refuses_as_a_whole(tmp_path, tiny_run_dir, table, damage):
    """Rows that are not one run's: every file reads, the run does not (ingest checks it last)."""
    path = table_files(tiny_run_dir, table)[-1]
    pq.write_table(damage(pq.read_table(path)), path)
    ingested = run_cli("ingest", tiny_run_dir, "--store", tmp_path / "store")
    checked = run_cli("check", tiny_run_dir)
    assert ingested.returncode == 1 and checked.returncode == 2
    assert checked.stderr == ingested.stderr and len(checked.stderr.strip().splitlines()) == 1, checked.stderr
    assert "Traceback" not in checked.stderr


def test_each_token_file_of_a_run_directory_is_read_once(tmp_path, monkeypatch):
    """The checks ask each batch for its logged column, then for the arrays they recompute from:
    a run directory's token file is read and checked once, serving both."""
    import importlib
    from collections import Counter

    from trajlens.checks import check_run
    from trajlens.synth.generate import generate

    run_dir = tmp_path / "run"
    generate("sao-r7", run_dir, steps=6, batch=4, tokens_per_trajectory=200, tool_calls_per_trajectory=4,
             log_advantages=True)
    parquet = importlib.import_module("trajlens.ingest.parquet")  # trajlens.ingest is also a function's name
    reads, direct = Counter(), parquet.read_table_file

    def counted(path, name, run_id=None):
        reads[(str(path), name)] += 1
        return direct(path, name, run_id)

    monkeypatch.setattr(parquet, "read_table_file", counted)
    check_run(run_dir)
    token_files = {key for key in reads if key[1] == "tokens"}
    assert len(token_files) == len(table_files(run_dir, "tokens")) > 1
    assert all(reads[key] == 1 for key in token_files), reads


@pytest.mark.parametrize("parent", ["runs", "elsewhere"])
def test_a_run_directory_named_with_another_run_id_is_refused_wherever_it_lies(tmp_path, tiny_run_dir, parent):
    """``check runs/r6 --run wrong`` checked the folder's run and passed: the folder was taken for
    a store's run because its parent is named ``runs``, the layout ``synth --help`` suggests."""
    import shutil

    run_dir = tmp_path / parent / "r"
    shutil.copytree(tiny_run_dir, run_dir)
    done = run_cli("check", run_dir, "--run", "no-such-run")
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {run_dir}: --run: the directory holds run 'tiny', not 'no-such-run'"
    assert run_cli("check", run_dir, "--run", "tiny").returncode in (0, 1)

"""A Parquet run with a negative training step is refused, naming the file, the row and ``step``.

Stored, such rows fall outside every stage, partition and check (all count steps from 0), so
the run would look empty or short with no word said.
"""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_run import run_cli

import trajlens
from trajlens.errors import InputError
from trajlens.store.layout import table_files


def _with_step(run_dir, table: str, row: int, step: int):
    """Set ``step`` of one row of the table's last file; returns that file."""
    path = table_files(run_dir, table)[-1]
    data = pq.read_table(path)
    steps = data.column("step").to_pylist()
    steps[row] = step
    index = data.schema.get_field_index("step")
    pq.write_table(data.set_column(index, data.schema.field(index), pa.array(steps, pa.int64())), path)
    return path


@pytest.mark.parametrize("table", ["trajectories", "tool_calls", "tokens", "step_metrics"])
def test_a_negative_step_is_refused_naming_file_row_and_field(tmp_path, tiny_run_dir, table):
    run_dir = tmp_path / f"run-{table}"
    shutil.copytree(tiny_run_dir, run_dir)
    path = _with_step(run_dir, table, 1, -3)
    before = path.read_bytes()
    with pytest.raises(InputError) as caught:
        trajlens.ingest([run_dir], tmp_path / "store")
    assert (caught.value.file, caught.value.record, caught.value.field) == (str(path), 1, "step")
    assert "found -3" in str(caught.value)
    assert path.read_bytes() == before  # the input is never modified


def test_the_cli_refuses_it_in_one_line_and_stores_nothing(tmp_path, tiny_run_dir):
    path = _with_step(tiny_run_dir, "trajectories", 0, -1)
    store = tmp_path / "store"
    done = run_cli("ingest", tiny_run_dir, "--store", store)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines == [f"error: {path}: record 0: field 'step': expected a step of 0 or more, found -1"]
    assert "Traceback" not in done.stderr
    assert not store.exists() or not trajlens.open(store).run_ids()


def test_step_zero_is_kept(tmp_path, tiny_run_dir):
    for table in ("trajectories", "tool_calls", "tokens"):
        path = table_files(tiny_run_dir, table)[-1]
        data = pq.read_table(path)
        index = data.schema.get_field_index("step")
        pq.write_table(data.set_column(index, data.schema.field(index), pa.array([0] * data.num_rows, pa.int64())), path)
        path.parent.rename(path.parent.with_name("step=000000"))
    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    steps = trajlens.open(tmp_path / "store").sql("SELECT min(step) AS first FROM trajectories")["first"][0]
    assert steps == 0


@pytest.mark.parametrize("table", ["trajectories", "tool_calls", "tokens"])  # the step-partitioned tables
def test_a_step_other_than_its_folder_s_is_refused_naming_file_record_and_field(tmp_path, tiny_run_dir, table):
    """A row whose step is not its partition folder's would be stored at one step while every
    reader finds its step's rows by folder (and its calls and tokens at another step)."""
    path = table_files(tiny_run_dir, table)[-1]
    folder_step = int(path.parent.name.removeprefix("step="))
    path = _with_step(tiny_run_dir, table, 0, 999)
    before = path.read_bytes()
    with pytest.raises(InputError) as caught:
        trajlens.ingest([tiny_run_dir], tmp_path / "store")
    assert (caught.value.file, caught.value.field) == (str(path), "step")
    assert str(caught.value).endswith(f"expected {folder_step} (the step of its folder {path.parent.name}), found 999")
    assert path.read_bytes() == before

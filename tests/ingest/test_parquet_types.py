"""A Parquet run's columns are read in their schema's kind: numbers given as text (a step of
"1", a reward of "0.25") or text given as numbers (a command of 7) are refused, naming the file
and the column, by ingest and by ``trajlens check`` reading the run in place; a number of
another width (int32 for int64) is read as it stands."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_run import run_cli

import trajlens
from trajlens.errors import InputError
from trajlens.store.layout import table_files


def _retyped(run_dir, table: str, column: str, kind: pa.DataType):
    """Cast ``column`` of the table's first file to ``kind``; returns that file."""
    path = table_files(run_dir, table)[0]
    data = pq.read_table(path)
    index = data.schema.get_field_index(column)
    values = pa.array(range(data.num_rows), kind) if pa.types.is_integer(kind) and data.schema.field(column).type == pa.string() \
        else data.column(column).cast(kind)  # text that is no number becomes numbers 0, 1, ...
    pq.write_table(data.set_column(index, pa.field(column, kind), values), path)
    return path


@pytest.mark.parametrize("table, column, kind, schema_kind", [
    ("trajectories", "step", pa.string(), "int64"),
    ("trajectories", "reward", pa.string(), "double"),
    ("tool_calls", "call_index", pa.large_string(), "int32"),
    ("tool_calls", "command", pa.int64(), "string"),
])
def test_a_column_of_the_other_kind_is_refused_naming_file_and_column(tmp_path, tiny_run_dir, table, column, kind, schema_kind):
    path = _retyped(tiny_run_dir, table, column, kind)
    before = path.read_bytes()
    with pytest.raises(InputError) as caught:
        trajlens.ingest([tiny_run_dir], tmp_path / "store")
    assert (caught.value.file, caught.value.field) == (str(path), column)
    assert str(caught.value).endswith(f"expected {schema_kind}, found {kind}")
    assert path.read_bytes() == before
    done = run_cli("check", tiny_run_dir)
    assert done.returncode == 2 and f"{path}: field '{column}': expected {schema_kind}, found {kind}" in done.stderr


def test_a_number_of_another_width_is_read(tmp_path, tiny_run_dir):
    _retyped(tiny_run_dir, "trajectories", "step", pa.int32())
    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    assert trajlens.open(tmp_path / "store").run_ids()


@pytest.mark.parametrize("kind", [pa.int64(), pa.float64()])
def test_a_flag_given_as_numbers_is_read_as_0_and_1_and_refused_otherwise(tmp_path, tiny_run_dir, kind):
    """Arrow would read any number but 0 as true: a ``resolved`` of 5 is no verdict."""
    import polars as pl

    path = table_files(tiny_run_dir, "trajectories")[0]
    data = pq.read_table(path)
    index = data.schema.get_field_index("resolved")
    flags = [row % 2 for row in range(data.num_rows)]
    pq.write_table(data.set_column(index, pa.field("resolved", kind), pa.array(flags, kind)), path)
    trajlens.ingest([tiny_run_dir], tmp_path / "store")
    stored = trajlens.open(tmp_path / "store").trajectories.filter(pl.col("step") == data.column("step")[0].as_py())
    assert stored.select("resolved").collect()["resolved"].to_list() == [bool(f) for f in flags]
    pq.write_table(data.set_column(index, pa.field("resolved", kind), pa.array([0] + [5] * (data.num_rows - 1), kind)), path)
    with pytest.raises(InputError) as caught:
        trajlens.ingest([tiny_run_dir], tmp_path / "again")
    assert str(caught.value) == f"{path}: record 1: field 'resolved': expected bool (or 0 and 1), found {kind} {pa.scalar(5, kind).as_py()!r}"

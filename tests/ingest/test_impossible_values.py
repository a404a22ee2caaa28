"""Counts and spans that cannot be are refused, naming the file, the record and the field: a
negative turn or model-token count, a negative call index or call turn, a call's token span
that starts before 0 or ends before it starts. Stored, they would give classify, view and attribute offsets into nothing."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_run import run_cli

import trajlens
from trajlens.errors import InputError
from trajlens.store.layout import table_files


def _set(run_dir, table: str, column: str, value: int):
    """Set ``column`` of the first row of the table's first file; returns (file, its record)."""
    path = table_files(run_dir, table)[0]
    data = pq.read_table(path)
    values = data.column(column).to_pylist()
    values[0] = value
    index = data.schema.get_field_index(column)
    pq.write_table(data.set_column(index, data.schema.field(index), pa.array(values, data.schema.field(index).type)), path)
    record = data.column("trajectory_id")[0].as_py()
    if table == "tool_calls":
        record = f"{record} call {data.column('call_index')[0].as_py()}"
    return path, record, data


@pytest.mark.parametrize("table, column, value, expected", [
    ("trajectories", "num_turns", -1, "0 or more"),
    ("trajectories", "model_tokens", -100, "0 or more"),
    ("tool_calls", "turn", -1, "0 or more"),
    ("tool_calls", "call_index", -7, "0 or more"),
    ("tool_calls", "token_start", -5, "0 or more"),
    ("tool_calls", "token_start", 10**12, "token_start or more ({start})"),
    ("tool_calls", "token_end", -100, "token_start or more ({start})"),
])
def test_an_impossible_count_or_span_is_refused(tmp_path, tiny_run_dir, table, column, value, expected):
    path, record, data = _set(tiny_run_dir, table, column, value)
    field, found, start = column, value, None
    if column == "call_index":  # the record names the call by its index as the file gives it
        record = f"{record.rsplit(' call ', 1)[0]} call {value}"
    if table == "tool_calls":
        start = value if column == "token_start" else data.column("token_start")[0].as_py()
        if column == "token_start" and value > 0:  # past its end: the end is named
            field, found = "token_end", data.column("token_end")[0].as_py()
    message = f"{path}: record {record}: field '{field}': expected {expected.format(start=start)}, found {found}"
    with pytest.raises(InputError) as caught:
        trajlens.ingest([tiny_run_dir], tmp_path / "store")
    assert str(caught.value) == message
    done = run_cli("check", tiny_run_dir)
    assert done.returncode == 2 and done.stderr == f"error: {message}\n"


@pytest.mark.parametrize("span_calls", [65_536, 1], ids=["files-together", "file-by-file"])
def test_a_call_span_past_its_token_arrays_is_refused_or_its_tokens_left_out(tmp_path, tiny_run_dir, monkeypatch,
                                                                            span_calls):
    """The arrays are another file's: the call's file is named, and the arrays' length and file,
    whether the calls' spans were gathered over several files or one at a time."""
    import polars as pl

    from trajlens.ingest import parquet

    monkeypatch.setattr(parquet, "SPAN_CALLS", span_calls)

    tokens = pq.read_table(table_files(tiny_run_dir, "tokens")[0])
    length = len(tokens.column("response_mask")[0].as_py())
    path, record, _ = _set(tiny_run_dir, "tool_calls", "token_end", length + 1)
    trajectory = record.rsplit(" call ", 1)[0]
    assert tokens.column("trajectory_id")[0].as_py() == trajectory
    message = (f"{path}: record {record}: field 'token_end': expected at most {length} (the length of its token "
               f"arrays in {table_files(tiny_run_dir, 'tokens')[0]}), found {length + 1}")
    with pytest.raises(InputError) as caught:
        trajlens.ingest([tiny_run_dir], tmp_path / "store")
    assert str(caught.value) == message
    assert not (tmp_path / "store").exists()
    done = run_cli("ingest", tiny_run_dir, "--store", tmp_path / "lenient", "--lenient")
    assert done.returncode == 0 and f"skipped: {message}; the trajectory's tokens are left out" in done.stderr
    kept = trajlens.open(tmp_path / "lenient").tokens.select("trajectory_id").collect()["trajectory_id"]
    assert trajectory not in kept.to_list() and kept.len() == tokens.num_rows - 1 + sum(
        pq.read_table(f).num_rows for f in table_files(tiny_run_dir, "tokens")[1:])
    assert trajlens.open(tmp_path / "lenient").tool_calls.filter(pl.col("trajectory_id") == trajectory).collect().height

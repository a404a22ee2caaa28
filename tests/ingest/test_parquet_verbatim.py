"""A run already in the store's layout is stored with its files' bytes: read and checked once,
not decoded and encoded again. Only a file that would be stored as it stands is copied."""

from __future__ import annotations

import shutil

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import trajlens
from trajlens.errors import InputError
from trajlens.store.layout import PACK_BYTES, table_files


@pytest.fixture(scope="module")
def big_steps(tmp_path_factory):
    """Two steps whose token arrays are each over PACK_BYTES (stored one file a step)."""
    from trajlens.synth import generate

    run_dir = tmp_path_factory.mktemp("verbatim") / "run"
    generate("sao-r7", run_dir, steps=2, batch=8, tokens_per_trajectory=20_000, tool_calls_per_trajectory=5)
    for path in table_files(run_dir, "tokens"):  # encoded otherwise than the store encodes: a copy shows
        table = pq.read_table(path)
        assert table.nbytes >= PACK_BYTES
        pq.write_table(table, path, compression="snappy")
    return run_dir


def _stored_files(store, run_id: str, name: str):
    return table_files(store / "runs" / run_id, name)


def _stored(store, name: str) -> pl.DataFrame:
    return trajlens.open(store).table(name).collect()


def _read(paths) -> pl.DataFrame:
    return pl.from_arrow(pa.concat_tables(pq.read_table(p) for p in paths))


def test_a_step_in_the_stores_own_layout_is_stored_byte_for_byte(big_steps, tmp_path):
    trajlens.ingest([big_steps], tmp_path / "store")
    sources, stored = table_files(big_steps, "tokens"), _stored_files(tmp_path / "store", "sao-r7", "tokens")
    assert [p.read_bytes() for p in stored] == [p.read_bytes() for p in sources]
    assert _stored(tmp_path / "store", "tokens").equals(_read(sources))
    # steps too small to stand alone are packed together, as before (tool calls of two steps in one file)
    assert [p.parent.name for p in _stored_files(tmp_path / "store", "sao-r7", "tool_calls")] == ["step=000001-000002"]


def test_a_run_stored_under_another_id_is_written_with_that_id(big_steps, tmp_path):
    trajlens.ingest([big_steps], tmp_path / "store", run_id="renamed")
    tokens = _stored(tmp_path / "store", "tokens")
    assert tokens["run_id"].unique().to_list() == ["renamed"]
    assert tokens.drop("run_id").equals(_read(table_files(big_steps, "tokens")).drop("run_id"))


def test_a_file_that_fails_its_checks_is_refused_before_anything_is_stored(big_steps, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(big_steps, run_dir)
    path = table_files(run_dir, "tokens")[-1]
    data = pq.read_table(path)
    values = data.column("values").to_pylist()
    values[3] = values[3][:-1]  # one value short of its response mask
    index = data.schema.get_field_index("values")
    pq.write_table(data.set_column(index, data.schema.field(index), pa.array(values, data.schema.field(index).type)), path)
    before = path.read_bytes()
    with pytest.raises(InputError) as caught:
        trajlens.ingest([run_dir], tmp_path / "store")
    assert (caught.value.file, caught.value.field) == (str(path), "values")
    assert path.read_bytes() == before and not (tmp_path / "store" / "runs" / "sao-r7").exists()

"""A large file of flat lists is decoded by Polars and comes back as Arrow's reader returns it:
the file's types, the same values and nulls; other files are read by Arrow."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trajlens.store import decode
from trajlens.store.layout import read_parquet_file


def _token_file(path, rows: int = 40, tokens: int = 16000) -> str:
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, tokens, rows)
    lengths[rows // 2] = 0
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    count = int(offsets[-1])
    values = pa.array(rng.standard_normal(count).astype(np.float32), mask=rng.random(count) < 0.01)
    null_rows = np.zeros(rows, dtype=bool)
    null_rows[-1] = True
    table = pa.table({
        "run_id": pa.array(["r"] * rows),
        "step": pa.array(np.full(rows, 4, dtype=np.int64)),
        "trajectory_id": pa.array([f"t{i}" for i in range(rows)]),
        "response_mask": pa.ListArray.from_arrays(pa.array(offsets), pa.array(rng.random(count) < 0.7)),
        "values": pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.array(null_rows)),
        "wide": pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64)),
                                              pa.array(rng.standard_normal(count))),
    })
    file = str(path / "part-0.parquet")
    pq.write_table(table, file, compression="zstd", row_group_size=16)
    return file


@pytest.mark.parametrize("columns", [None, ["values", "trajectory_id", "response_mask"], ["wide", "step"]])
def test_a_large_file_of_lists_reads_as_arrow_reads_it(tmp_path, columns):
    file = _token_file(tmp_path)
    with pq.ParquetFile(file) as parquet:
        names = parquet.schema_arrow.names if columns is None else columns
        assert decode.polars_decodes(parquet.metadata, parquet.schema_arrow, names)
        expected = parquet.read(columns=columns)
    for read in (decode.read_with_polars(file, expected.schema, names), read_parquet_file(file, columns)):
        assert read is not None
        assert read.schema.equals(expected.schema, check_metadata=True)
        assert read.equals(expected)
    if "values" in names:
        assert read.column("values").null_count == 1
        assert read.column("values").combine_chunks().values.null_count > 0


def test_a_small_file_or_a_type_polars_changes_stays_with_arrow(tmp_path):
    small = _token_file(tmp_path, rows=4, tokens=20)
    with pq.ParquetFile(small) as parquet:
        assert not decode.polars_decodes(parquet.metadata, parquet.schema_arrow, parquet.schema_arrow.names)
    nested = tmp_path / "nested.parquet"
    count = decode.POLARS_FROM_VALUES + 1
    pq.write_table(pa.table({"when": pa.array(np.arange(count), pa.timestamp("us", tz="UTC")),
                             "x": np.arange(count, dtype=np.float16)}), nested)
    with pq.ParquetFile(nested) as parquet:
        for name in ("when", "x"):
            assert not decode.polars_decodes(parquet.metadata, parquet.schema_arrow, [name])
    assert read_parquet_file(nested).equals(pq.read_table(nested))

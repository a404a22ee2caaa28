"""Which library decodes a Parquet file's columns: Polars for large files of flat lists.

A step's token arrays (``list<float>`` and ``list<bool>`` columns of a few million values) take
Polars about a third of the CPU time Arrow's reader takes (Polars 2.2: 3 s against 8-10 s of
CPU, 2.3 s against 4.0 s wall, for the 200 files of a 388 M-token run on two cores); on a small
file Arrow opens and reads faster (0.4 ms against 1 ms). Either way the caller gets the Arrow
table Arrow's reader returns: the file's own types, values unchanged. Polars hands lists back
with 64-bit offsets and strings as ``large_string``; they are narrowed to the file's types
without copying the values.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

POLARS_FROM_VALUES = 1 << 18
"""Leaf values (of the columns read, over the file) from which Polars decodes the file."""


def _flat(kind: pa.DataType) -> bool:
    return pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_float32(kind) \
        or pa.types.is_float64(kind)


def _round_trips(kind: pa.DataType) -> bool:
    """Whether Polars reads a column of this type back as the same values in a type that narrows
    to it: numbers, booleans, strings and lists of numbers or booleans."""
    if _flat(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return True
    return (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and _flat(kind.value_type)


def polars_decodes(metadata: pq.FileMetaData, schema: pa.Schema, columns: Sequence[str]) -> bool:
    """Whether Polars decodes ``columns`` of the file faster, with the same result (each of them
    a column of the file, named once)."""
    if len(set(columns)) != len(columns) or not set(columns) <= set(schema.names) or \
            len(set(schema.names)) != len(schema.names):
        return False
    fields = [schema.field(name) for name in columns]
    if not fields or not all(_round_trips(field.type) for field in fields):
        return False
    wanted = set(columns)
    values = 0
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for index in range(row_group.num_columns):
            column = row_group.column(index)
            if column.path_in_schema.split(".", 1)[0] in wanted:
                values += column.num_values
    return values >= POLARS_FROM_VALUES


def read_with_polars(path: str, schema: pa.Schema, columns: Sequence[str]) -> pa.Table | None:
    """``columns`` of the local Parquet file at ``path`` decoded by Polars, in the file's types
    (``schema``); None where a list holds too many values for the file's 32-bit offsets."""
    import polars as pl

    decoded = pl.read_parquet(path, columns=list(columns), hive_partitioning=False).to_arrow(
        compat_level=pl.CompatLevel.oldest())
    arrays = []
    for name in columns:
        field = schema.field(name)
        column = decoded.column(name)
        if pa.types.is_list(field.type) and pa.types.is_large_list(column.type):
            narrowed = [_narrow_list(chunk, field.type) for chunk in column.chunks]
            if any(chunk is None for chunk in narrowed):
                return None
            arrays.append(pa.chunked_array(narrowed, field.type))
        else:
            arrays.append(column if column.type == field.type else column.cast(field.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema([schema.field(name) for name in columns],
                                                         metadata=schema.metadata))


def _narrow_list(chunk: pa.LargeListArray, kind: pa.ListType) -> pa.ListArray | None:
    """A ``large_list`` array as the ``list`` array ``kind``, its values shared (not copied)."""
    offsets = chunk.offsets
    if len(offsets) and offsets[-1].as_py() >= 2**31:
        return None
    values = chunk.values if chunk.values.type == kind.value_type else chunk.values.cast(kind.value_type)
    return pa.ListArray.from_arrays(offsets.cast(pa.int32()), values, type=kind,
                                    mask=chunk.is_null() if chunk.null_count else None)

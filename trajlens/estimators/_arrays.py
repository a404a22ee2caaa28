"""Arrow list columns as flat NumPy buffers with offsets, and back, without loops over rows.

A ``list<float32>`` column of B trajectories is one flat buffer of all their tokens plus B + 1
offsets; trajlens's token tables are stored that way (Parquet -> Arrow). Reading them as a
padded (B, T_max) tensor costs a scatter of every token and ``T_max - T`` padding per row; the
compiled kernels of :mod:`trajlens.estimators._compiled` read the flat buffers directly, and
their flat results become list columns again by reusing the offsets (no copy).

Shapes: N tokens in all, B rows (trajectories).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class FlatList(NamedTuple):
    """One list column as flat buffers."""

    values: np.ndarray
    """(N,) every row's entries, row after row (a null entry is filled)."""
    offsets: np.ndarray
    """(B + 1,) int64: row i is ``values[offsets[i]:offsets[i + 1]]``."""
    present: np.ndarray
    """(B,) bool: False where the row's list itself is null (it then has no entries)."""

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


def flat_list(column: pa.Array | pa.ChunkedArray, dtype: type, fill: object = 0) -> FlatList:
    """``column`` (a list array) as :class:`FlatList` of ``dtype``; zero-copy where Arrow allows."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if pa.types.is_large_list(column.type):
        column = column.cast(pa.list_(column.type.value_type))
    offsets = column.offsets.to_numpy().astype(np.int64)  # honours the array's slice offset
    start, stop = int(offsets[0]), int(offsets[-1])
    values = column.values.slice(start, stop - start)
    if values.null_count:
        values = pc.fill_null(values, pa.scalar(fill, values.type))
    flat = _unpacked(values) if pa.types.is_boolean(values.type) else values.to_numpy(zero_copy_only=False)
    if flat.dtype != dtype:
        flat = flat.astype(dtype)
    present = column.is_valid().to_numpy(zero_copy_only=False)
    return FlatList(flat, offsets - start, present)


def _unpacked(values: pa.BooleanArray) -> np.ndarray:
    """A boolean array (no nulls) as NumPy booleans, unpacked from its bitmap in one pass (five
    times Arrow's own conversion on a step's response mask)."""
    if len(values) == 0:
        return np.zeros(0, dtype=np.bool_)
    bits = np.frombuffer(values.buffers()[1], dtype=np.uint8)
    unpacked: np.ndarray = np.unpackbits(bits, count=values.offset + len(values), bitorder="little")[values.offset:]
    return unpacked.view(np.bool_)


def list_array(values: np.ndarray, offsets: np.ndarray) -> pa.ListArray:
    """A ``list<values.dtype>`` array from flat ``values`` and (B + 1) ``offsets`` (no copy of values)."""
    if int(offsets[-1]) >= 2**31:
        return pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64)), pa.array(values))
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values))

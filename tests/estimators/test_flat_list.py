"""List columns as flat NumPy buffers: every entry in row order, a null entry filled, a sliced
column read from its own offset (booleans are unpacked from their bitmap)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from trajlens.estimators._arrays import flat_list


@pytest.mark.parametrize("kind", [np.bool_, np.float32])
def test_flat_values_are_each_rows_entries_in_order(kind):
    rng = np.random.default_rng(7)
    for trial in range(200):
        rows = int(rng.integers(0, 40))
        lengths = rng.integers(0, 11, rows)
        entries = rng.random(int(lengths.sum()))
        values = entries < 0.5 if kind is np.bool_ else entries.astype(np.float32)
        nulls = rng.random(values.size) < 0.2 if trial % 2 else None
        column = pa.ListArray.from_arrays(pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)),
                                          pa.array(values, mask=nulls))
        first, last = sorted(int(x) for x in rng.integers(0, rows + 1, 2))
        part = column.slice(first, last - first)  # a slice starts mid-bitmap
        fill = kind(0)
        found = flat_list(part, kind, fill)
        expected = np.array([fill if x is None else x for row in part.to_pylist() for x in row], dtype=kind)
        assert found.values.dtype == kind and np.array_equal(found.values, expected), trial
        assert np.array_equal(found.lengths, [len(row) for row in part.to_pylist()])

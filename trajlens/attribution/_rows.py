"""Rows that come a step at a time, kept as columns and made into one frame when read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Union

import numpy as np
import polars as pl

Column = Union[np.ndarray, pl.Series]


class RowBlocks:
    """Blocks of rows (a step's), each a mapping of column name to a NumPy array or a Polars
    Series of one length, stacked into one frame by :meth:`frame`.

    On a run of thousands of small steps, making a frame of each step's few rows costs more than
    the rows themselves; here each column is joined once. The frame is the one
    ``pl.concat(frames, how="diagonal_relaxed")`` gives: columns in order of first appearance, a
    column a block lacks null in that block's rows.
    """

    def __init__(self) -> None:
        self._blocks: list[dict[str, Column]] = []

    def append(self, block: Mapping[str, Column] | pl.DataFrame) -> None:
        if isinstance(block, pl.DataFrame):
            block = {name: block.get_column(name) for name in block.columns}
        if block:
            self._blocks.append(dict(block))

    def __bool__(self) -> bool:
        return bool(self._blocks)

    def __len__(self) -> int:
        return len(self._blocks)

    def frame(self) -> pl.DataFrame:
        names = list(dict.fromkeys(name for block in self._blocks for name in block))
        sizes = [len(next(iter(block.values()))) for block in self._blocks]
        return pl.DataFrame([_stacked(name, [block.get(name) for block in self._blocks], sizes) for name in names])


def _stacked(name: str, parts: list[Column | None], sizes: list[int]) -> pl.Series:
    """One column from its blocks' parts (None: the block lacks it, its rows are null)."""
    arrays = [part for part in parts if isinstance(part, np.ndarray)]
    if len(arrays) == len(parts):
        return pl.Series(name, np.concatenate(arrays))
    if len(arrays) == sum(part is not None for part in parts) and all(a.dtype.kind == "f" for a in arrays):
        # Floats that some blocks lack: NaN placeholders, then null where they stand.
        filled = [part if part is not None else np.full(size, np.nan) for part, size in zip(parts, sizes)]
        missing = np.concatenate([np.full(size, part is None) for part, size in zip(parts, sizes)])
        return pl.Series(name, np.concatenate(filled)).scatter(np.flatnonzero(missing), None)
    series = [None if part is None else pl.Series(name, part) if isinstance(part, np.ndarray) else part.alias(name)
              for part in parts]
    dtype = next(s.dtype for s in series if s is not None)
    frames = [(s if s is not None else pl.repeat(None, size, dtype=dtype, eager=True).alias(name)).to_frame()
              for s, size in zip(series, sizes)]
    return pl.concat(frames, how="vertical_relaxed").to_series()

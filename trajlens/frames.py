"""Frames handed to the library: what a function accepts, and the error when one lacks a column.

Every public function that takes a table accepts a Polars DataFrame or LazyFrame or an Arrow
table (:func:`as_frame`, :func:`as_lazy`), and names the first column it needs that the table
lacks (:func:`require_columns`: a :class:`~trajlens.errors.FrameError`, not an error from deep
inside a query plan).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl
import pyarrow as pa

from trajlens.errors import FrameError


def as_frame(table: Any, name: str) -> pl.DataFrame:
    """A Polars DataFrame from a DataFrame, LazyFrame or Arrow table; a TypeError naming
    ``name`` for anything else."""
    if isinstance(table, pl.LazyFrame):
        return table.collect()
    if isinstance(table, pl.DataFrame):
        return table
    if isinstance(table, (pa.Table, pa.RecordBatch)):
        return pl.from_arrow(table)  # type: ignore[return-value]
    raise TypeError(f"{name}: expected a Polars DataFrame or LazyFrame or an Arrow table, got {type(table).__name__}")


def as_lazy(table: Any, name: str) -> pl.LazyFrame:
    """:func:`as_frame`, lazily: a LazyFrame stays one (nothing is read)."""
    return table if isinstance(table, pl.LazyFrame) else as_frame(table, name).lazy()


def require_columns(frame: pl.DataFrame | pl.LazyFrame, name: str, function: str, columns: Iterable[str]) -> None:
    """Raise a FrameError naming the first of ``columns`` that ``frame`` (the ``name`` frame
    handed to ``function``) lacks."""
    present = frame.collect_schema().names() if isinstance(frame, pl.LazyFrame) else frame.columns
    missing = next((column for column in columns if column not in present), None)
    if missing is not None:
        raise FrameError(name, function, missing)


__all__ = ["as_frame", "as_lazy", "require_columns"]

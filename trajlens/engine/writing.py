"""Writing a run's analysis tables from step results, one step at a time.

The largest table of a command (``call_classes``, ``call_credit``) streams from the engine
into its Parquet file; the small ones (one row per trajectory or per step) are kept and
written after. On a store this machine can open, tables are published with
:meth:`trajlens.store.Store.write_derived` (staged, journalled, the database rebuilt); elsewhere
through :meth:`trajlens.run.location.StoreLocation.write_derived`.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import polars as pl
import pyarrow as pa

from trajlens.engine.base import StepResult
from trajlens.run.location import StoreLocation, write_tables


class StepStream:
    """Engine results, read once: table ``streamed`` goes to a file, the others are kept.

    Passed to ``Store.write_derived`` as the frame to write (it calls :meth:`write_parquet`).
    """

    def __init__(self, results: Iterator[StepResult], streamed: str,
                 progress: Callable[[str], None] | None = None) -> None:
        self.results = results
        self.streamed = streamed
        self.progress = progress
        self.kept: dict[str, list[pa.Table]] = {}
        self.steps: list[int] = []

    def tables(self) -> Iterator[pa.Table]:
        """The streamed table's part of each step, in step order; the other parts are kept."""
        for result in self.results:
            self.steps.append(result.step)
            for name, table in result.tables.items():
                if name == self.streamed:
                    yield table
                else:
                    self.kept.setdefault(name, []).append(table)
            if self.progress is not None:
                self.progress(f"step {result.step}")

    def write_parquet(self, path: Any) -> None:
        """Write the streamed table to ``path`` (a local path or an open output stream)."""
        write_tables(path, self.tables())

    def frame(self, name: str) -> pl.DataFrame:
        """A kept table, its steps stacked in order (empty when no step produced it)."""
        parts = [pl.DataFrame(table) for table in self.kept.get(name, []) if table.num_columns]
        return pl.concat(parts, how="diagonal_relaxed") if parts else pl.DataFrame()


def save_table(store: Any, location: StoreLocation, name: str, run_id: str, frame: Any) -> None:
    """Save a run's part of analysis table ``name``: ``frame`` is a Polars frame or a :class:`StepStream`."""
    if store is not None:
        store.write_derived(name, run_id, frame)
        return
    tables = frame.tables() if isinstance(frame, StepStream) else iter([frame.to_arrow()])
    location.write_derived(name, run_id, tables)


__all__ = ["StepStream", "save_table"]

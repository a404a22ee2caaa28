"""One stored run, read a step at a time: :class:`RunReader`.

A reader is a plain frozen value (the store's location and the run id), so it travels to an
engine's workers as it is. Every consumer that reads a stored run step by step (the
attribution stream, the engines' step functions) reads through one, local store or remote.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from trajlens.run.location import StoreLocation


@dataclass(frozen=True)
class RunReader:
    """Reads the steps of one run of a store, on any file system ``pyarrow.fs`` opens."""

    location: StoreLocation
    run_id: str

    @classmethod
    def of(cls, store: object, run_id: str) -> "RunReader":
        """The reader of ``run_id`` in an open store (anything with a ``path``) or at a location."""
        location = store if isinstance(store, StoreLocation) else StoreLocation.of(getattr(store, "path"))
        return cls(location, run_id)

    def steps(self, table: str = "trajectories") -> list[int]:
        """Steps with rows of ``table``, in order."""
        return self.location.steps(self.run_id, table)

    def read_step(self, table: str, step: int, columns: Sequence[str] | None = None) -> pa.Table | None:
        """The rows of one step of ``table`` (the ``columns`` it has), or None when it has none."""
        rows = self.location.read_step(self.run_id, table, step, columns)
        return rows if rows is not None and rows.num_rows else None

    def read_steps(self, table: str, steps: Sequence[int], columns: Sequence[str] | None = None) -> pl.DataFrame | None:
        """The rows of ``steps`` of ``table`` (the ``columns`` of the schema it has), in step
        order, or None when they have none: one scan on this machine, a step at a time elsewhere."""
        from trajlens.run.partitions import read_files

        if self.location.local_path is not None:
            rows = read_files(self.location.partitions(self.run_id, table, steps), table, steps, columns)
            return rows if rows.height else None
        parts = [part for step in steps if (part := self.read_step(table, step)) is not None]
        if not parts:
            return None
        frame = pl.DataFrame(pa.concat_tables(parts, promote_options="default") if len(parts) > 1 else parts[0])
        return frame.select([c for c in (columns or frame.columns) if c in frame.columns])


__all__ = ["RunReader"]

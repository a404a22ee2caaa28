"""The canonical Parquet layout of a run, shared by the store and by Parquet inputs.

A run directory holds one sub-directory per table; tables with a ``step`` column other than
``step_metrics`` are partitioned by step::

    RUN/
      runs/part-0.parquet
      trajectories/step=000012/part-0.parquet
      tool_calls/step=000012/part-0.parquet
      tokens/step=000012/part-0.parquet
      step_metrics/part-0.parquet

Every table has at least one file (possibly empty), so a glob over a store never comes back
empty. The ``step`` column stays inside the files; the directory names only help pruning.
:class:`RunDirWriter` writes one step at a time, so a generator or a streaming loader can
write runs larger than memory.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from trajlens.model import RunData
from trajlens.schema import SCHEMAS, TABLES, conform

STEP_PARTITIONED: tuple[str, ...] = ("trajectories", "tool_calls", "tokens")
# Level 9: the shipped samples are read far more often than written; writing stays fast.
PARQUET_OPTIONS = {"compression": "zstd", "compression_level": 9, "write_statistics": True}


def step_dir(step: int) -> str:
    return f"step={step:06d}"


class RunDirWriter:
    """Writes a run directory in the canonical layout, step partition by step partition.

    Use as a context manager; on an exception the partial directory is left for the caller
    (the store writes into a temporary directory and renames it only on success).
    """

    def __init__(self, directory: Path | str, runs: pa.Table) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=False)
        self._parts: dict[tuple[str, int], int] = {}
        self._written: set[str] = set()
        self._metrics: list[pa.Table] = []
        self._write(conform(runs, "runs", str(self.directory)), self.directory / "runs" / "part-0.parquet")
        self._written.add("runs")

    def write_step(self, name: str, table: pa.Table) -> None:
        """Append rows of a step-partitioned table; rows may span several steps."""
        if name == "step_metrics":
            self._metrics.append(conform(table, name, str(self.directory)))
            return
        if table.num_rows == 0:
            return
        table = conform(table, name, str(self.directory))
        steps = pc.unique(table.column("step")).to_pylist()
        for step in sorted(steps):
            part = table.filter(pc.equal(table.column("step"), step)) if len(steps) > 1 else table
            index = self._parts.get((name, step), 0)
            self._parts[(name, step)] = index + 1
            self._write(part, self.directory / name / step_dir(step) / f"part-{index}.parquet")
        self._written.add(name)

    def write_run(self, run: RunData) -> None:
        for name in TABLES[1:]:
            self.write_step(name, run.table(name))

    def close(self) -> None:
        metrics = pa.concat_tables(self._metrics) if self._metrics else SCHEMAS["step_metrics"].empty_table()
        if metrics.num_rows:
            metrics = metrics.sort_by([("step", "ascending"), ("name", "ascending")])
        self._write(metrics, self.directory / "step_metrics" / "part-0.parquet")
        for name in STEP_PARTITIONED:
            if name not in self._written:
                self._write(SCHEMAS[name].empty_table(), self.directory / name / "empty.parquet")

    def __enter__(self) -> "RunDirWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()

    @staticmethod
    def _write(table: pa.Table, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path, **PARQUET_OPTIONS)


def table_files(run_dir: Path, name: str) -> list[Path]:
    """Parquet files of table ``name`` in a run directory, in step order."""
    return sorted((run_dir / name).rglob("*.parquet"))


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and (path / "runs").is_dir() and (path / "trajectories").is_dir()

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

The store packs tiny steps: a writer given ``pack_bytes`` keeps the rows of consecutive steps
smaller than that and writes them as one file in a directory named for the range of steps it
holds, ``step=000012-000040/`` (steps 12 to 40; not every step in the range need have rows).
Every scan pays a file open and a footer per file, so a run of 100,000 one-trajectory steps
is 14 to 142 files a table rather than 100,000 (two tool calls of three tokens a step). Readers find a step's rows in
``step=N/`` and in every ``step=A-B/`` with ``A <= N <= B`` (:func:`step_range`).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from trajlens.rows import RunData
from trajlens.store.decode import polars_decodes, read_with_polars
from trajlens.schema import SCHEMAS, TABLES, conform

# A run id names a folder: 1-128 characters, letters, digits, '.', '_' and '-', starting
# with a letter or digit (so never '.', '..', empty, or a hidden name).
MAX_RUN_ID_LENGTH = 128
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,%d}" % (MAX_RUN_ID_LENGTH - 1))
RUN_ID_RULE = f"1-{MAX_RUN_ID_LENGTH} letters, digits, '.', '_' or '-', starting with a letter or digit"
"""What :data:`RUN_ID_PATTERN` takes, in words: what an error says it expected."""

STEP_PARTITIONED: tuple[str, ...] = ("trajectories", "tool_calls", "tokens")
# Level 9: the shipped samples are read far more often than written; writing stays fast.
PARQUET_OPTIONS = {"compression": "zstd", "compression_level": 9, "write_statistics": True}
PACK_BYTES = 1 << 20
"""The store's ``pack_bytes``: steps whose rows of a table take less Arrow memory than this
(1 MiB) are written together, up to this much a file."""
_STEP_DIR = re.compile(r"step=([0-9]{1,18})(?:-([0-9]{1,18}))?")


def step_dir(first: int, last: int | None = None) -> str:
    """The partition directory of step ``first``, or of the packed steps ``first`` to ``last``."""
    return f"step={first:06d}" if last is None or last == first else f"step={first:06d}-{last:06d}"


def step_range(name: str) -> tuple[int, int] | None:
    """(first, last) step of a partition directory's name (equal for ``step=N``); None for
    any other name."""
    match = _STEP_DIR.fullmatch(name)
    if match is None:
        return None
    first = int(match[1])
    last = int(match[2]) if match[2] is not None else first
    return (first, last) if first <= last else None


def rows_of_step(files: Sequence[str], step: int, columns: Sequence[str] | None, names: Sequence[str],
                 read: Callable[[str, list[str] | None, bool], pa.Table]) -> tuple[pa.Table, bool]:
    """The rows of ``step`` in ``files`` (its ``step=N`` partition's and those of packed ranges
    around it; only the ``columns`` among the files' ``names``, when given), and whether any file
    was packed. ``read(path, columns, packed)`` reads one file; a packed file is read with its
    ``step`` column and keeps the step's rows only."""
    wanted = None if columns is None else [c for c in columns if c in names]
    parts, packed = [], False
    for path in files:
        if Path(path).parent.name == step_dir(step):
            parts.append(read(path, wanted, False))
            continue
        packed = True
        rows = read(path, None if wanted is None else list(dict.fromkeys([*wanted, "step"])), True)
        rows = rows.filter(pc.equal(rows.column("step"), step))
        parts.append(rows if wanted is None else rows.select(wanted))
    return (parts[0] if len(parts) == 1 else pa.concat_tables(parts)), packed


def read_parquet_file(path: str | Path, columns: Sequence[str] | None = None, filesystem: Any = None, *,
                      present_only: bool = False) -> pa.Table:
    """One Parquet file as an Arrow table (only ``columns``, in their order, when given; with
    ``present_only``, those of them the file has).

    Through ``ParquetFile``, which opens one file several times faster than ``pq.read_table``'s
    dataset machinery; a run directory holds a file per step and table, so reads of it pay that
    cost per file. A large local file of flat lists (a step's token arrays) is decoded by Polars
    instead, in the same types (:mod:`trajlens.store.decode`). ``filesystem`` (a ``pyarrow.fs``
    one) reads from a store that is not local.
    """
    def wanted(schema: pa.Schema) -> list[str] | None:
        if columns is None:
            return None
        return [c for c in columns if c in schema.names] if present_only else list(columns)

    if filesystem is None:
        with pq.ParquetFile(path) as parquet:
            schema = parquet.schema_arrow
            names = wanted(schema)
            if polars_decodes(parquet.metadata, schema, schema.names if names is None else names):
                decoded = read_with_polars(str(path), schema, schema.names if names is None else names)
                if decoded is not None:
                    return decoded
            return parquet.read(columns=names)
    with filesystem.open_input_file(str(path)) as source, pq.ParquetFile(source) as parquet:
        return parquet.read(columns=wanted(parquet.schema_arrow))


class RunDirWriter:
    """Writes a run directory in the canonical layout, step partition by step partition.

    Use as a context manager; on an exception the partial directory is left for the caller
    (the store writes into a temporary directory and renames it only on success). With
    ``pack_bytes``, the rows of a step smaller than that wait, with those of the steps after
    it, until together they reach it (or a larger step comes, or the writer closes), and go
    to one file under ``step=FIRST-LAST/``; memory holds at most ``pack_bytes`` a table.

    A step's file is encoded and written on a background thread while the caller reads the
    next: one write at a time, waited for before the next starts and when the writer closes
    (or leaves on an exception), so a write's error is raised by the call after it at the latest.
    """

    def __init__(self, directory: Path | str, runs: pa.Table, *, pack_bytes: int = 0) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=False)
        self.pack_bytes = pack_bytes
        self._parts: dict[tuple[str, str], int] = {}
        self._packing: dict[str, list[tuple[int, pa.Table]]] = {}
        self._packed_bytes: dict[str, int] = {}
        self._written: set[str] = set()
        self._metrics: list[pa.Table] = []
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trajlens-write")
        self._writing: Future[None] | None = None
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
        if len(steps) > 1:
            table = table.sort_by("step")
            ends = np.flatnonzero(np.diff(table.column("step").to_numpy())) + 1
            bounds = zip(np.concatenate([[0], ends]).tolist(), np.concatenate([ends, [table.num_rows]]).tolist())
            parts = [table.slice(start, stop - start) for start, stop in bounds]
        else:
            parts = [table]
        for part in parts:
            step = part.column("step")[0].as_py()
            if self.pack_bytes and part.nbytes < self.pack_bytes:
                self._packing.setdefault(name, []).append((step, part))
                self._packed_bytes[name] = self._packed_bytes.get(name, 0) + part.nbytes
                if self._packed_bytes[name] >= self.pack_bytes:
                    self._flush(name)
            else:
                self._flush(name)
                self._write_part(name, step_dir(step), part)
        self._written.add(name)

    def _flush(self, name: str) -> None:
        """Write the steps of ``name`` waiting to be packed, as one file."""
        waiting = self._packing.pop(name, [])
        self._packed_bytes.pop(name, None)
        if waiting:
            steps = [step for step, _ in waiting]
            self._write_part(name, step_dir(min(steps), max(steps)), pa.concat_tables([t for _, t in waiting]))

    def copy_step(self, name: str, step: int, source: Path) -> None:
        """Store the Parquet file ``source`` as it is: its rows are one step of ``name``, in the
        table's exact schema, and too many to pack. Its bytes are copied rather than decoded and
        encoded again; the caller has read and checked them."""
        self._flush(name)
        target = self._part_path(name, step_dir(step))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        self._written.add(name)

    def _write_part(self, name: str, directory: str, table: pa.Table) -> None:
        path = self._part_path(name, directory)
        self._wait()
        self._writing = self._writer.submit(self._write, table, path)

    def _wait(self) -> None:
        """Wait for the write in progress; its error, if it failed, is raised here."""
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.result()

    def _part_path(self, name: str, directory: str) -> Path:
        index = self._parts.get((name, directory), 0)
        self._parts[(name, directory)] = index + 1
        return self.directory / name / directory / f"part-{index}.parquet"

    def write_run(self, run: RunData) -> None:
        for name in TABLES[1:]:
            self.write_step(name, run.table(name))

    def close(self) -> None:
        for name in list(self._packing):
            self._flush(name)
        self._stop_writing()
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
        else:  # nothing is written into the directory once the caller has it back
            self._writer.shutdown(wait=True)

    def _stop_writing(self) -> None:
        try:
            self._wait()
        finally:
            self._writer.shutdown(wait=True)

    @staticmethod
    def _write(table: pa.Table, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path, **PARQUET_OPTIONS)


def table_files(run_dir: Path, name: str) -> list[Path]:
    """Parquet files of table ``name`` in a run directory, in step order."""
    return sorted((run_dir / name).rglob("*.parquet"))


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and (path / "runs").is_dir() and (path / "trajectories").is_dir()

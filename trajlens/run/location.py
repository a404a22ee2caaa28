"""Where a store lives, read and written through ``pyarrow.fs``: :class:`StoreLocation`.

A store is named by a path (``store``, ``/mnt/shared/store``) or a URI (``file:///...``,
``s3://bucket/store``); :func:`pyarrow.fs.FileSystem.from_uri` picks the file system, so a
worker on another machine reads a step partition of a store on shared storage with the same
code as a local one. Only the canonical layout is assumed (:mod:`trajlens.store.layout`)::

    STORE/runs/<run_id>/<table>/step=NNNNNN/part-*.parquet
    STORE/runs/<run_id>/<table>/step=NNNNNN-MMMMMM/part-*.parquet   (tiny steps packed together)
    STORE/derived/<table>/<run_id>.parquet

Partitions are listed by :func:`trajlens.run.partitions.list_partitions`, and a step's rows
taken from single and packed files by :func:`trajlens.store.layout.rows_of_step`, as every
reader of a run does. A location is a plain frozen value (the URI), so it travels to workers as it is; the file
system is resolved where it is used.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from trajlens.errors import StoreError
from trajlens.store.database import DERIVED_DIR, RUNS_DIR, derived_part
from trajlens.store.integrity import checksum_name
from trajlens.run.partitions import Partitions, list_partitions
from trajlens.store.layout import read_parquet_file, rows_of_step


@dataclass(frozen=True)
class StoreLocation:
    """A store directory on any file system pyarrow can open."""

    uri: str
    """An absolute local path or a URI (``file://``, ``s3://``, ``gs://``, ``hdfs://``)."""

    @classmethod
    def of(cls, store: str | Path) -> "StoreLocation":
        """A location from what a user typed: a URI is kept, a path made absolute."""
        text = str(store)
        if "://" in text:
            return cls(text.rstrip("/"))
        return cls(str(Path(text).resolve()))

    def resolve(self) -> tuple[pafs.FileSystem, str]:
        """The file system and the store's path on it."""
        try:
            filesystem, path = pafs.FileSystem.from_uri(self.uri)
            return filesystem, str(path)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as error:
            raise StoreError(f"{self.uri}: cannot open this store location ({_first_line(error)})") from None

    @property
    def local_path(self) -> Path | None:
        """The store as a local directory, or None when it is not on this machine's file system."""
        filesystem, root = self.resolve()
        return Path(root) if isinstance(filesystem, pafs.LocalFileSystem) else None

    def run_ids(self) -> list[str]:
        filesystem, root = self.resolve()
        runs = filesystem.get_file_info(f"{root}/{RUNS_DIR}")
        if runs.type != pafs.FileType.Directory:
            raise StoreError(f"{self.uri}: not a trajlens store (no runs/ inside); create one with `trajlens ingest`")
        return sorted(info.base_name for info in _listing(filesystem, f"{root}/{RUNS_DIR}")
                      if info.type == pafs.FileType.Directory and not info.base_name.startswith("."))

    def partitions(self, run_id: str, table: str, steps: Sequence[int] | None = None) -> Partitions:
        """The step partitions of run ``run_id``'s ``table`` (those that may hold ``steps``, when
        given); files outside step directories (a run directory a trainer wrote) count as one
        partition packed over every step."""
        filesystem, root = self.resolve()
        folder = f"{root}/{RUNS_DIR}/{run_id}/{table}"
        found = list_partitions(filesystem, folder, steps)
        if found is not None:
            return found
        infos = filesystem.get_file_info(pafs.FileSelector(folder, recursive=True, allow_not_found=True))
        paths = sorted(info.path for info in infos if info.type == pafs.FileType.File
                       and info.base_name.endswith(".parquet") and not info.base_name.startswith("."))
        return Partitions({}, [(-(2**63), 2**63 - 1, paths)] if paths else [])

    def steps(self, run_id: str, table: str = "trajectories") -> list[int]:
        """Steps that have rows of ``table`` in run ``run_id``, in order (a packed partition's
        steps are read from its ``step`` column)."""
        filesystem, _ = self.resolve()
        partitions = self.partitions(run_id, table)
        steps: set[int] = set(partitions.single)
        for _, _, paths in partitions.packed:
            for path in paths:
                column = _packed_rows(self.uri, path, _stamp(filesystem, path), ("step",)).column("step")
                steps.update(pc.unique(column).to_pylist())
        return sorted(steps)

    def step_groups(self, run_id: str, steps: Sequence[int], table: str = "trajectories") -> list[list[int]]:
        """``steps`` in order, grouped as they lie in ``table``'s files: the steps of one packed
        partition together (at most :data:`trajlens.run.batches.BATCH_STEPS`), any other alone."""
        from trajlens.run.batches import BATCH_STEPS

        return self.partitions(run_id, table, steps).groups(steps, BATCH_STEPS)

    def step_files(self, run_id: str, table: str, step: int) -> list[str]:
        """The Parquet files that may hold rows of one step: its partition's, and those of a
        packed partition around it (empty when there are none)."""
        return self.partitions(run_id, table, [step]).files([step])[0]

    def read_step(self, run_id: str, table: str, step: int, columns: Sequence[str] | None = None) -> pa.Table | None:
        """The rows of one step of ``table`` (the ``columns`` it has), or None when the step
        has none. A packed file is read once for the steps it holds, whichever of them comes
        first (a few are kept, :func:`_packed_rows`), then each step takes its rows."""
        paths = self.step_files(run_id, table, step)
        if not paths:
            return None
        filesystem, _ = self.resolve()

        def read(path: str, wanted: list[str] | None, packed: bool) -> pa.Table:
            if packed:
                return _packed_rows(self.uri, path, _stamp(filesystem, path), None if wanted is None else tuple(wanted))
            return read_parquet_file(path, wanted, filesystem)

        names = pq.read_schema(paths[0], filesystem=filesystem).names if columns is not None else []
        rows, packed = rows_of_step(paths, step, columns, names, read)
        return None if packed and rows.num_rows == 0 else rows

    def read_derived(self, name: str, run_id: str) -> pa.Table | None:
        """A run's part of an analysis table, or None when it has not been written."""
        filesystem, root = self.resolve()
        path = f"{root}/{DERIVED_DIR}/{name}/{run_id}.parquet"
        if filesystem.get_file_info(path).type != pafs.FileType.File:
            return None
        return read_parquet_file(path, filesystem=filesystem)

    def write_derived(self, name: str, run_id: str, tables: Iterable[pa.Table], schema: pa.Schema | None = None) -> str:
        """Write a run's part of an analysis table from ``tables`` (one after the other), and
        return its path.

        For stores this machine cannot lock (object stores, other machines' mounts): the file
        is written under a temporary name and moved into place, so a reader sees the old part
        or the new one. A local store is written through :meth:`trajlens.store.Store.write_derived`
        instead, which also rebuilds the store's database.
        """
        part = derived_part(name, run_id)
        filesystem, root = self.resolve()
        directory = f"{root}/{DERIVED_DIR}/{name}"
        target = f"{root}/{part}"
        partial = f"{directory}/.{run_id}.{uuid.uuid4().hex[:8]}.partial"
        try:
            filesystem.create_dir(directory, recursive=True)
            with filesystem.open_output_stream(partial) as stream:
                write_tables(stream, tables, schema)
            filesystem.move(partial, target)
            # A checksum a local write left beside the old part no longer holds (see store.integrity).
            _delete_quietly(filesystem, f"{directory}/{checksum_name(f'{run_id}.parquet')}")
        except OSError as error:
            _delete_quietly(filesystem, partial)
            raise StoreError(f"{self.uri}: cannot write analysis table {name} ({_first_line(error)})") from None
        return target


def write_tables(sink: Any, tables: Iterable[pa.Table], schema: pa.Schema | None = None) -> None:
    """Write tables one after another into one Parquet file (a path or an open stream); each is
    cast to the first one's schema. With no table, the file holds ``schema`` and no rows."""
    writer = None
    try:
        for table in tables:
            if writer is None:
                writer = pq.ParquetWriter(sink, table.schema, compression="zstd")
            writer.write_table(table.cast(writer.schema) if table.schema != writer.schema else table)
        if writer is None:
            writer = pq.ParquetWriter(sink, schema or pa.schema([]), compression="zstd")
    finally:
        if writer is not None:
            writer.close()


def _stamp(filesystem: pafs.FileSystem, path: str) -> tuple[int, int]:
    """What tells two versions of a file apart: its size and modification time."""
    info = filesystem.get_file_info(path)
    return info.size or 0, info.mtime_ns or 0


@functools.lru_cache(maxsize=8)
def _packed_rows(uri: str, path: str, stamp: tuple[int, int], columns: tuple[str, ...] | None) -> pa.Table:
    """The rows of a packed file (``columns`` of them), kept for the next steps it holds: a task
    per step reads each packed file once a process, not once a step. ``stamp`` keys the file's
    version, so a run ingested again is read again. Packed files are under
    :data:`~trajlens.store.layout.PACK_BYTES` or about, so the cache holds a few MiB."""
    filesystem, _ = StoreLocation(uri).resolve()
    return read_parquet_file(path, columns, filesystem)


def _listing(filesystem: pafs.FileSystem, directory: str) -> list[pafs.FileInfo]:
    listing: list[pafs.FileInfo] = filesystem.get_file_info(pafs.FileSelector(directory, allow_not_found=True))
    return listing


def _delete_quietly(filesystem: pafs.FileSystem, path: str) -> None:
    try:
        filesystem.delete_file(path)
    except OSError:
        pass


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


__all__ = ["StoreLocation", "write_tables"]

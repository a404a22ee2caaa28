"""Where a stored run's rows lie, and reading them: the step partitions of a run table.

The store keeps one directory per step for ``trajectories``, ``tool_calls`` and ``tokens``,
and one per range of tiny steps packed together (:mod:`trajlens.store.layout`)::

    STORE/runs/<run_id>/<table>/step=NNNNNN/part-*.parquet
    STORE/runs/<run_id>/<table>/step=NNNNNN-MMMMMM/part-*.parquet   (tiny steps packed together)

:func:`list_partitions` lists a table's partitions once (on this machine's file system with
one cached directory scan, elsewhere through ``pyarrow.fs``) as :class:`Partitions`; the
readers here take the rows of some steps from them. Every reader of a stored run (the
batches of :mod:`trajlens.run.batches`, a step of :class:`trajlens.run.location.StoreLocation`)
lists partitions here.
"""

from __future__ import annotations

import bisect
import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import polars as pl
import pyarrow as pa

ARROW_READS_UP_TO = 16
"""Files of a batch up to which they are read one by one (rather than in one Polars scan)."""
EMPTY_FILE = "empty.parquet"
"""The file a run directory holds for a table without rows (:class:`trajlens.store.layout.RunDirWriter`)."""


class Partitions(NamedTuple):
    """Where a run table's rows lie: ``step=N`` directories by step, and packed ``step=A-B``
    ones (:mod:`trajlens.store.layout`), each with its Parquet files."""

    single: dict[int, list[str]]
    packed: list[tuple[int, int, list[str]]]
    """(first, last, files) of each packed directory, by first step."""

    def files(self, steps: Sequence[int]) -> tuple[list[str], bool]:
        """The files holding rows of ``steps`` (each once, in step order), and whether any of
        them is packed (so holds rows of other steps too)."""
        wanted = sorted(set(steps))
        found = [(step, path) for step in wanted for path in self.single.get(step, ())]
        packed = False
        for first, last, paths in self.packed:
            at = bisect.bisect_left(wanted, first)
            if at < len(wanted) and wanted[at] <= last:
                found += [(first, path) for path in paths]
                packed = True
        if packed:
            found.sort(key=lambda item: item[0])
        return [path for _, path in found], packed

    def groups(self, steps: Sequence[int], most: int) -> list[list[int]]:
        """``steps`` in order, in groups that share a file: the steps of one packed partition
        together (``most`` at a time), every other step alone."""
        ranges = [(first, last) for first, last, _ in self.packed]
        groups: list[list[int]] = []
        current: tuple[int, int] | None = None
        for step in steps:
            at = bisect.bisect_right(ranges, (step, 2**63)) - 1
            packed = ranges[at] if at >= 0 and ranges[at][0] <= step <= ranges[at][1] and step not in self.single else None
            if packed is not None and packed == current and len(groups[-1]) < most:
                groups[-1].append(step)
            else:
                groups.append([step])
            current = packed
        return groups

    def steps(self) -> list[int]:
        """Every step a partition may hold (a packed partition's whole range), in order."""
        found = set(self.single)
        for first, last, _ in self.packed:
            found.update(range(first, last + 1))
        return sorted(found)

    def all_files(self) -> list[str]:
        """Every file, in step order (by each directory's first step)."""
        entries = [(step, paths) for step, paths in self.single.items()]
        entries += [(first, paths) for first, _, paths in self.packed]
        entries.sort(key=lambda item: item[0])
        return [path for _, paths in entries for path in paths]


def _parquet_names(directory: str) -> list[str]:
    with os.scandir(directory) as files:
        return sorted(f.name for f in files if f.name.endswith(".parquet") and not f.name.startswith("."))


@functools.lru_cache(maxsize=64)
def _step_directories(root: str, stamp: tuple[int, int]) -> tuple[tuple[int, int, str], ...] | None:
    """(first, last, name) of the step directories under a table's folder, sorted; None when
    Parquet files lie outside them (not the step layout). ``stamp`` (inode, mtime) keys the cache."""
    from trajlens.store.layout import step_range

    found = []
    with os.scandir(root) as entries:
        for entry in entries:
            if entry.is_file() and entry.name.endswith(".parquet") and entry.name != EMPTY_FILE:
                return None  # rows outside the step directories: not this layout
            bounds = step_range(entry.name) if entry.is_dir() else None
            if bounds is not None:
                found.append((*bounds, entry.name))
    return tuple(sorted(found))


def table_partitions(root: Path | str, steps: Sequence[int] | None = None) -> Partitions | None:
    """The step partitions under a table's folder (only those that may hold ``steps``, when
    given), with their files; None when the folder is missing or Parquet files lie outside
    step directories (not the step layout)."""
    root = str(root)
    try:
        status = os.stat(root)
    except OSError:
        return None
    directories = _step_directories(root, (status.st_ino, status.st_mtime_ns))
    if directories is None:
        return None
    wanted = sorted(set(steps)) if steps is not None else None
    single: dict[int, list[str]] = {}
    packed: list[tuple[int, int, list[str]]] = []
    for first, last, name in directories:
        if wanted is not None:
            at = bisect.bisect_left(wanted, first)
            if at == len(wanted) or wanted[at] > last:
                continue
        directory = os.path.join(root, name)
        names = _parquet_names(directory)
        if not names:
            continue
        paths = [os.path.join(directory, n) for n in names]
        if first == last:
            single.setdefault(first, []).extend(paths)
        else:
            packed.append((first, last, paths))
    return Partitions(single, packed)


def list_partitions(filesystem: Any, root: str, steps: Sequence[int] | None = None) -> Partitions | None:
    """:func:`table_partitions` of a table folder on any ``pyarrow.fs`` file system (a local one
    is scanned with :func:`table_partitions` itself, cached)."""
    import pyarrow.fs as pafs

    from trajlens.store.layout import step_range

    if isinstance(filesystem, pafs.LocalFileSystem):
        return table_partitions(root, steps)
    entries = filesystem.get_file_info(pafs.FileSelector(root, allow_not_found=True))
    if any(e.type == pafs.FileType.File and e.base_name.endswith(".parquet") and e.base_name != EMPTY_FILE
           for e in entries):
        return None
    wanted = sorted(set(steps)) if steps is not None else None
    single: dict[int, list[str]] = {}
    packed: list[tuple[int, int, list[str]]] = []
    for entry in sorted(entries, key=lambda e: e.base_name):
        bounds = step_range(entry.base_name) if entry.type == pafs.FileType.Directory else None
        if bounds is None:
            continue
        first, last = bounds
        if wanted is not None:
            at = bisect.bisect_left(wanted, first)
            if at == len(wanted) or wanted[at] > last:
                continue
        paths = sorted(info.path for info in filesystem.get_file_info(pafs.FileSelector(entry.path))
                       if info.type == pafs.FileType.File and info.base_name.endswith(".parquet")
                       and not info.base_name.startswith("."))
        if not paths:
            continue
        if first == last:
            single.setdefault(first, []).extend(paths)
        else:
            packed.append((first, last, paths))
    packed.sort()
    return Partitions(single, packed)


def partition_files(store: Any, run_id: str, table: str, steps: Sequence[int] | None = None) -> Partitions | None:
    """:func:`table_partitions` of a stored run's ``table``."""
    return table_partitions(os.path.join(str(store.path), "runs", run_id, table), steps)


def _schema(table: str) -> pl.Schema:
    from trajlens.schema import SCHEMAS

    return pl.Schema(pl.from_arrow(SCHEMAS[table].empty_table()).schema)


def read_files(partitions: Partitions, table: str, steps: Sequence[int], columns: Sequence[str] | None = None, *,
               conformed: bool = True) -> pl.DataFrame:
    """The rows of ``steps`` in ``partitions`` of ``table`` (only ``columns`` of the schema, when
    given), in step order, read in one scan. Files not ``conformed`` to the store's schema (a run
    directory a trainer wrote) are read with the columns and types they hold."""
    schema = _schema(table)
    wanted = list(schema) if columns is None else [c for c in columns if c in schema]
    paths, packed = partitions.files(steps)
    if not paths:
        return pl.DataFrame(schema=schema).select(wanted)
    if conformed:
        scan = pl.scan_parquet(paths, glob=False, hive_partitioning=False, schema=schema, missing_columns="insert")
    else:
        scan = pl.scan_parquet(paths, glob=False, hive_partitioning=False)
        wanted = [c for c in wanted if c in scan.collect_schema()] if columns is not None else list(scan.collect_schema())
    if packed:
        scan = scan.filter(pl.col("step").is_in(list(steps))).sort("step", maintain_order=True)
    return scan.select(wanted).collect()


def scan_run_table(store: Any, run_id: str, table: str) -> pl.LazyFrame:
    """A lazy scan of one run's ``table`` over that run's files only (listed with one directory
    walk), for a whole-run read that needs neither the other runs' files nor a query engine."""
    scanned = scan_run_dir_table(os.path.join(str(store.path), "runs", run_id), table)
    return scanned if scanned is not None else getattr(store, table).filter(pl.col("run_id") == run_id)


def scan_run_dir_table(run_dir: Path | str, table: str) -> pl.LazyFrame | None:
    """A lazy scan of ``table`` in a stored run's folder; None when the table is not in the step
    layout there."""
    partitions = table_partitions(os.path.join(str(run_dir), table))
    if partitions is None:
        return None
    paths = partitions.all_files()
    if not paths:
        return pl.LazyFrame(schema=_schema(table))
    return pl.scan_parquet(paths, glob=False, hive_partitioning=False, schema=_schema(table),
                           missing_columns="insert")


def read_partitions(store: Any, run_id: str, table: str, steps: Sequence[int], columns: Sequence[str] | None,
                    files: Partitions | None | bool = True) -> pl.DataFrame:
    """The rows of ``steps`` of a stored ``table`` (only ``columns`` of the schema, when given),
    read from those steps' partitions in one scan (``files``: the run's :func:`partition_files`,
    when the caller has it; else only the partitions that may hold the steps are listed)."""
    partitions = partition_files(store, run_id, table, steps) if files is True else files
    if isinstance(partitions, Partitions):
        return read_files(partitions, table, steps, columns)
    schema = _schema(table)
    wanted = list(schema) if columns is None else [c for c in columns if c in schema]
    return (getattr(store, table).filter((pl.col("run_id") == run_id) & pl.col("step").is_in(list(steps)))
            .select(wanted).collect())


def read_arrow_partitions(store: Any, run_id: str, table: str, steps: Sequence[int], columns: Sequence[str],
                          files: Partitions | None | bool = True) -> pa.Table:
    """:func:`read_partitions` as an Arrow table. A few files of whole steps (large steps) are
    read one by one (:func:`trajlens.store.layout.read_parquet_file`: in the files' own types);
    many (tiny steps) or packed ones in one Polars scan, which keeps only the steps asked."""
    partitions = partition_files(store, run_id, table, steps) if files is True else files
    if not isinstance(partitions, Partitions):
        return read_partitions(store, run_id, table, steps, columns, partitions).rechunk().to_arrow()
    return read_arrow_files(partitions, table, steps, columns)


def read_arrow_files(partitions: Partitions, table: str, steps: Sequence[int], columns: Sequence[str] | None = None,
                     *, conformed: bool = True) -> pa.Table:
    """:func:`read_files` as an Arrow table: a few files of whole steps are read one by one
    (``columns`` of them, every column without) by :func:`trajlens.store.layout.read_parquet_file`,
    the others as :func:`read_files` reads them."""
    from trajlens.store.layout import read_parquet_file

    paths, packed = partitions.files(steps)
    if packed or len(paths) > ARROW_READS_UP_TO or not paths:
        return read_files(partitions, table, steps, columns, conformed=conformed).rechunk().to_arrow()
    parts = [read_parquet_file(path, columns, present_only=True) for path in paths]
    return pa.concat_tables(parts, promote_options="default") if len(parts) > 1 else parts[0]



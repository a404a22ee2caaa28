"""A stored run read a batch of steps at a time, from its step partitions.

The store keeps one directory per step for ``trajectories``, ``tool_calls`` and ``tokens``,
and one per range of tiny steps packed together (:mod:`trajlens.store.layout`). Reading them step by step costs a file open, a schema and a
frame per step: nothing on a run of 200 large steps, most of the time on a run of 100,000 tiny
ones. Here a run's partitions are listed once, and consecutive steps are read together in
batches of at most :data:`BATCH_TOKENS` tokens (estimated from the trajectories' token counts)
and :data:`BATCH_STEPS` steps, so memory stays that of a batch whatever the number of steps,
and the fixed cost of a read is shared by the steps of a batch.
"""

from __future__ import annotations

import bisect
import functools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import polars as pl
import pyarrow as pa

from trajlens.errors import ConfigError

BATCH_TOKENS = 1_000_000
"""Tokens (model and observation, as the trajectories count them) read together at most; a
single step larger than that is read alone (its arrays then come as one chunk each, used in
place without a copy)."""
BATCH_STEPS = 2_048
"""Steps read together at most (bounds the batch when the trajectories carry no token counts)."""
ARROW_READS_UP_TO = 16
"""Files of a batch up to which Arrow reads them one by one (rather than one Polars scan)."""
LIST_ALL_ABOVE = 64
"""Steps above which the run's partitions are listed once rather than step by step."""
EMPTY_FILE = "empty.parquet"
"""The file a run directory holds for a table without rows (:class:`trajlens.store.layout.RunDirWriter`)."""


class StepBatch(NamedTuple):
    """Consecutive steps of a run, read together."""

    steps: list[int]
    trajectories: pl.DataFrame
    """The steps' training trajectories, in step order (file order within a step)."""
    tokens: pa.Table | None
    """Every token row of those steps (all splits), or None when no token column was asked."""


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
    partitions = partition_files(store, run_id, table)
    if partitions is None:
        return getattr(store, table).filter(pl.col("run_id") == run_id)
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
    read by Arrow itself, which decodes list columns faster; many (tiny steps) or packed ones
    in one Polars scan, which opens a file faster and keeps only the steps asked."""
    import pyarrow.parquet as pq

    partitions = partition_files(store, run_id, table, steps) if files is True else files
    paths, packed = partitions.files(steps) if isinstance(partitions, Partitions) else (None, False)
    if paths is None or packed or len(paths) > ARROW_READS_UP_TO or not paths:
        return read_partitions(store, run_id, table, steps, columns, partitions).rechunk().to_arrow()
    parts = []
    for path in paths:
        parquet = pq.ParquetFile(path)
        names = parquet.schema_arrow.names
        parts.append(parquet.read(columns=[c for c in columns if c in names]))
    return pa.concat_tables(parts, promote_options="default") if len(parts) > 1 else parts[0]


def train_trajectories(store: Any, run_id: str, steps: Sequence[int] | None = None) -> pl.DataFrame:
    """The training trajectories of ``run_id`` (of ``steps``, when given), in step order.

    Raises :class:`ConfigError` when there are none: nothing to recompute.
    """
    store.require_runs([run_id])
    if steps is not None:
        frame = read_partitions(store, run_id, "trajectories", steps, None)
    else:
        frame = scan_run_table(store, run_id, "trajectories").collect()
    frame = frame.filter((pl.col("run_id") == run_id) & (pl.col("split") == "train")).sort("step", maintain_order=True)
    if frame.is_empty():
        raise ConfigError([f"run {run_id!r} has no trajectories of split 'train' to recompute"])
    return frame


def step_bounds(steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, stops) of the runs of equal values in ``steps`` (a sorted column)."""
    if steps.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    change = np.flatnonzero(steps[1:] != steps[:-1]) + 1
    return np.concatenate([[0], change]), np.concatenate([change, [steps.size]])


def plan_batches(trajectories: pl.DataFrame, *, max_tokens: int = BATCH_TOKENS,
                 max_steps: int = BATCH_STEPS) -> list[tuple[int, int]]:
    """Row ranges ``[start, stop)`` of ``trajectories`` (in step order) that make the batches:
    whole steps, at most ``max_steps`` of them and ``max_tokens`` tokens unless one step is larger."""
    counts = [c for c in ("model_tokens", "observation_tokens") if c in trajectories.columns]
    sizes = (trajectories.select(pl.sum_horizontal([pl.col(c).fill_null(0) for c in counts]) + 1).to_series()
             .to_numpy() if counts else np.ones(trajectories.height, dtype=np.int64))
    starts, stops = step_bounds(trajectories["step"].to_numpy())
    per_step = np.add.reduceat(sizes, starts) if starts.size else sizes[:0]
    batches: list[tuple[int, int]] = []
    first, tokens, steps = 0, 0, 0
    for index in range(starts.size):
        if steps and (tokens + per_step[index] > max_tokens or steps == max_steps):
            batches.append((int(starts[first]), int(starts[index])))
            first, tokens, steps = index, 0, 0
        tokens += int(per_step[index])
        steps += 1
    if starts.size:
        batches.append((int(starts[first]), int(stops[-1])))
    return batches


def step_batches(store: Any, run_id: str, trajectories: pl.DataFrame, token_columns: Sequence[str] | None, *,
                 max_tokens: int = BATCH_TOKENS, max_steps: int = BATCH_STEPS) -> Iterator[StepBatch]:
    """``trajectories`` (training rows in step order) cut into batches, each with its steps'
    token rows (``token_columns``, with ``run_id``; None reads no tokens). The next batch is read
    on a background thread while the caller works on this one (two batches in memory at most)."""
    from concurrent.futures import ThreadPoolExecutor

    plan = plan_batches(trajectories, max_tokens=max_tokens, max_steps=max_steps)
    # a few steps: list only theirs; many: list the run's partitions once
    files: Partitions | None | bool = True
    if token_columns is not None and trajectories["step"].n_unique() > LIST_ALL_ABOVE:
        files = partition_files(store, run_id, "tokens")

    def read(bounds: tuple[int, int]) -> StepBatch:
        part = trajectories.slice(bounds[0], bounds[1] - bounds[0])
        steps = part["step"].unique(maintain_order=True).to_list()
        tokens = None
        if token_columns is not None:
            columns = ["run_id", *(c for c in token_columns if c != "run_id")]
            tokens = read_arrow_partitions(store, run_id, "tokens", steps, columns, files)
        return StepBatch(steps, part, tokens)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="trajlens-read") as reader:
        pending = reader.submit(read, plan[0]) if plan else None
        for following in plan[1:] + [None]:
            assert pending is not None
            current = pending.result()
            pending = reader.submit(read, following) if following is not None else None
            yield current

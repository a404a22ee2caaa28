"""Runs already in the canonical Parquet layout (see :mod:`trajlens.store.layout`).

``scan_run`` reads a run directory lazily as Polars LazyFrames. ``copy_run`` streams it into
a store one file at a time, checking each file against the schema and the whole run for
duplicate ids, so a run larger than memory ingests in bounded memory.
"""

from __future__ import annotations

from contextlib import ExitStack, closing
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from trajlens.errors import InputError, Problem
from trajlens.ingest import config_history
from trajlens.ingest._unreadable import parquet_errors, reason
from trajlens.rows import RowProblem, check_values, without_bad_rows
from trajlens.schema import SCHEMAS, TABLES, conform
from trajlens.store.ahead import read_ahead
from trajlens.store.layout import (
    RUN_ID_PATTERN, RUN_ID_RULE, STEP_PARTITIONED, is_run_dir, read_parquet_file, step_range, table_files,
)
from trajlens.store.writer import StoreWriter

FORMAT = "parquet"


def detect(path: Path) -> bool:
    return is_run_dir(path)


def scan_run(run_dir: Path | str) -> dict[str, pl.LazyFrame]:
    """The five tables of a run directory as LazyFrames (nothing is read until collected)."""
    run_dir = Path(run_dir)
    if not is_run_dir(run_dir):
        raise InputError(str(run_dir), expected="a run directory with runs/ and trajectories/", found="neither")
    return {name: scan_table(run_dir, name) for name in TABLES}


def scan_table(run_dir: Path, name: str) -> pl.LazyFrame:
    """Table ``name`` of a run directory, over its files listed once (:func:`table_files`); no
    rows (in the table's columns) where it has no file, as ingest reads a run without
    ``step_metrics/``."""
    files = table_files(run_dir, name)
    if not files:
        return pl.from_arrow(SCHEMAS[name].empty_table()).lazy()
    return pl.scan_parquet([str(path) for path in files], hive_partitioning=False)


def read_table_file(path: Path, name: str, run_id: str | None = None) -> pa.Table:
    """Read and conform one Parquet file of table ``name``, checked as ingest checks it (readable,
    valid UTF-8, the table's schema, finite values, steps of 0 or more and its folder's, and with
    ``run_id`` every row's run id); a clear error if it cannot. ``trajlens check`` reads a run
    directory through it too, so the two refuse the same files with the same line."""
    table = _read_checked(path, name)[0]
    if run_id is not None:
        _check_run_id(table, run_id, path)
    return table


def _read_file(path: Path) -> pa.Table | Exception:
    """The Parquet file at ``path`` as a table, or the error that says it is not a readable one
    (kept, not raised: :func:`copy_run` reads each file ahead, and the error is the file's to
    raise when its turn comes)."""
    try:
        return read_parquet_file(path)
    except parquet_errors() as error:
        return error


def _read_checked(path: Path, name: str, skipped: list[Problem] | None = None,
                  read: pa.Table | Exception | None = None) -> tuple[pa.Table, bool]:
    """:func:`read_table_file`, and whether the file held the table in its exact schema (so its
    bytes are the stored table's as they stand, and :func:`conform` changed nothing). ``read``:
    the file's :func:`_read_file`, when it was read ahead.

    With ``skipped`` (lenient), rows that fail the per-row value checks are left out and noted in
    it, one problem each, rather than refusing the file; the table is then not exact."""
    table = _read_file(path) if read is None else read
    if isinstance(table, Exception):
        raise InputError(str(path), "not a readable Parquet file", expected="Parquet", found=reason(table))
    check_text(table, path)
    exact = table.schema.equals(SCHEMAS[name])  # a list's item is "element" once in Parquet: the same type
    table = conform(table, name, str(path))
    if skipped is None:
        for _, error in step_problems(table, path):
            raise error
        check_values(name, table, str(path))
        return table, exact
    checked = without_bad_rows(name, table, str(path), step_problems(table, path))
    skipped.extend(checked.problems)
    return checked.table, exact and not checked.problems


def _verbatim_step(table: pa.Table, name: str, exact: bool, pack_bytes: int) -> int | None:
    """The step of a file whose bytes can be stored as they are
    (:meth:`~trajlens.store.layout.RunDirWriter.copy_step`): a step-partitioned table in its exact
    schema, one step, at least ``pack_bytes`` of rows (a smaller step is packed with its
    neighbours). None: decode and write it."""
    if not exact or name not in STEP_PARTITIONED or table.num_rows == 0 or table.nbytes < pack_bytes:
        return None
    steps = pc.unique(table.column("step"))
    return int(steps[0].as_py()) if len(steps) == 1 else None


def step_problems(table: pa.Table, path: Path) -> Iterator[RowProblem]:
    """Every row whose training step cannot be stored, in row order: a negative step (the step
    partitions, stage ranges and checks all count from 0, so such a row would be stored but fall
    outside every view of the run), or a step that is not its folder's (``step=N``, or a packed
    ``step=A-B``: the partitions are how every reader finds a step's rows, so such a row would
    sit at one step in the store and at another in its trajectory's calls and tokens)."""
    if "step" not in table.column_names or table.num_rows == 0:
        return
    steps = table.column("step")
    span = step_range(path.parent.name)
    outside = pc.less(steps, 0)
    if span is not None:
        outside = pc.or_(outside, pc.or_(pc.less(steps, span[0]), pc.greater(steps, span[1])))
    if not pc.any(outside).as_py():
        return
    ids = table.column("trajectory_id") if "trajectory_id" in table.column_names else None
    for row in np.flatnonzero(outside.to_numpy(zero_copy_only=False)).tolist():
        step = steps[row].as_py()
        if step < 0:
            yield RowProblem(row, InputError(str(path), record=row, field="step", expected="a step of 0 or more",
                                             found=str(step)))
            continue
        assert span is not None  # only a folder's span puts a step of 0 or more outside
        expected = f"{span[0]} (the step of its folder {path.parent.name})" if span[0] == span[1] else \
            f"a step from {span[0]} to {span[1]} (the steps of its folder {path.parent.name})"
        record = ids[row].as_py() if ids is not None else row
        yield RowProblem(row, InputError(str(path), record=record, field="step", expected=expected, found=str(step)))


def check_text(table: pa.Table, path: Path) -> None:
    """Refuse column names and string columns holding invalid UTF-8: Parquet readers do not
    check, and such text would break every later query on the column."""
    try:
        table.schema.names  # decodes every name: a footer's name that is not UTF-8 raises here
    except UnicodeDecodeError as error:
        raise InputError(str(path), "a column name that is not UTF-8", expected="UTF-8 text",
                         found=reason(error)) from None
    try:
        table.validate(full=True)
        return
    except pa.ArrowInvalid:
        pass
    for name in table.column_names:
        column = table.column(name)
        try:
            column.validate(full=True)
            continue
        except pa.ArrowInvalid as error:
            why = reason(error)
        row = _first_invalid_row(column)
        found = "an invalid UTF-8 sequence" if row is not None else why
        raise InputError(str(path), record=row, field=name, expected="UTF-8 text", found=found)
    raise InputError(str(path), expected="a valid Parquet table", found="invalid data")


def _first_invalid_row(column: pa.ChunkedArray) -> int | None:
    if not pa.types.is_string(column.type) and not pa.types.is_large_string(column.type):
        return None
    offset = 0
    for chunk in column.chunks:
        for index, value in enumerate(chunk.cast(pa.binary()).to_pylist()):
            if value is not None:
                try:
                    value.decode("utf-8")
                except UnicodeDecodeError:
                    return offset + index
        offset += len(chunk)
    return None


def run_id_of(run_dir: Path, *, checked: bool = True) -> str:
    """The run id recorded in a run directory's ``runs`` table; ``checked``, one a store can hold
    (:data:`~trajlens.store.layout.RUN_ID_RULE`), else an error naming the ``runs`` file. Not
    ``checked`` where the run is stored under an id given instead (``ingest --run``)."""
    path = _single(run_dir, "runs")
    runs = read_table_file(path, "runs")
    if runs.num_rows != 1:
        raise InputError(str(run_dir / "runs"), expected="exactly one run row", found=f"{runs.num_rows} rows")
    run_id = runs.column("run_id")[0].as_py()
    if checked and not RUN_ID_PATTERN.fullmatch(run_id):
        raise InputError(str(path), record=0, field="run_id", expected=RUN_ID_RULE, found=repr(run_id))
    return run_id


def copy_run(
    run_dir: Path,
    writer: StoreWriter,
    *,
    run_id: str | None = None,
    extra_metrics: Sequence[pa.Table] = (),
    strict: bool = True,
    problems: list[Problem] | None = None,
    on_file: Callable[[Path], None] | None = None,
) -> str:
    """Stream a canonical run directory into ``writer``; returns the run id.

    ``run_id`` stores the run under another id; ``extra_metrics`` (step_metrics tables, already
    carrying the stored id) join the run's own training scalars.

    Lenient (``strict=False``), a file that cannot be read or does not fit the schema is
    skipped and reported in ``problems``; a row that fails a value check (a token array not as
    long as its response mask, a value that is not finite) is left out alone, with the calls and
    tokens of a trajectory left out, and each is reported; whole-run checks (duplicate ids)
    still raise.

    Strict and with no ``extra_metrics``, a run the store holds as the same ingest wrote it from
    this directory, unchanged since, is kept without reading the directory again
    (:meth:`~trajlens.store.writer.StoreWriter.keep_unchanged`).
    """
    recorded = run_id_of(run_dir, checked=run_id is None)
    stored = run_id or recorded
    if strict and not extra_metrics and writer.keep_unchanged(stored, str(run_dir)):
        return stored
    runs = read_table_file(_single(run_dir, "runs"), "runs")
    # Lenient: the trajectory ids read in each step partition whose trajectories lost a file or
    # a row, so that the calls and tokens of the trajectories skipped are left out with them; and
    # why they were skipped.
    partial: dict[str, set[str]] = {}
    skipped_why: dict[str, str] = {}
    span_ends = SpanEnds()  # each trajectory's furthest call span, from the tool_calls files
    with writer.stage(stored, _with_run_id(runs, stored), str(run_dir), self_contained=not extra_metrics) as stage, \
            ExitStack() as reading:
        for name in TABLES[1:]:
            read: dict[str, list[pa.Table]] = {}
            files = table_files(run_dir, name)
            # each file read while the one before is checked and written (two in memory at most)
            contents = reading.enter_context(closing(read_ahead(_read_file, files)))
            for path, content in zip(files, contents, strict=True):
                partition = str(path.parent.relative_to(run_dir / name))
                bad_rows: list[Problem] | None = None if strict else []
                try:
                    table, exact = _read_checked(path, name, bad_rows, content)
                    _check_run_id(table, recorded, path)
                except InputError as error:
                    if strict:
                        raise
                    if problems is not None:
                        problems.append(error.as_problem())
                    if name == "trajectories":
                        partial.setdefault(partition, set())
                        skipped_why[partition] = "were in a file that was skipped"
                    continue
                if bad_rows and problems is not None:
                    problems.extend(bad_rows)
                if name == "trajectories":
                    read.setdefault(partition, []).append(table.select(["trajectory_id"]))
                    if bad_rows:
                        partial.setdefault(partition, set())
                        skipped_why.setdefault(partition, "were skipped as bad records")
                elif partition in partial and "trajectory_id" in table.column_names:
                    table, exact = _of_trajectories(table, partial[partition], path, problems,
                                                    skipped_why[partition]), False
                if name == "tool_calls":
                    span_ends.add(table, path)
                elif name == "tokens" and span_ends:
                    table, beyond = within_spans(table, span_ends.frame(), path, problems if not strict else None)
                    exact = exact and not beyond
                step = _verbatim_step(table, name, exact and stored == recorded, stage.pack_bytes)
                if step is not None:  # a run in the store's own layout: its bytes, not decoded and written again
                    stage.copy_step(name, step, path)
                else:
                    stage.write_step(name, _with_run_id(table, stored))
                if on_file is not None:
                    on_file(path)
            if name == "trajectories":
                for partition in partial:
                    partial[partition] = {i for t in read.get(partition, []) for i in t.column(0).to_pylist()}
        for table in extra_metrics:
            stage.write_step("step_metrics", table)
        config_history.copy_history(run_dir, stage.directory)
    return stored


SPAN_CALLS = 65_536
"""Calls of tool_calls files held before their furthest spans are found together: one pass per
this many calls rather than one per file (a run directory holds a file per step)."""


class SpanEnds:
    """Each trajectory's call that ends furthest (``trajectory_id``, ``call_index``, ``token_end``)
    and the file that holds it, among the tool_calls files added; the calls of a few files are
    held (up to :data:`SPAN_CALLS`) and reduced together, so memory holds about a row per trajectory."""

    def __init__(self) -> None:
        self._held: list[pa.Table] = []
        self._files: list[str] = []
        self._calls = 0
        self._ends: list[pl.DataFrame] = []

    def __bool__(self) -> bool:
        return bool(self._held or self._ends)

    def add(self, calls: pa.Table, path: Path) -> None:
        self._held.append(calls.select(["trajectory_id", "call_index", "token_end"]))
        self._files.append(str(path))
        self._calls += calls.num_rows
        if self._calls >= SPAN_CALLS:
            self._reduce()

    def frame(self) -> pl.DataFrame:
        self._reduce()
        if len(self._ends) > 1:
            self._ends[:] = [pl.concat(self._ends)]
        return self._ends[0]

    def _reduce(self) -> None:
        if not self._held:
            return
        counts = [table.num_rows for table in self._held]
        frame = pl.from_arrow(pa.concat_tables(self._held, promote_options="permissive"))
        assert isinstance(frame, pl.DataFrame)
        file = pl.Series("file", self._files, dtype=pl.String).gather(np.repeat(np.arange(len(counts)), counts))
        furthest = pl.col("token_end").arg_max()
        self._ends.append(frame.with_columns(file).drop_nulls("token_end").group_by("trajectory_id", "file")
                          .agg(pl.col("call_index").get(furthest), pl.col("token_end").max())
                          .select("trajectory_id", "call_index", "token_end", "file"))
        self._held, self._files, self._calls = [], [], 0


def within_spans(tokens: pa.Table, ends: pl.DataFrame, path: Path, problems: list[Problem] | None
                 ) -> tuple[pa.Table, bool]:
    """``tokens``, checked against the calls' spans: a call whose ``token_end`` lies past its
    trajectory's token arrays (when they hold any) is an InputError naming the call's file; lenient (``problems``
    given), that trajectory's tokens are left out and said so. Also whether any was."""
    lengths = pl.from_arrow(pa.table({"trajectory_id": tokens.column("trajectory_id"),
                                      "length": pc.list_value_length(tokens.column("response_mask"))}))
    assert isinstance(lengths, pl.DataFrame)
    # an empty array recorded no tokens (a degenerate run the report names): only held tokens bound a span
    beyond = lengths.with_row_index("__row").join(ends, on="trajectory_id").filter(
        (pl.col("length") > 0) & (pl.col("token_end") > pl.col("length")))
    if beyond.is_empty():
        return tokens, False
    errors = [InputError(file, record=f"{trajectory} call {call}", field="token_end",
                         expected=f"at most {length} (the length of its token arrays in {path})", found=str(end))
              for trajectory, call, length, end, file in beyond.sort("__row").select(
                  "trajectory_id", "call_index", "length", "token_end", "file").iter_rows()]
    if problems is None:
        raise errors[0]
    for error in errors:
        problem = error.as_problem()
        problems.append(Problem(problem.file, problem.record, problem.field,
                                f"{problem.message}; the trajectory's tokens are left out"))
    keep = np.ones(tokens.num_rows, dtype=bool)
    keep[beyond["__row"].to_numpy()] = False
    return tokens.filter(pa.array(keep)), True


def _of_trajectories(table: pa.Table, kept: set[str], path: Path, problems: list[Problem] | None,
                     why: str) -> pa.Table:
    """The rows of ``table`` whose trajectory was read; the others are left out, and said so
    (their trajectories ``why``: ``were in a file that was skipped``)."""
    keep = pc.is_in(table.column("trajectory_id"), value_set=pa.array(sorted(kept), pa.string()))
    left = table.num_rows - pc.sum(keep).as_py() if table.num_rows else 0
    if left and problems is not None:
        problems.append(Problem(str(path), None, "trajectory_id",
                                f"{path}: {left} rows left out: their trajectories {why}"))
    return table.filter(keep)


def _with_run_id(table: pa.Table, run_id: str) -> pa.Table:
    index = table.schema.get_field_index("run_id")
    column = pa.array([run_id] * table.num_rows, pa.string())
    return table.set_column(index, table.schema.field(index), column)


def _single(run_dir: Path, name: str) -> Path:
    files = table_files(run_dir, name)
    if len(files) != 1:
        raise InputError(str(run_dir / name), expected="one Parquet file", found=f"{len(files)} files")
    return files[0]


def _check_run_id(table: pa.Table, run_id: str, path: Path) -> None:
    if table.num_rows == 0:
        return
    other = pc.not_equal(table.column("run_id"), run_id)
    if pc.any(other).as_py():
        row = int(pc.index(other, True).as_py())
        raise InputError(str(path), record=row, field="run_id", expected=repr(run_id),
                         found=repr(table.column("run_id")[row].as_py()))


__all__ = ["FORMAT", "SpanEnds", "copy_run", "detect", "read_table_file", "run_id_of", "scan_run", "scan_table",
           "within_spans"]

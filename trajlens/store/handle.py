"""Reading a store: read-only SQL through DuckDB, tables as Polars LazyFrames.

A query reads the store's tables and nothing else. It runs on an in-memory DuckDB connection
where each table is a PyArrow dataset of the store's own Parquet files, file system access is
switched off (``enable_external_access = false``, then ``lock_configuration = true``) and only
``SELECT`` (and ``EXPLAIN``) statements are accepted: ``COPY``, ``EXPORT``, ``ATTACH``,
``INSTALL``, ``SET``, ``CREATE`` and the file-reading functions (``read_text``, ``glob``,
``read_csv``, ...) are refused with a one-line error.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar, cast

import duckdb
import polars as pl
import pyarrow as pa

from trajlens.errors import ConfigError, QueryError, StoreError, non_utf8
from trajlens.frames import as_frame
from trajlens.schema import SCHEMAS, TABLES, VIEWS
from trajlens.store.database import (
    ANALYSIS_TABLES,
    DATABASE_FILE,
    DERIVED_DIR,
    RUNS_DIR,
    analysis_schema,
    database_is_current,
    derived_files,
    derived_part,
    rebuild_database,
    register_tables,
    rewriting_commands,
    run_dirs,
    sql_identifier,
    store_files,
)
from trajlens.store.integrity import (
    CHECKSUM_SUFFIX,
    DamagedStoreError,
    checksum_file,
    read_recorded_size,
    size_problem,
    write_checksum,
)
from trajlens.store.layout import is_run_dir
from trajlens.store.writer import RUN_RECORD, RecordedFiles, require_recorded_files
from trajlens.store.publish import (
    GENERATION_FILE,
    JOURNAL_FILE,
    Publisher,
    StoreLock,
    describe_os_error,
    generation,
    recover,
)

# Statement kinds a query may hold: they read, and write nothing.
READ_ONLY_STATEMENTS: frozenset[str] = frozenset({"SELECT", "EXPLAIN"})

QUERY_BATCH_ROWS = 65_536
"""Rows of a query's result read at a time by :meth:`Store.sql_batches`."""

NESTED_BATCH_ROWS = 256
"""Rows read at a time of a result with a list or struct column: a row of token arrays holds a
trajectory's tens of thousands of values."""


def _nested_type(kind: str) -> bool:
    """Whether a DuckDB type (as DuckDB names it) holds many values a row: a list, array, struct or map."""
    return kind.endswith("]") or kind.startswith(("STRUCT", "MAP", "UNION"))


def is_store(path: Path) -> bool:
    """Whether ``path`` is a store ``trajlens ingest`` wrote: ``runs/`` with a run ingest wrote
    in it (its ``ingest.json`` beside its tables), or the files every publish leaves
    (``trajlens.duckdb``, ``.generation``). A folder holding only an empty ``runs/``, or runs
    that ``trajlens synth`` wrote (``runs/a``, ``runs/b``), is not one, and reading it creates
    nothing there."""
    if not (path / RUNS_DIR).is_dir():
        return False
    return is_published_store(path) or any(is_run_dir(run_dir) and (run_dir / RUN_RECORD).is_file()
                                           for run_dir in run_dirs(path))


def is_published_store(path: Path) -> bool:
    """Whether ``path`` holds the files every publish of ``trajlens ingest`` leaves: a folder of
    runs that ``trajlens synth`` wrote (``runs/a``, ``runs/b``) reads as a store, yet is not one
    of these."""
    return (path / RUNS_DIR).is_dir() and ((path / DATABASE_FILE).is_file() or (path / GENERATION_FILE).is_file())


class Store:
    """A store directory opened for reading.

    ``store.sql("SELECT ... WHERE run_id = $run", {"run": "r6"})`` returns a Polars
    DataFrame, with parameters bound by DuckDB. ``store.trajectories`` (and ``runs``,
    ``tool_calls``, ``tokens``, ``step_metrics``) are Polars LazyFrames over the same files.
    Analysis tables are written with :meth:`write_derived`, inside :meth:`transaction` when
    several must appear together or not at all.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"{self.path}: expected a store directory, found a file")
        if not self.path.is_dir():
            raise StoreError(f"{self.path}: no such store directory")
        if not is_store(self.path):
            if is_run_dir(self.path):  # a run's own folder: the store is made beside it, never inside an input
                raise StoreError(f"{self.path}: not a trajlens store but a run directory; ingest it into a store "
                                 f"with `trajlens ingest {self.path} --store STORE`")
            inside = "no runs/ inside" if not (self.path / RUNS_DIR).is_dir() else "no run written by trajlens ingest in runs/"
            raise StoreError(f"{self.path}: not a trajlens store ({inside}); make one with "
                             f"`trajlens ingest LOGS --store {self.path}`")
        self._connection: duckdb.DuckDBPyConnection | None = None
        self._left_out: dict[str, str] = {}
        """Analysis tables the connection left out, each with why (:func:`register_tables`)."""
        self._generation = ""
        self._transaction: Publisher | None = None
        self._settle()
        self._opened_runs = self._check_complete()
        """Each run's recorded content hash when this handle opened the store: an analysis of a
        run that an ingest replaced since is not saved (:meth:`_require_unreplaced`)."""

    def _check_complete(self) -> dict[str, str | None]:
        """Every run file the runs' records list, and every analysis part whose checksum file
        remains, is on disk at the size recorded (:func:`require_recorded_files`): a deleted part
        would take its run's rows out of every answer without a word, a rewritten one would change
        them. One stat per file; ``trajlens verify`` reads every byte. Returns each run's recorded
        content hash, read with its files."""
        content_hashes = {}
        for run_dir in run_dirs(self.path):
            recorded = RecordedFiles.read(run_dir)
            require_recorded_files(self.path, run_dir, recorded)
            content_hashes[run_dir.name] = recorded.content_hash
        derived = self.path / DERIVED_DIR
        if not derived.is_dir():
            return content_hashes
        for checksum in sorted(derived.glob(f"*/.*.parquet{CHECKSUM_SUFFIX}")):
            part = checksum.with_name(checksum.name[1:-len(CHECKSUM_SUFFIX)])
            # A publish moves parts aside and back, and drops a part before its checksum: a part
            # is missing, or of another size than its checksum file records, only when it still
            # is once no publish is under way.
            problem = size_problem(part, read_recorded_size(part))
            if problem is None or (self.path / JOURNAL_FILE).exists():
                continue
            if problem == "missing" and not part.exists() and checksum.exists():
                raise DamagedStoreError(self.path, part, "missing, though its checksum file remains")
            if problem.startswith("changed") and size_problem(part, read_recorded_size(part)) == problem:
                raise DamagedStoreError(self.path, part, problem, readable=True)
        return content_hashes

    def _settle(self) -> None:
        """Finish a publish a crash interrupted, and bring trajlens.duckdb up to date (a moved
        or copied store); both only when the store is writable and no writer holds it."""
        if not (self.path / JOURNAL_FILE).exists() and database_is_current(self.path):
            return
        lock = StoreLock(self.path)
        try:
            if not lock.acquire(wait=False):
                return
        except StoreError:
            return  # a read-only store is read as it is
        try:
            recover(self.path, rebuild_database)
            rebuild_database(self.path)
        except (OSError, duckdb.Error):
            pass  # the convenience database file stays as it was (a damaged file: the read names it)
        finally:
            lock.release()

    @property
    def connection(self) -> duckdb.DuckDBPyConnection:
        """The read-only DuckDB connection queries run on (see the module docstring).

        It is built again when another writer has published into the store since.
        """
        current = generation(self.path)
        if self._connection is not None and current != self._generation:
            self._forget_connection()
        if self._connection is None:
            self._generation = current
            connection = duckdb.connect()
            self._left_out = register_tables(connection, self.path, self._derived_files())
            for setting in ("python_enable_replacements = false", "enable_external_access = false",
                            "lock_configuration = true"):
                connection.execute(f"SET {setting}")
            self._connection = connection
        return self._connection

    def sql(self, query: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> pl.DataFrame:
        """Run one read-only query with bound parameters (``$name`` with a mapping, ``?`` with a
        sequence): the whole result of :meth:`sql_batches`."""
        return pl.concat(list(self.sql_batches(query, params)))

    def sql_batches(self, query: str, params: Mapping[str, Any] | Sequence[Any] | None = None, *,
                    rows: int | None = None) -> Iterator[pl.DataFrame]:
        """:meth:`sql` a batch of at most ``rows`` rows (:data:`QUERY_BATCH_ROWS`, or
        :data:`NESTED_BATCH_ROWS` for a result with nested columns) at a time, so a
        result larger than memory can be printed in part or written whole; at least one batch (an
        empty one for an empty result), every one in the result's schema. ``rows`` must be 1 or more."""
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
            raise ConfigError([f"rows: expected a whole number of 1 or more, found {rows!r}"])
        connection = self._read_only(query, params)

        def start() -> Any:
            relation = connection.sql(query, params=params or None)
            if relation is None:
                return None
            # newer DuckDB calls fetch_record_batch (kept there, deprecated) to_arrow_reader
            reader = getattr(relation, "to_arrow_reader", None) or relation.fetch_record_batch
            nested = any(_nested_type(str(kind)) for kind in relation.types)
            return reader(rows or (NESTED_BATCH_ROWS if nested else QUERY_BATCH_ROWS))

        reader = self._answered(lambda: _interruptible(connection, start), params)
        if reader is None:
            yield pl.DataFrame()
            return
        empty = True
        while True:
            batch = self._answered(lambda: _interruptible(connection, lambda: _next_batch(reader)), params)
            if batch is None:
                break
            empty = False
            yield self._answered(lambda: _printable_times(pl.from_arrow(batch)))  # type: ignore[arg-type]
        if empty:
            schema = reader.schema
            reader.close()  # the connection then answers why the result is empty
            if (missing := self._no_part(query, params) or self._unknown_value(query, params)) is not None:
                raise missing
            yield self._answered(lambda: pl.from_arrow(schema.empty_table()))  # type: ignore[arg-type]

    def _read_only(self, query: str, params: Mapping[str, Any] | Sequence[Any] | None) -> duckdb.DuckDBPyConnection:
        """The connection to run ``query`` on, once it is known to be one statement that reads,
        with the parameters it takes; a QueryError otherwise."""
        if not isinstance(query, str):
            raise TypeError(f"sql: expected the query as text, got {type(query).__name__}")
        if isinstance(params, (str, bytes)):
            raise QueryError(f"params: expected a mapping or a list of values, got the text {params!r} "
                             f"(pass [{params!r}])")
        _check_utf8(query, params)
        try:
            statements = duckdb.extract_statements(query)
        except duckdb.Error as error:
            raise QueryError(f"query failed: {_first_line(error)}") from None
        if len(statements) != 1:
            raise QueryError(f"expected one SQL statement, found {len(statements)}")
        kind = statements[0].type.name
        if kind not in READ_ONLY_STATEMENTS:
            raise QueryError(f"query refused: {_statement_name(statements[0].query, kind)} is not a read; "
                             f"a query may only read the store's tables "
                             f"(SELECT), never write, attach, load or change settings")
        if params is None or isinstance(params, Mapping):
            _check_parameters(statements[0].named_parameters, params or {})
            self._require_named_runs(params or {})
        return self.connection

    def _require_named_runs(self, params: Mapping[str, Any]) -> None:
        """A QueryError when a :data:`RUN_PARAMETERS` value is not a run of the store, as every
        command refuses an unknown run (a query would answer it with no rows)."""
        named = [(name, params[name]) for name in RUN_PARAMETERS if name in params]
        known = self.run_ids() if named else []
        for name, value in named:
            if value not in known:
                raise QueryError(f"${name}: run {value!r} is not in the store (runs: {', '.join(known) or 'none'})")

    def _no_part(self, query: str, params: Mapping[str, Any] | Sequence[Any] | None) -> QueryError | None:
        """Why a query answered no rows, when it reads an analysis table that holds no part of a
        run it is given (:data:`RUN_PARAMETERS`): the run is not classified, sampled or attributed
        yet, which the query's empty answer would hide. None otherwise."""
        if not isinstance(params, Mapping) or not any(name in params for name in RUN_PARAMETERS):
            return None
        read = [name for name in _tables_read(query) if name in ANALYSIS_TABLES]
        parts = self._derived_files()
        for name in RUN_PARAMETERS:
            run_id = params.get(name)
            for table in read if isinstance(run_id, str) else ():
                if self.path.resolve() / derived_part(table, run_id) not in parts.get(table, []):
                    command = rewriting_commands([table], self.path, run_id)[0]
                    return QueryError(f"query answered no rows: run {run_id!r} has no {table} yet; {command} computes it")
        return None

    def _unknown_value(self, query: str, params: Mapping[str, Any] | Sequence[Any] | None) -> QueryError | None:
        """Why a query answered no rows, when it compares a parameter with a column of the same name
        (``estimator = $estimator``) and no table it reads holds the value there (for the run it is
        given, if any): a mistyped label (``$estimator gae_raww``), which the empty answer would
        hide; the message names the nearest values, or the first few. None otherwise."""
        if not isinstance(params, Mapping):
            return None
        asked = [(name, params[name]) for name in sorted(_matched_parameters(query))
                 if name not in RUN_PARAMETERS and isinstance(params.get(name), str)]
        if not asked:
            return None
        runs = [params[name] for name in RUN_PARAMETERS if isinstance(params.get(name), str)]
        read = sorted(name for name in _tables_read(query) if name in self.queryable())
        return _value_missing(self.connection, read, asked, list(dict.fromkeys(runs)))

    def _answered(self, work: Callable[[], Result], params: Mapping[str, Any] | Sequence[Any] | None = None) -> Result:
        """``work()`` (running a query or reading its result), its failures as one-line errors; a
        value of ``params`` the query could not convert is named with its parameter."""
        try:
            return work()
        except duckdb.PermissionException:
            raise QueryError("query refused: a query reads only the store's tables "
                             f"({', '.join(self.queryable())}), not files") from None
        except duckdb.CatalogException as error:
            raise QueryError(self._catalog_message(error)) from None
        except duckdb.ConversionException as error:
            named = _converted_parameter(_first_line(error), params)
            raise QueryError(f"query failed: {named}{_first_line(error)}") from None
        except duckdb.Error as error:
            raise self._damage() or QueryError(f"query failed: {_first_line(error)}") from None
        except (pl.exceptions.PolarsError, pa.ArrowException) as error:
            raise self._damage() or QueryError(
                f"query result has a column Polars cannot hold: {_first_line(error)}") from None

    def _damage(self) -> StoreError | None:
        """After a failed read: the store's first file that fails to read, as the error to
        report instead (it names the file and ``trajlens verify``); None when all read."""
        from trajlens.store.damage import first_damaged_file

        return first_damaged_file(self.path, deep=True)

    def _catalog_message(self, error: duckdb.Error) -> str:
        text = str(error)
        for name, reason in self._left_out.items():
            if f"with name {name} does not exist" in text:
                return f"query failed: {reason}; drop one run's part (Store.drop_derived) or analyse that run again"
        for name, command in ANALYSIS_TABLES.items():
            if f"with name {name} does not exist" in text and name not in self.tables():
                return f"query failed: table {name} does not exist yet in {self.path}; `{command}` creates it"
        return f"query failed: {_first_line(error)}"

    def table(self, name: str) -> pl.LazyFrame:
        if name in SCHEMAS:
            schema = pl.Schema(pl.from_arrow(SCHEMAS[name].empty_table()).schema)
            files = [str(path) for path in store_files(self.path, name)]
            if not files:
                return pl.LazyFrame(schema=schema)
            return pl.scan_parquet(files, glob=False, hive_partitioning=False, schema=schema)
        derived = self._derived_files()
        if name in derived:
            # One file per run; runs analysed by different versions may hold different columns:
            # their union, null where a file lacks one.
            scans = [pl.scan_parquet(str(path), glob=False) for path in derived[name]]
            return scans[0] if len(scans) == 1 else pl.concat(scans, how="diagonal_relaxed")
        hint = f"; `{ANALYSIS_TABLES[name]}` creates it" if name in ANALYSIS_TABLES else ""
        raise StoreError(f"{self.path}: no table {name!r} (tables: {', '.join(self.tables())}){hint}")

    def tables(self) -> list[str]:
        return [*TABLES, *self._derived_files()]

    def queryable(self) -> list[str]:
        """What a query may read: the tables and the views every store offers (:data:`~trajlens.schema.VIEWS`)."""
        return [*self.tables(), *VIEWS]

    def _derived_files(self) -> dict[str, list[Path]]:
        """Analysis tables and their files, as this handle sees them: inside a transaction,
        the tables it has written so far are read from where they wait to be published."""
        published = derived_files(self.path)
        if self._transaction is None:
            return published
        by_target = {str(path.relative_to(self.path.resolve())): path
                     for files in published.values() for path in files}
        for drop in self._transaction.journal.drops:
            by_target.pop(drop.target, None)
        for move in self._transaction.journal.moves:
            if move.target.startswith(f"{DERIVED_DIR}/") and not Path(move.target).name.startswith("."):
                by_target[move.target] = self.path / move.new
        tables: dict[str, list[Path]] = {}
        for target, path in sorted(by_target.items()):
            tables.setdefault(target.split("/")[1], []).append(path)
        return tables

    def run_ids(self) -> list[str]:
        return [path.name for path in run_dirs(self.path)]

    def require_runs(self, run_ids: list[str]) -> None:
        """Raise :class:`ConfigError` naming every id that is not a run of this store."""
        if isinstance(run_ids, str):
            raise ConfigError([f"run_ids: expected a list of run ids, got the text {run_ids!r} (pass [{run_ids!r}])"])
        known = self.run_ids()
        missing = [run_id for run_id in run_ids if run_id not in known]
        if missing:
            raise ConfigError([f"run {run_id!r} is not in the store (runs: {', '.join(known) or 'none'})"
                               for run_id in missing])

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Publish every :meth:`write_derived` in the block together, or none of them.

        Holds the store lock; the tables written appear when the block ends without error.
        Nested blocks join the outermost one.
        """
        if self._transaction is not None:
            yield
            return
        lock = StoreLock(self.path)
        lock.acquire()
        try:
            try:
                recover(self.path, rebuild_database)
            except OSError as error:
                raise describe_os_error(self.path, error, "write to the store") from None
            publisher = Publisher(self.path)
            self._transaction = publisher
            try:
                yield
            except BaseException:
                publisher.discard()
                raise
            finally:
                self._transaction = None
            try:
                publisher.publish(rebuild_database)
            except OSError as error:
                raise describe_os_error(self.path, error, "publish analysis tables") from None
            self._forget_connection()
        finally:
            lock.release()

    def write_derived(self, name: str, run_id: str, frame: pl.DataFrame) -> Path:
        """Save one run's part of an analysis table (classes, stage reports, advantages).

        The table becomes a view of the store named ``name``; writing the same run again
        replaces its part. Outside :meth:`transaction` the write is published at once.
        """
        target = derived_part(name, run_id)
        if not isinstance(frame, pl.DataFrame) and not hasattr(frame, "write_parquet"):  # a stream of steps has it
            frame = as_frame(frame, "frame")
        if isinstance(frame, pl.DataFrame) and not frame.width:
            raise ConfigError([f"analysis table {name}: the frame has no column"])
        if self._transaction is None:
            with self.transaction():
                return self.write_derived(name, run_id, frame)
        self.require_runs([run_id])
        self._require_unreplaced(run_id)
        staged = self._transaction.stage_path(*target.split("/"))
        try:
            staged.parent.mkdir(parents=True, exist_ok=True)
            frame.write_parquet(staged)
            checksum = write_checksum(staged)
        except OSError as error:
            raise describe_os_error(self.path, error, f"write analysis table {name}") from None
        except pl.exceptions.PolarsError as error:
            raise ConfigError([f"analysis table {name}: the frame cannot be saved as Parquet ({_first_line(error)})"]) from None
        others = [path for path in self._derived_files().get(name, []) if path.name != f"{run_id}.parquet"]
        analysis_schema(name, [*others, staged])  # it must read together with the other runs' parts
        self._transaction.replace(staged, target)
        self._transaction.replace(checksum, f"{DERIVED_DIR}/{name}/{checksum.name}")
        self._forget_connection()
        return self.path / target

    def _require_unreplaced(self, run_id: str) -> None:
        """A :class:`StoreError` when ``run_id`` was replaced or removed by an ingest since this
        handle opened the store: what was computed may mix the two runs' steps. Checked under the
        store lock, so no ingest can publish between the check and the write."""
        if run_id not in self._opened_runs:
            return  # ingested after the store was opened: read as it is now
        run_dir = self.path / RUNS_DIR / run_id
        if not run_dir.is_dir() or RecordedFiles.read(run_dir).content_hash != self._opened_runs[run_id]:
            raise StoreError(
                f"{self.path}: run {run_id!r} was ingested again while this command read it; nothing was saved "
                "(what was read may mix the old run's steps with the new one's): run the command again "
                "(in Python, on the store opened again)")

    def drop_derived(self, names: Sequence[str], run_id: str) -> list[str]:
        """Remove ``run_id``'s part of each analysis table in ``names`` that holds one (with the
        rest of the transaction, as :meth:`write_derived` publishes); returns the tables it held."""
        if self._transaction is None:
            with self.transaction():
                return self.drop_derived(names, run_id)
        if isinstance(names, str):
            raise ConfigError([f"names: expected a list of analysis tables, got the text {names!r} (pass [{names!r}])"])
        held = [name for name in names if (self.path / derived_part(name, run_id)).exists()]
        for name in held:
            part = derived_part(name, run_id)
            self._transaction.drop(part)
            if (checksum := checksum_file(self.path / part)).exists():
                self._transaction.drop(str(checksum.relative_to(self.path)))
        if held:
            self._forget_connection()
        return held

    def _forget_connection(self) -> None:
        """Drop the query connection so the next query sees the tables now published."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    runs = property(lambda self: self.table("runs"))
    trajectories = property(lambda self: self.table("trajectories"))
    tool_calls = property(lambda self: self.table("tool_calls"))
    tokens = property(lambda self: self.table("tokens"))
    step_metrics = property(lambda self: self.table("step_metrics"))

    def close(self) -> None:
        self._forget_connection()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r}, runs={self.run_ids()})"


Result = TypeVar("Result")


def _interruptible(connection: duckdb.DuckDBPyConnection, work: Callable[[], Result]) -> Result:
    """``work()`` (a query on ``connection``) run so that Ctrl-C stops it: DuckDB does not notice
    Python's interrupt while a query runs (a recursive query ran on for minutes), so in the main
    thread the query runs in a thread of its own, and a ``KeyboardInterrupt`` in the waiting main
    thread interrupts the connection, then is raised when the query has stopped."""
    if threading.current_thread() is not threading.main_thread():
        return work()
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:  # handed to the main thread as it is
            outcome["error"] = error
        finally:
            done.set()

    # An Event, not Thread.join: a join that Ctrl-C interrupts can return early on a thread still
    # running, and a query thread left running when the interpreter ends aborts the process.
    threading.Thread(target=target, name="trajlens-query", daemon=True).start()
    try:
        while not done.wait(0.05):
            pass
    except KeyboardInterrupt:
        connection.interrupt()
        while not done.is_set():
            done.wait(0.05)
        raise
    if "error" in outcome:
        raise outcome["error"]
    return cast(Result, outcome["value"])


def _statement_name(text: str, kind: str) -> str:
    """The statement as it was written (``INSTALL``, ``FORCE INSTALL``), which DuckDB's type may
    not say (it types ``INSTALL`` as ``LOAD``); its type where the text starts otherwise."""
    words = re.findall(r"[A-Za-z]+", re.sub(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", "", text, flags=re.S)[:40])
    if not words:
        return kind
    return " ".join(words[:2]).upper() if words[0].upper() == "FORCE" and len(words) > 1 else words[0].upper()


def _check_utf8(query: str, params: Mapping[str, Any] | Sequence[Any] | None) -> None:
    """Refuse text DuckDB cannot take: bytes that are not UTF-8 (:func:`trajlens.errors.non_utf8`)
    would fail inside DuckDB's bindings with a traceback."""
    values = params.items() if isinstance(params, Mapping) else enumerate(params or ())
    for where, text in [("query", query), *((f"parameter {name}", value) for name, value in values)]:
        found = non_utf8(text) if isinstance(text, str) else None
        if found is not None:
            raise QueryError(f"{where}: expected UTF-8 text, found {found}")


def _check_parameters(named: set[str], params: Mapping[str, Any]) -> None:
    """Raise QueryError when a bound name is not a ``$name`` of the query, or a ``$name`` of
    the query is bound to nothing: one line naming both sides, rather than DuckDB's count."""
    takes = ", ".join(f"${name}" for name in sorted(named)) or "no parameters"
    unused = sorted(set(params) - named)
    if unused:
        raise QueryError(f"query failed: a value is given for ${unused[0]}, but the query takes {takes}")
    unbound = sorted(named - set(params))
    if unbound:
        raise QueryError(f"query failed: the query takes {takes}; no value is given for ${unbound[0]}")


RUN_PARAMETERS: tuple[str, ...] = ("run_id", "run_a", "run_b")
"""Query parameters that name a run (``$run_id``; ``$run_a`` and ``$run_b`` of a comparison):
their value must be a run of the store."""


VALUES_LISTED = 12
"""At most this many of the values there are go into the message."""
VALUES_READ = 1000
"""At most this many distinct values a table holds are read to name the nearest."""


def _converted_parameter(message: str, params: Mapping[str, Any] | Sequence[Any] | None) -> str:
    """``$name 'value' (text): `` for the parameter whose text value a conversion error quotes
    (the query compared it with a column of another type), else nothing."""
    if not isinstance(params, Mapping):
        return ""
    quoted = [name for name, value in params.items() if isinstance(value, str) and f"'{value}'" in message]
    return f"${quoted[0]} {params[quoted[0]]!r} (text): " if len(quoted) == 1 else ""


def _value_missing(lookup: duckdb.DuckDBPyConnection, read: Sequence[str], asked: Sequence[tuple[str, str]],
                   runs: Sequence[str]) -> QueryError | None:
    """The error of :meth:`Store._unknown_value`: the first of ``asked`` (parameter, value) that no
    table of ``read`` with a column of the parameter's name holds there (for one of ``runs``, if any)."""
    columns = {table: _columns(lookup, table) for table in read}
    for name, value in asked:
        held: list[str] = []
        tables = [table for table in read if name in columns[table]]
        for table in tables:
            of_run = bool(runs) and "run_id" in columns[table]
            where = f"WHERE {sql_identifier(name)} IS NOT NULL" + (" AND list_contains($runs, run_id)" if of_run else "")
            bound = {"runs": list(runs)} if of_run else {}
            if lookup.execute(f"SELECT count(*) > 0 FROM {sql_identifier(table)} {where} AND "
                              f"CAST({sql_identifier(name)} AS VARCHAR) = $value",
                              {**bound, "value": value}).fetchall() == [(True,)]:
                break
            held += [found for (found,) in lookup.execute(
                f"SELECT DISTINCT CAST({sql_identifier(name)} AS VARCHAR) FROM {sql_identifier(table)} {where} "
                f"ORDER BY 1 LIMIT {VALUES_READ}", bound).fetchall() if found not in held]
        else:
            if held:
                of = (f" of run {runs[0]!r}" if len(runs) == 1 else
                      f" of runs {', '.join(map(repr, runs))}" if runs else "")
                return QueryError(f"query answered no rows: ${name} {value!r}: no such {name}{of} in "
                                  f"{', '.join(tables)} ({_values_named(value, held)})")
    return None


def _columns(lookup: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    """The column names of a table or view of the store."""
    rows = lookup.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                          "ORDER BY ordinal_position", [table]).fetchall()
    return [column for (column,) in rows]


def _values_named(value: str, held: Sequence[str]) -> str:
    """The values nearest ``value`` among those ``held`` (a typo's correction), else the first few."""
    import difflib

    nearest = difflib.get_close_matches(value, held, n=3, cutoff=0.75)
    if nearest:
        return f"nearest: {', '.join(nearest)}"
    listed = ", ".join(held[:VALUES_LISTED]) + (", ..." if len(held) > VALUES_LISTED else "")
    return f"there: {listed}"


@functools.lru_cache(maxsize=32)
def _parsed(query: str) -> tuple[frozenset[str], frozenset[str]]:
    """From one parse of ``query`` by DuckDB, which binds nothing (a query with parameters or
    missing tables parses): the tables and views it reads (with its own CTEs' names), and the
    parameters it compares for equality with a column of their own name (``estimator =
    $estimator``, ``c.name = $name``)."""
    with duckdb.connect() as connection:  # the store's may be reading a result
        parsed = json.loads(connection.execute("SELECT json_serialize_sql(?)", [query]).fetchone()[0])
    tables: set[str] = set()
    matched: set[str] = set()
    stack: list[Any] = [parsed]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        stack.extend(node.values())
        if node.get("type") == "BASE_TABLE" and isinstance(node.get("table_name"), str):
            tables.add(node["table_name"])
        elif node.get("class") == "COMPARISON" and node.get("type") == "COMPARE_EQUAL":
            sides = [side for side in (node.get("left"), node.get("right")) if isinstance(side, dict)]
            columns = {side["column_names"][-1] for side in sides
                       if side.get("class") == "COLUMN_REF" and side.get("column_names")}
            matched.update(side.get("identifier") for side in sides
                           if side.get("class") == "PARAMETER" and side.get("identifier") in columns)
    return frozenset(tables), frozenset(matched)


def _tables_read(query: str) -> frozenset[str]:
    """The names of the tables and views ``query`` reads (with its own CTEs' names)."""
    return _parsed(query)[0]


def _matched_parameters(query: str) -> frozenset[str]:
    """The parameters ``query`` compares for equality with a column of their own name."""
    return _parsed(query)[1]


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def open_store(path: Path | str) -> Store:
    """Open a store directory written by ``trajlens ingest``."""
    return Store(path)


Function = TypeVar("Function", bound=Callable[..., Any])


def store_holding(path: Path, *, hidden: bool = True) -> Path | None:
    """The store whose own files ``path`` would write over, or None: its runs (``runs/``,
    ``derived/``), its database or (unless not ``hidden``) a hidden file of its (a lock, a
    journal). Only ingest and the analyses write those; a report or a table kept beside them, in
    the store's folder, is fine. Only stores ingest published count: ``runs/`` holding the runs
    ``trajlens synth`` wrote is where the next one goes."""
    for written in _written_paths(path):
        for folder in written.parents:
            if (folder / RUNS_DIR).is_dir():
                if is_published_store(folder):
                    first = written.relative_to(folder).parts[0]
                    if first in (RUNS_DIR, DERIVED_DIR, DATABASE_FILE) or (hidden and first.startswith(".")):
                        return folder if path.is_absolute() else Path(os.path.relpath(folder))
                    break
    return None


def store_holding_problem(path: Path, label: str, *, hidden: bool = True) -> str | None:
    """Why ``path`` (named ``label`` in the message: ``--out PATH``) may not be written, when it
    lies among a store's own files (:func:`store_holding`); None when it does not."""
    holding = store_holding(path, hidden=hidden)
    if holding is None:
        return None
    return f"{label}: among the files of the store {holding}, which only ingest and the analyses write; write it elsewhere"


def _written_paths(path: Path) -> list[Path]:
    """Where writing ``path`` may land: the path as given, and with links followed (in its
    folders, which a partial file beside it is written through, and in itself, which a folder
    output is filled through)."""
    absolute = Path(os.path.abspath(path))
    candidates = [absolute, Path(os.path.realpath(absolute.parent)) / absolute.name, Path(os.path.realpath(absolute))]
    return list(dict.fromkeys(candidates))


def in_transaction(function: Function) -> Function:
    """Run ``function(store, ...)`` inside ``store.transaction()``: its analysis tables appear
    together when it returns, and none of them when it raises. A store given as its path is
    opened first."""

    @functools.wraps(function)
    def wrapper(store: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(store, (str, os.PathLike)):
            store = open_store(store)
        transaction = getattr(store, "transaction", None)
        if transaction is None:
            return function(store, *args, **kwargs)
        with transaction():
            return function(store, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


TIME_DAYS = 95_000_000
"""Days either side of 1970 within which a date or time can be printed or written (Polars'
calendar ends near the year 262,000; DuckDB's ``infinity`` lies beyond)."""

_DAY = {"ns": 86_400_000_000_000, "us": 86_400_000_000, "ms": 86_400_000}


def _printable_times(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame``, or a QueryError naming its first date or time column with a value no calendar
    holds (``'infinity'::date``), which Polars could neither print nor write."""
    for name, dtype in frame.schema.items():
        if dtype == pl.Date:
            days = frame.get_column(name).cast(pl.Int64)
        elif isinstance(dtype, pl.Datetime):
            days = frame.get_column(name).cast(pl.Int64) // _DAY[dtype.time_unit or "us"]
        else:
            continue
        furthest = days.abs().max()
        if furthest is not None and furthest > TIME_DAYS:  # type: ignore[operator]
            kind = "date" if dtype == pl.Date else "timestamp"
            raise QueryError(f"query result column {name!r}: a {kind} beyond any calendar (infinity?); "
                             f"cast it to text ({name}::VARCHAR) or leave it out")
    return frame


def _next_batch(reader: Any) -> pa.RecordBatch | None:
    """The next batch of a record-batch reader; None at its end."""
    try:
        return reader.read_next_batch()
    except StopIteration:
        return None


__all__ = ["QueryError", "READ_ONLY_STATEMENTS", "Store", "in_transaction", "is_store", "open_store", "store_holding",
           "store_holding_problem"]

"""The store's tables as DuckDB relations, over an explicit list of its Parquet files.

Two consumers read them:

- :class:`trajlens.store.Store` registers each table as a PyArrow dataset of the store's own
  files on an in-memory DuckDB connection whose file system access is then switched off, so
  a query reads the store's tables and nothing else.
- ``STORE/trajlens.duckdb`` holds plain views for any DuckDB (the ``duckdb`` command-line tool
  from 1.0 on: it is written in storage version v1.0.0). Each view lists the store's files by
  absolute path, with glob characters escaped, so a store whose path holds ``[``, ``*``, ``?``,
  quotes or braces reads exactly its own files. It is rebuilt whenever the files change and
  when a store that was moved or copied is opened.

Files are listed, never globbed: no path is matched against another store's files.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from trajlens.errors import ConfigError
from trajlens.schema import SCHEMAS, TABLES, VIEWS
from trajlens.store.layout import RUN_ID_PATTERN, RUN_ID_RULE, table_files

DATABASE_FILE = "trajlens.duckdb"
# Tables written by analyses (stage reports, advantages) live beside the runs.
DERIVED_DIR = "derived"
RUNS_DIR = "runs"
# A digest of the views last written into DATABASE_FILE, and that file's size and time.
VIEWS_RECORD = ".trajlens-views"
# The oldest DuckDB storage format the file is written in; DuckDB 1.0 and later read it.
STORAGE_VERSION = "v1.0.0"

ATTRIBUTION_TABLES: tuple[str, ...] = (
    "call_credit", "class_credit", "attribution_steps", "attribution_summary", "attribution_length_bias",
    "attribution_drift", "attribution_verdicts", "attribution_evidence", "attribution_projection",
    "attribution_runs",
)
"""The tables ``trajlens attribute`` saves."""

STAGE_TABLES: tuple[str, ...] = ("stage_rates", "stage_changes")
"""The tables ``trajlens sample`` (and ``trajlens report``) saves."""

ANALYSIS_TABLES: dict[str, str] = {
    "call_classes": "trajlens classify STORE",
    "trajectory_measures": "trajlens classify STORE",
    "unknown_tools": "trajlens classify STORE",
    **{table: "trajlens sample STORE --run RUN (or trajlens report)" for table in STAGE_TABLES},
    "advantage_batches": "trajlens advantages STORE --run RUN --estimator NAME (or trajlens report)",
    **{table: "trajlens attribute STORE --run RUN" for table in ATTRIBUTION_TABLES},
}
"""Every analysis table, with the command that writes it (named when a query asks for one that is not there yet)."""


def rewriting_commands(tables: Iterable[str], store: Path | str, run_id: str) -> list[str]:
    """The commands that write ``tables`` of run ``run_id`` in ``store`` again, by
    :data:`ANALYSIS_TABLES`, each once and in backticks: what a message names after those tables
    were dropped (```trajlens sample out/store --run r6` (or `trajlens report`)``)."""

    def filled(command: str | None) -> str:
        if command is None:
            return "the command that wrote it"
        named = re.sub(r"\b(STORE|RUN)\b", lambda m: str(store) if m.group(1) == "STORE" else run_id, command)
        first, _, alternative = named.partition(" (or ")
        return f"`{first}`" + (f" (or `{alternative.removesuffix(')')}`)" if alternative else "")

    return [filled(command) for command in dict.fromkeys(ANALYSIS_TABLES.get(table) for table in tables)]


CLASS_ANALYSES: tuple[str, ...] = STAGE_TABLES + ATTRIBUTION_TABLES
"""Analysis tables computed from a run's call classes: a classification that changes them makes these stale."""


def run_dirs(store: Path) -> list[Path]:
    """The store's run directories, by absolute path (the store is resolved once, not per file)."""
    runs = store.resolve() / RUNS_DIR
    if not runs.is_dir():
        return []
    return sorted(path for path in runs.iterdir() if path.is_dir() and not path.name.startswith("."))


def store_files(store: Path, name: str) -> list[Path]:
    """Every Parquet file of run table ``name`` in the store, run by run, in step order."""
    return [path for run_dir in run_dirs(store) for path in table_files(run_dir, name)]


ANALYSIS_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
"""The name of an analysis table: a plain SQL identifier, as its folder and its view are named."""


def derived_part(name: str, run_id: str) -> str:
    """The store-relative path of ``run_id``'s part of the analysis table ``name``: a
    :class:`ConfigError` for a name that is no plain identifier or is already a table or view
    of every store (the analysis table would hide it from queries), or a run id that ingest
    would refuse (either would reach outside the table's folder)."""
    problems = []
    if not isinstance(name, str) or not ANALYSIS_TABLE_NAME.fullmatch(name):
        problems.append(f"analysis table name {name!r}: expected letters, digits and '_', not starting with a digit")
    elif name.lower() in {reserved.lower() for reserved in (*TABLES, *VIEWS)}:  # SQL names ignore case
        problems.append(f"analysis table name {name!r}: a table or view every store has; name the analysis otherwise")
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.fullmatch(run_id):
        problems.append(f"run id {run_id!r}: expected {RUN_ID_RULE}")
    if problems:
        raise ConfigError(problems)
    return f"{DERIVED_DIR}/{name}/{run_id}.parquet"


def derived_files(store: Path) -> dict[str, list[Path]]:
    """Analysis tables of a store: name -> its Parquet files (one per run, under ``derived/NAME/``)."""
    derived = store.resolve() / DERIVED_DIR
    if not derived.is_dir():
        return {}
    tables = {}
    for directory in sorted(derived.iterdir()):
        if not directory.is_dir() or directory.name.startswith("."):
            continue
        files = sorted(p for p in directory.iterdir() if p.suffix == ".parquet" and not p.name.startswith("."))
        if files:
            tables[directory.name] = files
    return tables


def escape_glob(path: str) -> str:
    """``path`` with DuckDB's glob characters made literal (``[`` -> ``[[]``)."""
    return "".join(f"[{char}]" if char in "[*?" else char for char in path)


def sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def sql_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _file_list(files: list[Path]) -> str:
    return "[" + ", ".join(sql_string(escape_glob(str(path))) for path in files) + "]"


def view_statements(store: Path) -> list[str]:
    """CREATE VIEW statements for the run tables, the views over them (:data:`~trajlens.schema.VIEWS`)
    and the analysis tables present."""
    statements = []
    for name in TABLES:
        files = store_files(store, name)
        if files:
            statements.append(f"CREATE OR REPLACE VIEW {sql_identifier(name)} AS SELECT * FROM read_parquet("
                              f"{_file_list(files)}, hive_partitioning = false, union_by_name = true)")
    if store_files(store, "trajectories"):
        statements += [f"CREATE OR REPLACE VIEW {sql_identifier(name)} AS {query}" for name, query in VIEWS.items()]
    for name, files in derived_files(store).items():
        statements.append(f"CREATE OR REPLACE VIEW {sql_identifier(name)} AS SELECT * FROM read_parquet("
                          f"{_file_list(files)}, union_by_name = true)")
    return statements


def rebuild_database(store: Path) -> Path:
    """Write ``STORE/trajlens.duckdb`` afresh when its views would change; atomic (rename).

    A session that has the old file open keeps reading the old one; nothing waits on it.
    """
    path = store / DATABASE_FILE
    statements = view_statements(store)
    if _record_matches(store, statements):
        return path
    record = store / VIEWS_RECORD
    partial = store / f".{DATABASE_FILE}.{uuid.uuid4().hex[:8]}.partial"
    try:
        # DuckDB reads '?' and '\\' in an ATTACH path as URL syntax, so the file is built under a
        # plain temporary name and copied into the store, then renamed into place.
        with tempfile.TemporaryDirectory(prefix="trajlens-db-") as scratch:
            built = Path(scratch) / DATABASE_FILE
            connection = duckdb.connect()
            try:
                connection.execute(f"ATTACH {sql_string(str(built))} AS store (STORAGE_VERSION '{STORAGE_VERSION}')")
                connection.execute("USE store")
                for statement in statements:
                    connection.execute(statement)
                stored = _stored_views_digest(connection)
                connection.execute("USE memory")
                connection.execute("DETACH store")
            finally:
                connection.close()
            shutil.copyfile(built, partial)
        partial.rename(path)
        record_partial = record.with_name(record.name + ".partial")
        record_partial.write_text(_record_text(statements, path) + f"stored sha256 {stored}\n")
        record_partial.rename(record)
    finally:
        with contextlib.suppress(OSError):
            partial.unlink()
    return path


def _record_text(statements: list[str], database: Path) -> str:
    """A digest of the views written, and the size and time of the file they went into: a file
    changed since (a view dropped with another DuckDB) no longer matches, and is written again."""
    stat = database.stat()
    return f"views sha256 {_statements_digest(statements)}\ndatabase {stat.st_size} {stat.st_mtime_ns}\n"


def _statements_digest(statements: list[str]) -> str:
    return hashlib.sha256("".join(statement + ";\n" for statement in statements).encode()).hexdigest()


def _stored_views_digest(connection: duckdb.DuckDBPyConnection) -> str:
    """A digest of the views the attached database in use holds, as DuckDB keeps their text."""
    rows = connection.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal "
                              "AND database_name = current_database() ORDER BY view_name").fetchall()
    return hashlib.sha256("".join(f"{name}\n{sql}\n" for name, sql in rows).encode()).hexdigest()


def _record_matches(store: Path, statements: list[str]) -> bool:
    database, record = store / DATABASE_FILE, store / VIEWS_RECORD
    try:
        return _written_part(record.read_text()) == _record_text(statements, database)
    except OSError:
        return False


def _written_part(record: str) -> str:
    """The record's lines about what was written and where (without the stored views' digest)."""
    return "".join(line for line in record.splitlines(keepends=True) if not line.startswith("stored sha256 "))


def database_is_current(store: Path) -> bool:
    """Whether ``trajlens.duckdb`` holds the views of the files now in the store."""
    return _record_matches(store, view_statements(store))


def database_holds_its_views(store: Path) -> bool:
    """Whether ``trajlens.duckdb`` holds the views of the files now in the store, reading its
    views back: true of a copy restored in place (its time is new, its views are right), false of
    a store moved or copied elsewhere (its views name the first store's files) or of a database
    another DuckDB client changed. :func:`database_is_current` tells from the file's size and
    time, with no read; this is what ``trajlens verify`` asks when they changed."""
    statements = view_statements(store)
    if _record_matches(store, statements):
        return True
    database, record = store / DATABASE_FILE, store / VIEWS_RECORD
    try:
        lines = record.read_text().splitlines()
    except OSError:
        return False
    written = _statements_digest(statements)
    stored = next((line.split()[-1] for line in lines if line.startswith("stored sha256 ")), None)
    if stored is None or f"views sha256 {written}" not in lines:
        return False
    try:
        connection = duckdb.connect(str(database), read_only=True)
    except duckdb.Error:
        return False
    try:
        return _stored_views_digest(connection) == stored
    except duckdb.Error:
        return False
    finally:
        connection.close()


def analysis_schema(name: str, files: Sequence[Path]) -> pa.Schema:
    """The schema queries read the analysis table ``name`` with: the schemas of its runs' parts
    unified (a column one part lacks is null there, an integer column another holds as floats
    is read as floats). A :class:`ConfigError` naming the table when two parts hold one column
    as types that do not unify (text in one, numbers in another)."""
    try:
        return pa.unify_schemas([pq.read_schema(path) for path in files], promote_options="permissive")
    except (pa.ArrowTypeError, pa.ArrowInvalid) as error:
        reason = str(error).strip().splitlines()[0].removeprefix("Unable to merge: ")
        raise ConfigError([f"analysis table {name}: its runs' parts do not fit together ({reason})"]) from None


def _dataset(files: list[Path], schema: pa.Schema) -> ds.Dataset:
    return ds.dataset([str(path) for path in files], format="parquet", schema=schema)


def register_tables(connection: duckdb.DuckDBPyConnection, store: Path,
                    derived: dict[str, list[Path]] | None = None) -> dict[str, str]:
    """Register every table of the store on ``connection``, and the views over them
    (:data:`~trajlens.schema.VIEWS`). An analysis table whose parts do not fit together
    (:func:`analysis_schema`) is left out, so every other table can still be read; returns
    those left out, each with why.

    ``derived`` replaces the analysis tables found on disk (a transaction's own view of them).
    """
    for name in TABLES:
        files = store_files(store, name)
        schema = SCHEMAS[name]
        connection.register(name, _dataset(files, schema) if files else schema.empty_table())
    for name, query in VIEWS.items():
        connection.execute(f"CREATE VIEW {sql_identifier(name)} AS {query}")
    left_out = {}
    for name, files in (derived_files(store) if derived is None else derived).items():
        try:
            connection.register(name, _dataset(files, analysis_schema(name, files)))
        except ConfigError as error:
            left_out[name] = str(error)
    return left_out


__all__ = [
    "ANALYSIS_TABLES",
    "CLASS_ANALYSES",
    "DATABASE_FILE",
    "DERIVED_DIR",
    "analysis_schema",
    "database_holds_its_views",
    "database_is_current",
    "derived_files",
    "derived_part",
    "escape_glob",
    "rebuild_database",
    "register_tables",
    "run_dirs",
    "store_files",
    "view_statements",
]

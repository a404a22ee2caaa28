"""DuckDB views over a store's Parquet files.

The views read every run's files through a glob, so a new run needs no change to the
database; ``refresh_database`` only rewrites it when its views would change (a new store, a
store that moved, a new analysis table), which it tells from a small record of the view
definitions kept beside it.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from trajlens.schema import TABLES

DATABASE_FILE = "trajlens.duckdb"
# Tables written by analyses (stage reports, advantages) live beside the runs.
DERIVED_DIR = "derived"


def table_glob(store: Path, name: str) -> str:
    return str(store.resolve() / "runs" / "*" / name / "**" / "*.parquet")


def view_statements(store: Path) -> list[str]:
    """CREATE VIEW statements for the five tables; paths are the store's, never user text."""
    statements = []
    for name in TABLES:
        # The glob is built from the store path, which DuckDB cannot take as a bound parameter
        # in a view definition; quote it as a SQL string literal.
        literal = "'" + table_glob(store, name).replace("'", "''") + "'"
        statements.append(
            f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet({literal}, hive_partitioning = false, union_by_name = true)"
        )
    return statements


def derived_tables(store: Path) -> dict[str, str]:
    """Analysis tables of a store: name -> Parquet glob (one file per run under ``derived/NAME/``)."""
    derived = store.resolve() / DERIVED_DIR
    if not derived.is_dir():
        return {}
    return {
        path.name: str(path / "*.parquet")
        for path in sorted(derived.iterdir())
        if path.is_dir() and any(path.glob("*.parquet"))
    }


def derived_statements(store: Path) -> list[str]:
    statements = []
    for name, glob in derived_tables(store).items():
        literal = "'" + glob.replace("'", "''") + "'"
        statements.append(f'CREATE OR REPLACE VIEW "{name}" AS SELECT * FROM read_parquet({literal}, union_by_name = true)')
    return statements


def attach_views(connection: duckdb.DuckDBPyConnection, store: Path) -> None:
    for statement in view_statements(store) + derived_statements(store):
        connection.execute(statement)


VIEWS_RECORD = ".trajlens-views.sql"


def refresh_database(store: Path) -> Path:
    """Create or update ``STORE/trajlens.duckdb`` so its views point at this store.

    Raises :class:`StoreError` when the file is locked by another DuckDB session.
    """
    from trajlens.errors import StoreError

    path = store / DATABASE_FILE
    record = store / VIEWS_RECORD
    statements = view_statements(store) + derived_statements(store)
    wanted = ";\n".join(statements) + "\n"
    if path.exists() and record.exists() and record.read_text() == wanted:
        return path
    try:
        connection = duckdb.connect(str(path))
    except duckdb.Error as error:
        reason = str(error).strip().splitlines()[0]
        raise StoreError(f"{path}: cannot update the database ({reason}); close other DuckDB sessions on it") from None
    try:
        for statement in statements:
            connection.execute(statement)
    finally:
        connection.close()
    record.write_text(wanted)
    return path



__all__ = ["DATABASE_FILE", "attach_views", "derived_tables", "refresh_database", "table_glob"]

"""Reading a store: SQL through DuckDB, tables as Polars LazyFrames."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import duckdb
import polars as pl
import pyarrow as pa

from trajlens.errors import ConfigError, StoreError, TrajlensError
from trajlens.schema import SCHEMAS, TABLES
from trajlens.store.database import DERIVED_DIR, attach_views, derived_tables, refresh_database, table_glob


class QueryError(TrajlensError, ValueError):
    """A SQL query that DuckDB rejected."""


class Store:
    """A store directory opened for reading.

    ``store.sql("SELECT ... WHERE run_id = $run", {"run": "r6"})`` returns a Polars
    DataFrame, with parameters bound by DuckDB. ``store.trajectories`` (and ``runs``,
    ``tool_calls``, ``tokens``, ``step_metrics``) are Polars LazyFrames over the same files.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise StoreError(f"{self.path}: no such store directory")
        if not (self.path / "runs").is_dir():
            raise StoreError(f"{self.path}: not a trajlens store (no runs/ inside); create one with `trajlens ingest`")
        self._connection: duckdb.DuckDBPyConnection | None = None

    @property
    def connection(self) -> duckdb.DuckDBPyConnection:
        if self._connection is None:
            self._connection = duckdb.connect()
            attach_views(self._connection, self.path)
        return self._connection

    def sql(self, query: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> pl.DataFrame:
        """Run a query with bound parameters (``$name`` with a mapping, ``?`` with a sequence)."""
        try:
            relation = self.connection.sql(query, params=params or None)
            return pl.DataFrame() if relation is None else relation.pl()
        except duckdb.Error as error:
            first_line = str(error).strip().splitlines()[0]
            raise QueryError(f"query failed: {first_line}") from None
        except (pl.exceptions.PolarsError, pa.ArrowException) as error:
            first_line = str(error).strip().splitlines()[0]
            raise QueryError(f"query result has a column Polars cannot hold: {first_line}") from None

    def table(self, name: str) -> pl.LazyFrame:
        if name in SCHEMAS:
            return pl.scan_parquet(
                table_glob(self.path, name), hive_partitioning=False, schema=pl.Schema(pl.from_arrow(SCHEMAS[name].empty_table()).schema)
            )
        derived = derived_tables(self.path)
        if name in derived:
            return pl.scan_parquet(derived[name])
        raise StoreError(f"{self.path}: no table {name!r} (tables: {', '.join(self.tables())})")

    def tables(self) -> list[str]:
        return [*TABLES, *derived_tables(self.path)]

    def run_ids(self) -> list[str]:
        return sorted(p.name for p in (self.path / "runs").iterdir() if p.is_dir())

    def require_runs(self, run_ids: list[str]) -> None:
        """Raise :class:`ConfigError` naming every id that is not a run of this store."""
        known = self.run_ids()
        missing = [run_id for run_id in run_ids if run_id not in known]
        if missing:
            raise ConfigError([f"run {run_id!r} is not in the store (runs: {', '.join(known) or 'none'})"
                               for run_id in missing])

    def write_derived(self, name: str, run_id: str, frame: pl.DataFrame) -> Path:
        """Save one run's part of an analysis table (classes, stage reports, advantages).

        The table becomes a view of the store named ``name``; writing the same run again
        replaces its part.
        """
        directory = self.path / DERIVED_DIR / name
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"{run_id}.parquet"
        partial = directory / f".{run_id}.parquet.partial"
        new_table = not any(directory.glob("*.parquet"))
        frame.write_parquet(partial)
        partial.replace(target)
        try:
            refresh_database(self.path)
        except StoreError:
            if new_table:  # a table without its view would be invisible to SQL: take it back
                target.unlink()
            raise
        if self._connection is not None:
            attach_views(self._connection, self.path)
        return target

    runs = property(lambda self: self.table("runs"))
    trajectories = property(lambda self: self.table("trajectories"))
    tool_calls = property(lambda self: self.table("tool_calls"))
    tokens = property(lambda self: self.table("tokens"))
    step_metrics = property(lambda self: self.table("step_metrics"))

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r}, runs={self.run_ids()})"


def open_store(path: Path | str) -> Store:
    """Open a store directory written by ``trajlens ingest``."""
    return Store(path)

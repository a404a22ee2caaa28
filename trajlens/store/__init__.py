"""The store: canonical Parquet runs plus a DuckDB database of views over them.

:mod:`~trajlens.store.writer` stages and checks runs, :mod:`~trajlens.store.publish` moves
them into place all or nothing, :mod:`~trajlens.store.database` lists the files as tables, and
:mod:`~trajlens.store.handle` reads them with read-only SQL or Polars.
"""

from trajlens.store.database import DATABASE_FILE, rebuild_database
from trajlens.store.handle import QueryError, Store, in_transaction, open_store
from trajlens.store.layout import RunDirWriter, is_run_dir, table_files
from trajlens.store.writer import StoreWriter, slug

__all__ = [
    "DATABASE_FILE",
    "QueryError",
    "RunDirWriter",
    "Store",
    "StoreWriter",
    "in_transaction",
    "is_run_dir",
    "open_store",
    "rebuild_database",
    "slug",
    "table_files",
]

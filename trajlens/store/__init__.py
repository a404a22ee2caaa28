"""The store: canonical Parquet runs plus a DuckDB database of views over them.

:mod:`~trajlens.store.writer` stages and checks runs, :mod:`~trajlens.store.publish` moves
them into place all or nothing, :mod:`~trajlens.store.database` lists the files as tables, and
:mod:`~trajlens.store.handle` reads them with read-only SQL or Polars;
:mod:`~trajlens.store.integrity` keeps the checksums of every table file and
:mod:`~trajlens.store.verify` checks a store against them and repairs it.
"""

from trajlens.store.database import DATABASE_FILE, rebuild_database
from trajlens.store.handle import QueryError, Store, in_transaction, is_store, open_store
from trajlens.store.layout import RunDirWriter, is_run_dir, table_files
from trajlens.store.verify import repair_store, verify_store
from trajlens.store.writer import StoreWriter, slug

__all__ = [
    "DATABASE_FILE",
    "QueryError",
    "RunDirWriter",
    "Store",
    "StoreWriter",
    "in_transaction",
    "is_run_dir",
    "is_store",
    "open_store",
    "rebuild_database",
    "repair_store",
    "slug",
    "table_files",
    "verify_store",
]

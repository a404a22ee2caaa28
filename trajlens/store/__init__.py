"""The store: canonical Parquet runs plus a DuckDB database of views over them."""

from trajlens.store.database import DATABASE_FILE, refresh_database
from trajlens.store.handle import QueryError, Store, open_store
from trajlens.store.layout import RunDirWriter, is_run_dir, table_files
from trajlens.store.writer import StoreWriter, slug

__all__ = [
    "DATABASE_FILE",
    "QueryError",
    "RunDirWriter",
    "Store",
    "StoreWriter",
    "is_run_dir",
    "open_store",
    "refresh_database",
    "slug",
    "table_files",
]

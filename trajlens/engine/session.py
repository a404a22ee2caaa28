"""A command's engine and store together: :func:`engine_session`.

The store is named by a path or a URI. When it is on this machine's file system (a path, a
``file://`` URI, a network mount) it is also opened as a :class:`~trajlens.store.Store`, so the
tables a command writes are published the usual way (staged, under the store's lock, the
database rebuilt); a store elsewhere (``s3://...``) is read and written through
``pyarrow.fs`` alone.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from trajlens.engine.base import Engine
from trajlens.run.location import StoreLocation
from trajlens.errors import ConfigError


@dataclass
class EngineSession:
    """An open engine, the store's location and, when it is local, the open store."""

    engine: Engine
    location: StoreLocation
    store: Any
    """The open :class:`~trajlens.store.Store`, or None for a store this machine cannot open as a directory."""

    def run_ids(self) -> list[str]:
        return self.store.run_ids() if self.store is not None else self.location.run_ids()

    def require_runs(self, run_ids: list[str]) -> None:
        """Raise :class:`ConfigError` naming every id that is not a run of the store."""
        if self.store is not None:
            self.store.require_runs(run_ids)
            return
        known = self.run_ids()
        missing = [run_id for run_id in run_ids if run_id not in known]
        if missing:
            raise ConfigError([f"run {run_id!r} is not in the store (runs: {', '.join(known) or 'none'})"
                               for run_id in missing])

    def local_store(self, command: str) -> Any:
        """The open store, for commands that need it (SQL over the store); a one-line error otherwise."""
        if self.store is None:
            raise ConfigError([f"{self.location.uri}: {command} with --engine ray needs the store on a path this machine "
                               "can open (a local directory or a mount of the shared storage)"])
        return self.store


@contextlib.contextmanager
def engine_session(name: str, address: str | None, store: str | Path) -> Iterator[EngineSession]:
    """Open engine ``name`` (joining the Ray cluster at ``address``) over the store ``store``;
    the engine is closed when the block ends."""
    from trajlens.engine import open_engine
    from trajlens.store import open_store

    location = StoreLocation.of(store)
    local = location.local_path
    opened = open_store(local) if local is not None else None
    if opened is None:
        location.run_ids()  # a location that is not a store fails here, before a cluster starts
    engine = open_engine(name, address)
    try:
        yield EngineSession(engine, location, opened)
    finally:
        engine.close()
        if opened is not None:
            opened.close()


__all__ = ["EngineSession", "engine_session"]

"""Writing runs into a store directory, all or nothing.

A store is a directory::

    STORE/
      trajlens.duckdb          views over the Parquet below (runs, trajectories, ...)
      runs/<run_id>/...        one run directory each, in the canonical layout

Each run is written into ``STORE/.staging/`` first, checked as a whole, and only then moved
into ``runs/``; a failure removes the staging directory, so nothing half-written is ever
visible. Re-ingesting a source replaces its run with identical files.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import uuid
from pathlib import Path
from typing import Iterator

import duckdb

from trajlens.errors import InputError, StoreError
from trajlens.model import RunData
from trajlens.store.database import DERIVED_DIR, refresh_database
from trajlens.store.layout import RunDirWriter, table_files

RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def slug(text: str) -> str:
    """A run id made from a file or directory name."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")
    return cleaned or "run"


def check_run_id(run_id: str, source: str) -> str:
    if not RUN_ID_PATTERN.match(run_id):
        raise InputError(source, field="run_id", expected="letters, digits, '.', '_' or '-'", found=run_id)
    return run_id


class StoreWriter:
    """Stages runs and publishes them into a store directory together."""

    def __init__(self, store: Path | str) -> None:
        self.store = Path(store)
        if self.store.exists() and not self.store.is_dir():
            raise StoreError(f"{self.store}: expected a store directory, found a file")
        self._created = not self.store.exists()
        self._staging = self.store / ".staging" / uuid.uuid4().hex
        self._staged: dict[str, Path] = {}

    @contextlib.contextmanager
    def stage(self, run_id: str, runs_table, source: str) -> Iterator[RunDirWriter]:
        """Open a :class:`RunDirWriter` for a new run in the staging area."""
        check_run_id(run_id, source)
        if run_id in self._staged:
            raise InputError(source, field="run_id", expected="one source per run id in an ingest",
                             found=f"{run_id!r} twice")
        directory = self._staging / run_id
        with RunDirWriter(directory, runs_table) as writer:
            yield writer
        check_run_dir(directory, source)
        self._staged[run_id] = directory

    def add(self, run: RunData, source: str) -> None:
        with self.stage(run.run_id, run.runs, source) as writer:
            writer.write_run(run)

    def publish(self) -> list[str]:
        """Move every staged run into ``runs/``; analyses of a replaced run are dropped.

        In a store that already has runs, the database views are brought up to date first, so
        that a database locked by another session fails the ingest before anything moved; they
        read the runs through globs and need no change for new runs.
        """
        runs_dir = self.store / "runs"
        runs_dir.mkdir(parents=True, exist_ok=True)
        had_runs = any(runs_dir.iterdir())
        if had_runs:  # views cannot be created over globs that match no file yet
            refresh_database(self.store)
        for run_id, directory in self._staged.items():
            target = runs_dir / run_id
            if target.exists():
                old = self._staging / f".old-{run_id}"
                target.rename(old)
            directory.rename(target)
            for stale in (self.store / DERIVED_DIR).glob(f"*/{run_id}.parquet"):
                stale.unlink()
        self.discard()
        refresh_database(self.store)  # a no-op unless the analysis tables changed
        return list(self._staged)

    def discard(self) -> None:
        shutil.rmtree(self._staging, ignore_errors=True)
        staging_root = self._staging.parent
        if staging_root.exists() and not any(staging_root.iterdir()):
            staging_root.rmdir()
        if self._created and self.store.exists() and not any(self.store.iterdir()):
            self.store.rmdir()  # a failed ingest into a new store leaves no empty folder

    def __enter__(self) -> "StoreWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.discard()


def check_run_dir(directory: Path, source: str) -> None:
    """Whole-run checks that no single file can show: unique keys and known trajectory ids."""
    files = {name: [str(f) for f in table_files(directory, name)]
             for name in ("trajectories", "tool_calls", "tokens", "step_metrics")}
    connection = duckdb.connect()
    try:
        duplicate = connection.execute(
            "SELECT trajectory_id FROM read_parquet($files) GROUP BY trajectory_id HAVING count(*) > 1 LIMIT 1",
            {"files": files["trajectories"]},
        ).fetchone()
        if duplicate:
            raise InputError(source, record=f"trajectories {duplicate[0]}", field="trajectory_id",
                             expected="a unique id", found="a duplicate")
        duplicate = connection.execute(
            "SELECT step, name FROM read_parquet($files) GROUP BY step, name HAVING count(*) > 1 LIMIT 1",
            {"files": files["step_metrics"]},
        ).fetchone()
        if duplicate:
            raise InputError(source, record=f"step_metrics step {duplicate[0]}", field=duplicate[1],
                             expected="one value per step and metric", found="two")
        for name, keys in (("tool_calls", "trajectory_id, call_index"), ("tokens", "trajectory_id")):
            duplicate = connection.execute(
                f"SELECT trajectory_id FROM read_parquet($files) GROUP BY {keys} HAVING count(*) > 1 LIMIT 1",
                {"files": files[name]},
            ).fetchone()
            if duplicate:
                raise InputError(source, record=f"{name} {duplicate[0]}", field=keys.split(", ")[-1],
                                 expected="unique keys", found="a duplicate")
            stray = connection.execute(
                "SELECT c.trajectory_id FROM read_parquet($calls) c ANTI JOIN read_parquet($trajectories) t "
                "USING (trajectory_id) LIMIT 1",
                {"calls": files[name], "trajectories": files["trajectories"]},
            ).fetchone()
            if stray:
                raise InputError(source, record=f"{name} {stray[0]}", field="trajectory_id",
                                 expected="an id present in trajectories", found=stray[0])
    finally:
        connection.close()

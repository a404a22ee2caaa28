"""Publishing into a store: one writer at a time, all or nothing, recoverable after a crash.

Everything a write adds (run directories, analysis-table files) is first written complete
under ``STORE/.staging/<id>/``. Publishing then goes through these steps::

    journal     STORE/.publish.json names every move; written atomically, it is the commit point
    move        per item: the current copy (if any) is renamed aside into staging, then the
                new copy is renamed into place
    drop        files that are no longer valid (analyses of a changed run) are renamed aside
    database    trajlens.duckdb is rebuilt from the files now in place
    finish      the journal is removed, then the staging directory

An error while publishing rolls every move back and leaves the store as it was. A crash (power
loss, SIGKILL) leaves the journal behind; the next writer, or the next reader that can take the
lock, finishes the publish from it (every new copy is complete before the journal exists, so
rolling forward always succeeds). Staging directories that no journal names are left-overs of a
writer that died before its commit point, and are removed by the next writer.

Writers hold ``STORE/.lock`` (``flock``) from their first write to the end, so two ingests into
one store run one after the other; readers never take it except to finish a crashed publish.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from trajlens.errors import StoreError

try:
    import fcntl
except ImportError:  # pragma: no cover - platforms without flock publish without a lock
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = ".lock"
# Rewritten by every publish, so an open Store can tell that the files changed under it.
GENERATION_FILE = ".generation"
JOURNAL_FILE = ".publish.json"
STAGING_DIR = ".staging"


def fault_point(step: str) -> None:
    """Called between publish steps; tests replace it to crash the process at each one."""


def describe_os_error(path: Path, error: OSError, doing: str) -> StoreError:
    """One line naming the store path, what failed and the system's reason."""
    text = str(error).strip()
    reason = error.strerror or (text.splitlines()[0] if text else type(error).__name__)
    where = f" at {error.filename}" if error.filename and str(error.filename) != str(path) else ""
    return StoreError(f"{path}: cannot {doing} ({reason}{where})")


@dataclass
class StoreLock:
    """An exclusive ``flock`` on ``STORE/.lock``."""

    store: Path
    _handle: object | None = None

    def acquire(self, *, wait: bool = True) -> bool:
        try:
            handle = open(self.store / LOCK_FILE, "a+")
        except OSError as error:
            raise describe_os_error(self.store, error, "write to the store") from None
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                handle.close()
                return False
        self._handle = handle
        return True

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing the file releases the flock
            self._handle = None


@dataclass(frozen=True)
class Move:
    """One item to publish: ``new`` (in staging) replaces ``target``; the old copy goes to ``aside``."""

    new: str
    target: str
    aside: str


@dataclass
class Journal:
    """What a publish will do, with paths relative to the store (so a moved store recovers)."""

    staging: str
    moves: list[Move] = field(default_factory=list)
    drops: list[Move] = field(default_factory=list)  # target -> aside only; ``new`` is unused

    def dump(self) -> str:
        return json.dumps({"staging": self.staging,
                           "moves": [vars(m) for m in self.moves],
                           "drops": [vars(m) for m in self.drops]}, indent=1)

    @classmethod
    def load(cls, text: str) -> "Journal":
        data = json.loads(text)
        return cls(data["staging"], [Move(**m) for m in data["moves"]], [Move(**m) for m in data["drops"]])


class Publisher:
    """A staging directory whose contents are published into the store in one step."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.staging = store / STAGING_DIR / uuid.uuid4().hex
        self.journal = Journal(staging=str(self.staging.relative_to(store)))

    def stage_path(self, *parts: str) -> Path:
        """Where to write a new item before it is published."""
        return self.staging.joinpath("new", *parts)

    def replace(self, new: Path, target: str) -> None:
        """Publish ``new`` (a path from :meth:`stage_path`) as ``STORE/target``."""
        aside = self.staging / "old" / target
        self.journal.moves.append(Move(str(new.relative_to(self.store)), target, str(aside.relative_to(self.store))))

    def drop(self, target: str) -> None:
        aside = self.staging / "dropped" / target
        self.journal.drops.append(Move("", target, str(aside.relative_to(self.store))))

    def publish(self, rebuild_database) -> None:
        """Run the publish steps; on any error (or an interrupt) roll back and re-raise."""
        if not self.journal.moves and not self.journal.drops:
            self.discard()
            return
        journal_path = self.store / JOURNAL_FILE
        fault_point("staged")
        write_durably(journal_path, self.journal.dump())
        try:
            fault_point("journal")
            _roll_forward(self.store, self.journal, rebuild_database)
        except BaseException:
            _roll_back(self.store, self.journal)
            journal_path.unlink(missing_ok=True)
            with contextlib.suppress(Exception):
                rebuild_database(self.store)
            self.discard()
            raise
        journal_path.unlink()
        fault_point("journal removed")
        self.discard()

    def discard(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        _remove_if_empty(self.staging.parent)


def _rename(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    source.rename(target)


def _roll_forward(store: Path, journal: Journal, rebuild_database) -> None:
    """Bring every move to its end state; safe to repeat after a crash at any point."""
    for move in journal.moves:
        new, target, aside = store / move.new, store / move.target, store / move.aside
        if not new.exists():
            continue  # already in place
        if target.exists() and not aside.exists():
            _rename(target, aside)
            fault_point(f"aside {move.target}")
        _rename(new, target)
        fault_point(f"placed {move.target}")
    for drop in journal.drops:
        target, aside = store / drop.target, store / drop.aside
        if target.exists():
            _rename(target, aside)
            fault_point(f"dropped {drop.target}")
    rebuild_database(store)
    fault_point("database")
    write_durably(store / GENERATION_FILE, uuid.uuid4().hex)


def _roll_back(store: Path, journal: Journal) -> None:
    """Undo every move whose old copy is aside; safe to repeat."""
    for move in reversed(journal.moves):
        new, target, aside = store / move.new, store / move.target, store / move.aside
        if not new.exists() and target.exists():
            _rename(target, new)
        if aside.exists():
            _rename(aside, target)
    for drop in journal.drops:
        target, aside = store / drop.target, store / drop.aside
        if aside.exists() and not target.exists():
            _rename(aside, target)


def recover(store: Path, rebuild_database) -> list[str]:
    """Finish a publish a crash interrupted, and remove staging left by dead writers.

    The caller holds the store lock. Returns what it did, a sentence each (none: nothing was
    left over)."""
    journal_path = store / JOURNAL_FILE
    done = []
    if journal_path.exists():
        try:
            journal = Journal.load(journal_path.read_text())
        except (ValueError, KeyError, TypeError):
            journal = None  # a journal torn before its rename never existed: nothing was moved
        if journal is not None:
            _roll_forward(store, journal, rebuild_database)
            done.append(f"{store}: finished a write that was interrupted after it began to publish")
        journal_path.unlink()
    staging_root = store / STAGING_DIR
    if staging_root.is_dir():
        left = sorted(staging_root.iterdir())
        for left_over in left:
            _remove(left_over)
        _remove_if_empty(staging_root)
        if left:
            names = ", ".join(str(path.relative_to(store)) for path in left)
            done.append(f"{store}: removed what a write that did not finish had staged ({names})")
    for partial in store.glob(".*.partial"):  # a journal, database or record cut short while written
        if partial.is_file():  # a folder is another writer's: a report written beside the runs
            partial.unlink()
    return done


def generation(store: Path) -> str:
    """A token that changes with every publish into ``store``."""
    try:
        return (store / GENERATION_FILE).read_text()
    except OSError:
        return ""


def write_durably(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temporary file, fsync, rename)."""
    partial = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.partial")
    try:
        with open(partial, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        partial.rename(path)
    finally:
        partial.unlink(missing_ok=True)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _remove_if_empty(directory: Path) -> None:
    with contextlib.suppress(OSError):
        directory.rmdir()


@contextlib.contextmanager
def locked(store: Path) -> Iterator[None]:
    """Hold the store lock for the duration of the block."""
    lock = StoreLock(store)
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


__all__ = ["GENERATION_FILE", "JOURNAL_FILE", "LOCK_FILE", "STAGING_DIR", "Publisher", "StoreLock", "fault_point", "generation", "locked", "recover",
           "write_durably"]

"""Writing runs into a store directory, all or nothing.

A store is a directory::

    STORE/
      trajlens.duckdb          views over the Parquet below (runs, trajectories, ...)
      runs/<run_id>/...        one run directory each, in the canonical layout, with
                               ingest.json (the source it came from and a hash of its content)
      derived/<table>/<run_id>.parquet   analysis tables (classes, stage reports, advantages)

Every run of an ingest is written into ``STORE/.staging/`` first and checked as a whole; only
then are they published together (:mod:`trajlens.store.publish`), so an ingest that fails on
its second run leaves the first where it was. Re-ingesting a source whose content is unchanged
changes nothing and keeps the run's analyses; a changed run replaces the old one and drops its
analyses, and says so. A run id that the store already holds for a different source is
refused unless ``replace=True``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import duckdb
import pyarrow as pa

from trajlens.errors import InputError, RunConflictError, StoreError
from trajlens.rows import RunData
from trajlens.store.database import DERIVED_DIR, RUNS_DIR, derived_files, rebuild_database, rewriting_commands
from trajlens.store.integrity import DamagedStoreError, checksum_file, hash_run, size_problem
from trajlens.store.layout import (
    MAX_RUN_ID_LENGTH, PACK_BYTES, RUN_ID_PATTERN, RUN_ID_RULE, RunDirWriter, read_parquet_file, table_files,
)
from trajlens.store.publish import LOCK_FILE, Publisher, StoreLock, describe_os_error, recover

RUN_RECORD = "ingest.json"


def slug(text: str) -> str:
    """A run id made from a file or directory name; long names keep a hash of the full name."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    if len(cleaned) > MAX_RUN_ID_LENGTH:
        digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        cleaned = cleaned[: MAX_RUN_ID_LENGTH - 9].rstrip("-._") + "-" + digest
    return cleaned or "run"


def check_run_id(run_id: object, source: str) -> str:
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.fullmatch(run_id):
        raise InputError(source, field="run_id", expected=RUN_ID_RULE, found=repr(run_id))
    return run_id


SOURCE_SEPARATOR = ", "
"""What separates the files of a run read from several (a run record's ``source``)."""


def joined_source(parts: Iterable[Path | str]) -> str:
    """The ``source`` of a run read from ``parts`` (files or folders): their paths, in order."""
    return SOURCE_SEPARATOR.join(map(str, parts))


def source_parts(source: str) -> list[str]:
    """The paths a run's ``source`` names (:func:`joined_source`), empty parts left out."""
    return [part for part in source.split(SOURCE_SEPARATOR) if part]


def source_identity(source: str) -> str:
    """A source as the absolute paths it names, so ``./a`` and ``a`` are one source."""
    return joined_source(str(Path(part).resolve()) if part and Path(part).exists() else part
                         for part in source.split(SOURCE_SEPARATOR))


def check_outside_inputs(store: Path, sources: Iterable[Path | str]) -> None:
    """Refuse a store that is, or lies inside, one of the inputs (or an input inside the store)."""
    where = store.resolve()
    for source in sources:
        path = Path(source)
        if not path.exists():
            continue
        resolved = path.resolve()
        if where == resolved or resolved in where.parents:
            raise StoreError(f"{store}: the store would be written inside the input {source}; choose a store folder "
                             "outside every input")
        if where in resolved.parents:
            raise StoreError(f"{source}: the input lies inside the store {store}; ingest from outside the store")


def content_hash(run_dir: Path) -> str:
    """SHA-256 over a run directory's Parquet files (relative path and bytes)."""
    return hash_run(run_dir).content_hash


def source_fingerprint(source: str | None) -> str | None:
    """A digest of the size and modification time of every file a source names (its
    folders walked): it changes when the source does, without reading a byte of it. None
    when a part of the source no longer exists."""
    return source_state(source)[0]


def source_state(source: str | None) -> tuple[str | None, bool]:
    """:func:`source_fingerprint`, and whether a folder the source names holds a link to a
    folder (the fingerprint does not look behind it, while ingest reads a table folder through
    its link), from one walk of the source."""
    if not source:
        return None, False
    digest = hashlib.sha256()
    linked = False
    for part in source.split(SOURCE_SEPARATOR):
        path = Path(part)
        if not path.exists():
            return None, linked
        files, links = _source_files(path)
        linked = linked or links
        for file in files:
            stat = file.stat()
            digest.update(f"{file}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest(), linked


def _source_files(path: Path) -> tuple[list[Path], bool]:
    """The files under ``path`` (itself, when a file) in path order, links to folders not
    followed; and whether there was such a link."""
    if not path.is_dir():
        return ([path] if path.exists() else []), False
    found: list[Path] = []
    linked = False
    for root, folders, names in os.walk(path):
        linked = linked or any(os.path.islink(os.path.join(root, folder)) for folder in folders)
        found.extend(file for name in names if (file := Path(root) / name).is_file())
    return sorted(found), linked


@dataclass(frozen=True)
class RunRecord:
    """What ``runs/<id>/ingest.json`` says: where the run came from and a hash of its files.

    Two records are the same run when source and ``content_hash`` agree; the rest is what
    ``trajlens verify`` checks and repairs with: each file's SHA-256, a fingerprint of the
    source when ingested, and the ingest call that wrote the run (its sources and options).
    """

    source: str | None
    content_hash: str
    files: dict[str, str] | None = field(default=None, compare=False)
    source_fingerprint: str | None = field(default=None, compare=False)
    call: dict[str, Any] | None = field(default=None, compare=False)
    self_contained: bool = field(default=False, compare=False)
    """Written from its source alone (a run directory, nothing joined from the call's other
    sources): only then does an unchanged ``source_fingerprint`` mean unchanged content."""
    sizes: dict[str, int] | None = field(default=None, compare=False)
    """Each file's size in bytes, checked (one stat per file) whenever the store opens."""

    @classmethod
    def read(cls, run_dir: Path) -> "RunRecord":
        try:
            data = json.loads((run_dir / RUN_RECORD).read_text())
            files = data.get("files")
            call = data.get("call")
            return cls(str(data["source"]), str(data["content_hash"]),
                       {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else None,
                       data.get("source_fingerprint") if isinstance(data.get("source_fingerprint"), str) else None,
                       call if isinstance(call, dict) else None, data.get("self_contained") is True)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return cls(None, content_hash(run_dir))  # a store written before records: source unknown

    def write(self, run_dir: Path) -> None:
        data: dict[str, Any] = {"source": self.source, "content_hash": self.content_hash}
        if self.files is not None:
            data["files"] = self.files
        if self.sizes is not None:
            data["sizes"] = self.sizes
        if self.source_fingerprint is not None:
            data["source_fingerprint"] = self.source_fingerprint
        if self.call is not None:
            data["call"] = self.call
        if self.self_contained:
            data["self_contained"] = True
        (run_dir / RUN_RECORD).write_text(json.dumps(data, indent=1) + "\n")


def recorded_sources(store: Path) -> list[Path]:
    """The files and folders the store's runs were ingested from, as their records name them:
    each run's own source and the other inputs of the ingest call that wrote it (absolute paths
    only; a generated run's source names no file). An output written over or into one would
    change an input. Reads the small records alone, never the runs."""
    found: dict[str, None] = {}
    try:
        run_dirs = sorted((store / RUNS_DIR).iterdir())
    except OSError:
        return []
    for run_dir in run_dirs:
        try:
            data = json.loads((run_dir / RUN_RECORD).read_text())
            call = data.get("call") if isinstance(data.get("call"), dict) else {}
            named = [data.get("source"), *(call.get("sources") or [])]
        except (OSError, ValueError, AttributeError, TypeError):
            continue
        found.update((name, None) for name in named if isinstance(name, str) and os.path.isabs(name))
    return [Path(name) for name in found]


@dataclass(frozen=True)
class StagedRun:
    directory: Path
    record: RunRecord


class StoreWriter:
    """Stages runs and publishes them into a store directory together.

    ``sources`` (the inputs of the ingest) are checked first: a store inside an input is
    refused before anything is written. ``replace`` lets a run take the id of a run from a
    different source. ``notes`` lists, after :meth:`publish`, what an interrupted write had left
    and this one finished or removed, the runs kept unchanged and the analyses dropped because
    their run changed.
    """

    def __init__(self, store: Path | str, *, sources: Iterable[Path | str] = (), replace: bool = False) -> None:
        self.store = Path(store)
        if self.store.exists() and not self.store.is_dir():
            raise StoreError(f"{self.store}: expected a store directory, found a file")
        check_outside_inputs(self.store, sources)
        self.replace = replace
        self.notes: list[str] = []
        self.unchanged: list[str] = []
        """Runs whose source had not changed: kept as they were, with their analyses."""
        self._created = not self.store.exists()
        self._lock: StoreLock | None = None
        self._publisher: Publisher | None = None
        self._staged: dict[str, StagedRun] = {}
        self._seen: list[str] = []
        """Run ids in the order the call met them, staged or kept: the order of the notes."""
        self._moved: dict[str, str] = {}
        """Run id -> the source the store recorded for it, which no longer exists: a run whose
        source moved is taken from its new place when its content is the same."""
        self.call: dict[str, Any] | None = None
        """The ingest call (sources and options), recorded with each run so that
        ``trajlens verify --repair`` can write the run again from its source."""

    def _open(self) -> Publisher:
        """Take the store lock, finish any crashed publish, clear stale staging (first write only)."""
        if self._publisher is None:
            try:
                self.store.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise describe_os_error(self.store, error, "create the store") from None
            lock = StoreLock(self.store)
            lock.acquire()
            self._lock = lock
            try:
                self.notes.extend(f"note: {done}" for done in recover(self.store, rebuild_database))
            except OSError as error:
                raise describe_os_error(self.store, error, "write to the store") from None
            self._publisher = Publisher(self.store)
        return self._publisher

    @contextlib.contextmanager
    def stage(self, run_id: str, runs_table, source: str, *, self_contained: bool = False) -> Iterator[RunDirWriter]:
        """Open a :class:`RunDirWriter` for a new run in the staging area (packing tiny steps,
        :data:`~trajlens.store.layout.PACK_BYTES`). ``self_contained``: the caller writes the run
        from ``source`` alone (see :attr:`RunRecord.self_contained`).

        The source's fingerprint is taken before the caller reads it, so a file that changes
        while it is read makes the next ingest read the source again."""
        self._check_new(run_id, source)
        identity = source_identity(source)
        fingerprint, linked = source_state(identity)
        publisher = self._open()
        self._check_conflict(run_id, identity, source)
        directory = publisher.stage_path(RUNS_DIR, run_id)
        try:
            with RunDirWriter(directory, runs_table, pack_bytes=PACK_BYTES) as writer:
                yield writer
            check_run_dir(directory, source)
            hashes = hash_run(directory)
            record = RunRecord(identity, hashes.content_hash, hashes.files, fingerprint, self.call,
                               self_contained and fingerprint is not None and not linked, hashes.sizes)
            record.write(directory)
        except OSError as error:
            if isinstance(error, StoreError):
                raise
            raise describe_os_error(self.store, error, f"stage run {run_id} from {source}") from None
        self._staged[run_id] = StagedRun(directory, record)
        self._seen.append(run_id)

    def keep_unchanged(self, run_id: str, source: str) -> bool:
        """Whether the store already holds ``run_id`` as an ingest with this writer's ``call``
        wrote it from ``source`` alone (:attr:`RunRecord.self_contained`), and ``source`` has not
        changed since (the sizes and modification times of its files, :func:`source_fingerprint`;
        a source with a linked folder, or ``replace``, is always read).
        Then the run is kept as it was, with its analyses, without reading the source again, as
        :meth:`publish` keeps a staged run whose content came out the same; the caller writes
        nothing for it."""
        self._check_new(run_id, source)
        if self.call is None or self.replace or not (self.store / RUNS_DIR / run_id / RUN_RECORD).is_file():
            return False
        self._open()  # the store lock: the record is read as no other writer changes it
        held = RunRecord.read(self.store / RUNS_DIR / run_id)
        identity = source_identity(source)
        if not held.self_contained or held.source != identity or held.call != self.call \
                or held.source_fingerprint is None:
            return False
        fingerprint, linked = source_state(identity)
        if linked or fingerprint != held.source_fingerprint:
            return False
        self._seen.append(run_id)  # kept: seen, never staged
        return True

    def _check_new(self, run_id: str, source: str) -> None:
        """Refuse an invalid run id, a source inside the store and a second source of one run id."""
        check_run_id(run_id, source)
        check_outside_inputs(self.store, source_parts(source))
        if run_id in self._seen:
            raise InputError(source, field="run_id", found=f"{run_id!r} twice",
                             expected="one source per run id in an ingest (ingest them one at a time with --run "
                                      "NAME, or pass the folders that name their runs)")

    def _check_conflict(self, run_id: str, identity: str, source: str) -> None:
        existing = self.store / RUNS_DIR / run_id
        if self.replace or not existing.is_dir():
            return
        held = RunRecord.read(existing).source
        if held is None or held == identity:
            return
        if not Path(held).exists() and not any(Path(part).exists() for part in source_parts(held)):
            self._moved[run_id] = held  # moved, or gone: publish compares the content
            return
        raise RunConflictError(f"{source}: run id {run_id!r} is already in {self.store} from another source "
                               f"({held}); choose another id with --run, or pass --replace to replace it")

    def _check_moved(self) -> None:
        """Refuse a run whose recorded source no longer exists when what was read in its stead holds
        other content: it is another run under the same id, not the same one moved."""
        for run_id, held in self._moved.items():
            staged = self._staged.get(run_id)
            if staged is None or _same_but_where(self.store / RUNS_DIR / run_id, staged):
                continue
            raise RunConflictError(
                f"{staged.record.source}: run id {run_id!r} is already in {self.store} from {held}, which no longer "
                "exists, and this source holds other data; choose another id with --run, or pass --replace to "
                "replace it")

    def add(self, run: RunData, source: str) -> None:
        """Stage a loaded log's run, the paths it records where it read its rows written as the
        absolute paths ``ingest.json`` records (:func:`read_where_absolute`)."""
        run = read_where_absolute(run, source)
        with self.stage(run.run_id, run.runs, source) as writer:
            writer.write_run(run)

    def publish(self) -> list[str]:
        """Publish every staged run together; analyses of a run whose content changed are dropped.
        With nothing staged (every run kept unchanged) the store is left as it is."""
        kept = "is unchanged: kept as it was, with its analyses"
        if not self._staged:
            self.notes.extend(f"run {run_id} {kept}" for run_id in self._seen)
            self.unchanged.extend(self._seen)
            self._release()
            return []
        self._check_moved()
        publisher = self._open()
        try:
            for run_id in self._seen:
                if run_id not in self._staged:  # kept unread
                    self.notes.append(f"run {run_id} {kept}")
                    self.unchanged.append(run_id)
                    continue
                staged = self._staged[run_id]
                existing = self.store / RUNS_DIR / run_id
                if existing.is_dir():
                    held = RunRecord.read(existing)
                    if held == staged.record:
                        self.notes.append(f"run {run_id} {kept}")
                        self.unchanged.append(run_id)
                        if not _same_record(held, staged.record):
                            # the same files, recorded anew: the source as now read, by this call
                            publisher.replace(staged.directory, f"{RUNS_DIR}/{run_id}")
                        continue
                    if run_id in self._moved:  # the same content as read elsewhere (_check_moved)
                        self.notes.append(f"run {run_id} moved from {self._moved[run_id]} to {staged.record.source}: "
                                          "the same content, kept with its analyses")
                    elif held.content_hash != staged.record.content_hash:
                        dropped = [name for name in derived_files(self.store)
                                   if (self.store / DERIVED_DIR / name / f"{run_id}.parquet").exists()]
                        for name in dropped:
                            part = self.store / DERIVED_DIR / name / f"{run_id}.parquet"
                            publisher.drop(f"{DERIVED_DIR}/{name}/{run_id}.parquet")
                            if checksum_file(part).exists():
                                publisher.drop(f"{DERIVED_DIR}/{name}/{checksum_file(part).name}")
                        if dropped:
                            again = " and ".join(rewriting_commands(dropped, self.store, run_id))
                            self.notes.append(f"run {run_id} changed: dropped its analyses {', '.join(dropped)}; "
                                              f"run {again} again")
                publisher.replace(staged.directory, f"{RUNS_DIR}/{run_id}")
            publisher.publish(rebuild_database)
        except OSError as error:
            if isinstance(error, StoreError):
                raise
            raise describe_os_error(self.store, error, "publish the ingested runs") from None
        finally:
            self._release()
        return list(self._staged)

    def discard(self) -> None:
        if self._publisher is not None:
            self._publisher.discard()
        self._release()
        if self._created and self.store.is_dir():
            # a failed ingest into a new store leaves no folder behind
            with contextlib.suppress(OSError):
                (self.store / LOCK_FILE).unlink()
            with contextlib.suppress(OSError):
                self.store.rmdir()

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> "StoreWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.discard()
        else:
            self._release()


def _same_but_where(existing: Path, staged: StagedRun) -> bool:
    """Whether a staged run holds what the store holds for its id but for where it was read from:
    every file the same, save those of the tables whose ``source`` column names the files a row
    was read from, as they were given (:data:`WHERE_READ`), which are compared without it."""
    held = RunRecord.read(existing)
    if held.content_hash == staged.record.content_hash:
        return True
    if held.files is None or staged.record.files is None or held.files.keys() != staged.record.files.keys():
        return False
    for name, digest in held.files.items():
        if digest == staged.record.files[name]:
            continue
        if name.split("/")[0] not in WHERE_READ or \
                not _read_nowhere(existing / name).equals(_read_nowhere(staged.directory / name)):
            return False
    return True


WHERE_READ: tuple[str, ...] = ("runs", "trajectories")
"""Tables whose ``source`` column says where the loader read a row (a file as given, with its line
or row): a log moved elsewhere changes it and nothing else."""


def read_where_absolute(run: RunData, source: str) -> RunData:
    """``run`` with the ``source`` columns of :data:`WHERE_READ` naming the source's paths as
    :func:`source_identity` gives them: a log read as ``logs/a`` (``logs/a/1.jsonl:3``) holds
    what it holds when read as ``./logs/a`` or ``/home/x/logs/a``. So an unchanged source ingested
    again by another spelling keeps its analyses, and ``verify --repair``, which runs the recorded
    (absolute) call, writes the same files. Values that do not start with a path of the source
    (a file named relative to the source folder) are kept."""
    spelled: dict[str, str] = {}
    for part in source_parts(source):
        identity = source_identity(part)
        for spelling in (part.rstrip(os.sep) or part, str(Path(part))):
            if spelling != identity:
                spelled[spelling] = identity

    def absolute(value: str | None) -> str | None:
        if value is None:
            return None
        for spelling, identity in spelled.items():
            if value == spelling or value.startswith((spelling + os.sep, spelling + ":")):
                return identity + value[len(spelling):]
        return value

    if not spelled:
        return run
    tables: dict[str, pa.Table] = {}
    for name in WHERE_READ:
        table = run.table(name)
        column = table.schema.get_field_index("source")
        values = table.column(column).to_pylist()
        # the run's source is the whole source, every part of it; a trajectory's, one file of it
        rewritten = [source_identity(v) if name == "runs" and v is not None else absolute(v) for v in values]
        tables[name] = table.set_column(column, table.schema.field(column), pa.array(rewritten, pa.string()))
    return dataclasses.replace(run, **tables)


def _read_nowhere(path: Path) -> Any:
    table = read_parquet_file(path)
    return table.drop_columns(["source"]) if "source" in table.column_names else table


def _same_record(held: RunRecord, staged: RunRecord) -> bool:
    """Whether two records of the same content also agree on how it was ingested."""
    return (held.source_fingerprint, held.call, held.self_contained) == \
        (staged.source_fingerprint, staged.call, staged.self_contained)


CHECKED_KEYS: dict[str, tuple[str, ...]] = {
    "trajectories": ("trajectory_id", "step"),
    "tool_calls": ("trajectory_id", "call_index", "step"),
    "tokens": ("trajectory_id", "step"),
    "step_metrics": ("step", "name"),
}
"""The columns :func:`check_run_dir` reads of each table."""


def check_run_dir(directory: Path, source: str) -> None:
    """Whole-run checks that no single file can show: unique keys, known trajectory ids, and
    each call and token array at the step of its trajectory."""
    import pyarrow.dataset as ds

    from trajlens.schema import SCHEMAS

    connection = duckdb.connect()
    try:
        for name, keys in CHECKED_KEYS.items():
            files = [str(path) for path in table_files(directory, name)]
            # Read as datasets of listed files (no path is parsed as a glob or a URL), the key
            # columns once: every check below reads them again, never a token array or a text.
            dataset = ds.dataset(files, format="parquet", schema=SCHEMAS[name])
            connection.register(name, dataset.to_table(columns=list(keys)))
        duplicate = connection.execute(
            "SELECT trajectory_id FROM trajectories GROUP BY trajectory_id HAVING count(*) > 1 LIMIT 1").fetchone()
        if duplicate:
            raise InputError(_file_holding("trajectories", {"trajectory_id": duplicate[0]}, source),
                             record=f"trajectories {duplicate[0]}", field="trajectory_id",
                             expected="a unique id", found="a duplicate")
        duplicate = connection.execute(
            "SELECT step, name FROM step_metrics GROUP BY step, name HAVING count(*) > 1 LIMIT 1").fetchone()
        if duplicate:
            raise InputError(_file_holding("step_metrics", {"step": duplicate[0], "name": duplicate[1]}, source),
                             record=f"step_metrics step {duplicate[0]}", field=duplicate[1],
                             expected="one value per step and metric", found="two")
        for name, keys in (("tool_calls", "trajectory_id, call_index"), ("tokens", "trajectory_id")):
            duplicate = connection.execute(
                f"SELECT {keys} FROM {name} GROUP BY {keys} HAVING count(*) > 1 LIMIT 1").fetchone()
            if duplicate:
                raise InputError(_file_holding(name, dict(zip(keys.split(", "), duplicate)), source),
                                 record=f"{name} {duplicate[0]}", field=keys.split(", ")[-1],
                                 expected="unique keys", found="a duplicate")
            stray = connection.execute(
                f"SELECT c.trajectory_id FROM {name} c ANTI JOIN trajectories t USING (trajectory_id) LIMIT 1"
            ).fetchone()
            if stray:
                raise InputError(_file_holding(name, {"trajectory_id": stray[0]}, source),
                                 record=f"{name} {stray[0]}", field="trajectory_id",
                                 expected="an id present in trajectories", found=stray[0])
            elsewhere = connection.execute(
                f"SELECT c.trajectory_id, c.step, t.step FROM {name} c JOIN trajectories t USING (trajectory_id) "
                "WHERE c.step IS DISTINCT FROM t.step LIMIT 1").fetchone()
            if elsewhere:
                raise InputError(_file_holding(name, {"trajectory_id": elsewhere[0], "step": elsewhere[1]}, source),
                                 record=f"{name} {elsewhere[0]}", field="step",
                                 expected=f"{elsewhere[2]} (the step of its trajectory)", found=str(elsewhere[1]))
    finally:
        connection.close()


def _file_holding(name: str, key: dict[str, Any], source: str) -> str:
    """For an error of :func:`check_run_dir`: the last file of table ``name`` in the run
    directory ``source`` holding a row with ``key`` (the second copy of a duplicate; the file of
    a stray row), else ``source`` (a log of another format, or several). The source's files, not
    ``directory``'s: a run staged for the store is packed into files of its own, which name
    nothing the user has. Read only on the way to an error, the key columns."""
    import functools

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    holding = source
    root = Path(source)
    for path in table_files(root, name) if root.is_dir() else []:
        rows = pq.read_table(path, columns=list(key))
        if pc.any(functools.reduce(pc.and_, (pc.equal(rows.column(c), v) for c, v in key.items()))).as_py():
            holding = str(path)
    return holding


@dataclass(frozen=True)
class RecordedFiles:
    """What a store checks of a run whenever it opens, read from its ``ingest.json`` alone (one
    small read, never the run's files)."""

    sizes: dict[str, int | None]
    """The files (paths inside the run directory) the record lists, with the size it records for
    each (None: a store written before sizes were recorded); none when it lists none or cannot
    be read (a store written before per-file records)."""
    content_hash: str | None
    """What changes when an ingest replaces the run; None without a readable record."""

    @classmethod
    def read(cls, run_dir: Path) -> "RecordedFiles":
        try:
            data = json.loads((run_dir / RUN_RECORD).read_text())
            files, sizes, whole = data.get("files"), data.get("sizes"), data.get("content_hash")
        except (OSError, ValueError, AttributeError):
            return cls({}, None)
        sizes = sizes if isinstance(sizes, dict) else {}
        listed = {str(name): size if isinstance(size := sizes.get(name), int) else None
                  for name in files} if isinstance(files, dict) else {}
        return cls(listed, whole if isinstance(whole, str) else None)


def require_recorded_files(store: Path, run_dir: Path, recorded: RecordedFiles | None = None) -> None:
    """A :class:`DamagedStoreError` for the first file the run's ``ingest.json`` records (as
    ``recorded`` holds it, when the caller read it) that the disk lacks, or holds at another size
    than recorded: every read lists the files on disk, so a deleted one would take its rows out
    of every answer without a word, and a rewritten one would change them. One stat per file
    (``trajlens verify`` reads every byte)."""
    for name, size in (recorded or RecordedFiles.read(run_dir)).sizes.items():
        problem = size_problem(run_dir / name, size)
        if problem is not None:
            reason = "missing, though the run's ingest.json records it" if problem == "missing" else problem
            raise DamagedStoreError(store, store / RUNS_DIR / run_dir.name / name, reason,
                                    readable=problem.startswith("changed"))

__all__ = ["MAX_RUN_ID_LENGTH", "RUN_ID_PATTERN", "SOURCE_SEPARATOR", "RunRecord", "StoreWriter", "check_outside_inputs", "check_run_id",
           "RecordedFiles", "content_hash", "joined_source", "require_recorded_files", "slug", "source_fingerprint",
           "source_identity", "source_parts"]

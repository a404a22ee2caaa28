"""Checking a store against what was recorded when it was written, and repairing what can be.

:func:`verify_store` looks at, in order:

- a publish a crash interrupted (``.publish.json``) and staging a dead writer left behind;
- every run: its ``ingest.json``, then each Parquet file against the SHA-256 recorded there
  (a file cut short, deleted, replaced, or added by hand), and whether each file reads;
- every analysis table's part against the checksum beside it, whether it reads, and whether
  its run is still in the store;
- ``trajlens.duckdb``: whether its views list exactly the store's files;
- each run's source: whether it still exists and is unchanged since the ingest (a note, not a
  problem: the store does not depend on it, but ``--repair`` does).

Each finding is one line. :func:`repair_store` then, holding the store lock: finishes or
clears an interrupted write; writes a damaged run again from its source through the ingest
call recorded with it, and publishes it only when the new files hash to the recorded
``content_hash`` (the run is then exactly what it was), and removes its analyses, which may
have been computed from the damaged files (their commands compute them again); removes a
damaged analysis part (its command computes it again; the options it ran with are not
recorded); and rebuilds the views. What it cannot repair it says, with what to do instead.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from trajlens.errors import StoreError, TrajlensError
from trajlens.store.database import (
    ANALYSIS_TABLES,
    DATABASE_FILE,
    DERIVED_DIR,
    RUNS_DIR,
    database_holds_its_views,
    derived_files,
    rebuild_database,
    rewriting_commands,
    run_dirs,
)
from trajlens.store.handle import is_store
from trajlens.store.integrity import CHECKSUM_SUFFIX, checksum_file, file_sha256, parquet_problem, read_checksum, run_files
from trajlens.store.publish import JOURNAL_FILE, STAGING_DIR, Publisher, StoreLock, recover
from trajlens.store.writer import RUN_RECORD, RunRecord, source_fingerprint


@dataclass(frozen=True)
class Finding:
    """One thing wrong with a store (or, for a note, worth knowing), as one line."""

    path: str
    """The file or folder, relative to the store."""
    message: str
    run_id: str | None = None
    table: str | None = None
    """For an analysis table's part: the table."""
    kind: str = "problem"
    """``problem`` (counted in the exit status) or ``note``."""

    def line(self, store: Path) -> str:
        prefix = "note: " if self.kind == "note" else ""
        return f"{prefix}{store / self.path}: {self.message}"


@dataclass
class Verification:
    """What :func:`verify_store` found."""

    store: Path
    findings: list[Finding] = field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        return [finding for finding in self.findings if finding.kind == "problem"]

    @property
    def damaged_runs(self) -> list[str]:
        return sorted({f.run_id for f in self.problems if f.run_id is not None and f.table is None})

    @property
    def damaged_parts(self) -> list[Finding]:
        return [f for f in self.problems if f.table is not None]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_store(store: Path | str, run: str | None = None, *, locked: bool = False) -> Verification:
    """Check ``store`` (only run ``run`` and its analyses, when given); see the module docstring.

    Holds the store lock while it checks (``locked``: the caller holds it), so no write changes
    the files under it. When another command holds it, the check goes on, with a note, and the
    staging files of the write under way are not counted as left over by an interrupted one."""
    store = Path(store)
    if not store.is_dir() or not is_store(store):
        raise _not_a_store(store)
    lock = StoreLock(store)
    try:
        held = locked or lock.acquire(wait=False)
    except StoreError:
        held = True  # a store this user cannot write: no writer of theirs can be under way
    try:
        return _verify(store, run, writing=not held)
    finally:
        lock.release()


def _not_a_store(store: Path) -> StoreError:
    """The error for a folder that is no store; it says so when a first write into it was
    interrupted, leaving only what it had staged (which the next ingest removes)."""
    if store.is_dir() and ((store / STAGING_DIR).is_dir() or (store / JOURNAL_FILE).exists()):
        return StoreError(f"{store}: not a trajlens store yet: the first write into it did not finish, and left "
                          f"{STAGING_DIR}; `trajlens ingest LOGS --store {store}` removes it and writes the runs")
    return StoreError(f"{store}: not a trajlens store; make one with `trajlens ingest LOGS --store {store}`")


def _verify(store: Path, run: str | None, writing: bool) -> Verification:
    result = Verification(store)
    found = result.findings
    if writing:
        found.append(Finding(".lock", "another trajlens command is writing to the store now; what it writes may be "
                             "seen half done: verify again once it ends", kind="note"))
    elif run is None:
        found.extend(_interrupted_writes(store))
    runs = {path.name: path for path in run_dirs(store)}
    if run is not None and run not in runs:
        raise StoreError(f"{store}: no run {run!r} (runs: {', '.join(runs) or 'none'})")
    for run_id, run_dir in runs.items():
        if run is None or run_id == run:
            found.extend(_check_run(store, run_id, run_dir))
    found.extend(_check_analyses(store, set(runs), run))
    if run is None and not any(f.kind == "problem" and f.path != DATABASE_FILE for f in found):
        if not database_holds_its_views(store):
            found.append(Finding(DATABASE_FILE, "its views do not list the store's files as they are now; "
                                 "--repair writes them again"))
    return result


def _interrupted_writes(store: Path) -> list[Finding]:
    found = []
    if (store / JOURNAL_FILE).exists():
        found.append(Finding(JOURNAL_FILE, "a publish was interrupted (a crash or a kill); the next write, or "
                             "--repair, finishes it"))
    staging = store / STAGING_DIR
    if staging.is_dir():
        for left in sorted(staging.iterdir()):
            found.append(Finding(str(left.relative_to(store)), "left over by a write that did not finish; "
                                 "--repair removes it"))
    for partial in sorted(p for p in store.glob(".*.partial") if p.is_file()):
        found.append(Finding(partial.name, "a file cut short while written; --repair removes it"))
    return found


def _check_run(store: Path, run_id: str, run_dir: Path) -> list[Finding]:
    where = f"{RUNS_DIR}/{run_id}"
    record_path = run_dir / RUN_RECORD
    if not record_path.is_file():
        return [Finding(f"{where}/{RUN_RECORD}", "missing: the run's files cannot be checked "
                        "(ingest the run again to record it)", run_id)]
    record = RunRecord.read(run_dir)
    if record.source is None:
        return [Finding(f"{where}/{RUN_RECORD}", "unreadable: the run's files cannot be checked", run_id)]
    found: list[Finding] = []
    present = {path.relative_to(run_dir).as_posix(): path for path in run_files(run_dir)}
    if record.files is None:  # written before per-file checksums: the whole run's hash only
        from trajlens.store.writer import content_hash

        if content_hash(run_dir) != record.content_hash:
            found.append(Finding(where, "its files changed since ingest (the run's content_hash differs)", run_id))
    else:
        for name, digest in sorted(record.files.items()):
            path = present.get(name)
            if path is None:
                found.append(Finding(f"{where}/{name}", "deleted (ingest.json records it)", run_id))
                continue
            reason = parquet_problem(path)
            if reason is not None:
                found.append(Finding(f"{where}/{name}", f"cannot be read ({reason})", run_id))
            elif file_sha256(path) != digest:
                found.append(Finding(f"{where}/{name}", "changed since it was written (its SHA-256 differs from "
                                     "ingest.json's)", run_id))
        for name in sorted(set(present) - set(record.files)):
            found.append(Finding(f"{where}/{name}", "not written by ingest (ingest.json does not list it); "
                                 "it is read as part of the run", run_id))
    if record.files is None:
        for name, path in sorted(present.items()):
            reason = parquet_problem(path)
            if reason is not None:
                found.append(Finding(f"{where}/{name}", f"cannot be read ({reason})", run_id))
    found.extend(_check_source(where, run_id, record))
    return found


def _check_source(where: str, run_id: str, record: RunRecord) -> list[Finding]:
    if record.source_fingerprint is None:
        return []
    current = source_fingerprint(record.source)
    if current is None:
        return [Finding(where, f"its source {record.source} no longer exists; the run cannot be written again "
                        "from it", run_id, kind="note")]
    if current != record.source_fingerprint:
        return [Finding(where, f"its source {record.source} changed since ingest (files, sizes or times)",
                        run_id, kind="note")]
    return []


def _check_analyses(store: Path, runs: set[str], run: str | None) -> list[Finding]:
    found: list[Finding] = []
    derived = store / DERIVED_DIR
    if not derived.is_dir():
        return found
    for directory in sorted(p for p in derived.iterdir() if p.is_dir() and not p.name.startswith(".")):
        table = directory.name
        parts = {p.name[: -len(".parquet")] for p in directory.glob("*.parquet") if not p.name.startswith(".")}
        suffix = ".parquet" + CHECKSUM_SUFFIX  # a part's checksum file is "." + run + suffix (checksum_file)
        recorded = {p.name[1: -len(suffix)] for p in directory.glob(f".*{suffix}")}
        for run_id in sorted(parts | recorded):
            if run is not None and run_id != run:
                continue
            part = directory / f"{run_id}.parquet"
            where = f"{DERIVED_DIR}/{table}/{part.name}"
            if run_id not in parts:
                found.append(Finding(where, "deleted (its checksum file remains)", run_id, table))
                continue
            reason = parquet_problem(part)
            digest = read_checksum(part)
            if reason is not None:
                found.append(Finding(where, f"cannot be read ({reason})", run_id, table))
            elif digest is not None and file_sha256(part) != digest:
                found.append(Finding(where, "changed since it was written (its SHA-256 differs from "
                                     f"{checksum_file(part).name})", run_id, table))
            elif run_id not in runs:
                found.append(Finding(where, f"an analysis of run {run_id}, which is not in the store", run_id, table))
    return found


# -- repair --------------------------------------------------------------------------------


@dataclass
class Repair:
    """What :func:`repair_store` did, and what it could not do."""

    done: list[str] = field(default_factory=list)
    cannot: list[str] = field(default_factory=list)


def repair_store(store: Path | str, run: str | None = None) -> Repair:
    """Repair what :func:`verify_store` finds, where the store's records allow (see the module
    docstring); holds the store lock throughout."""
    store = Path(store)
    if not store.is_dir() or not is_store(store):
        raise _not_a_store(store)
    repair = Repair()
    lock = StoreLock(store)
    lock.acquire()  # a write under way ends first: what it stages is not left over
    try:
        verification = verify_store(store, run, locked=True)
        database_stale = any(f.path == DATABASE_FILE for f in verification.problems)
        if run is None and any(f.path == JOURNAL_FILE or f.path.startswith((STAGING_DIR, ".")) for f in
                               verification.problems if f.path != DATABASE_FILE):
            recover(store, rebuild_database)
            repair.done.append("finished the interrupted write and removed what it left")
            # what the interrupted write had moved aside is back: judge the store as it is now
            # (an analysis of a run set aside mid-replace is not an orphan)
            verification = verify_store(store, run, locked=True)
        publisher = Publisher(store)
        restored: list[str] = []
        for run_id in verification.damaged_runs:
            if _restore_run(store, run_id, publisher, repair):
                restored.append(run_id)
        views = _Views([run_id for run_id in verification.damaged_runs if run_id not in restored], repair)
        dropped: set[Path] = set()

        def drop(part: Path) -> None:
            for path in (part, checksum_file(part)):
                if path.exists() and path not in dropped:
                    publisher.drop(str(path.relative_to(store)))
                    dropped.add(path)

        for finding in verification.damaged_parts:
            table = finding.table or ""
            drop(store / finding.path)
            command = rewriting_commands([table], store, finding.run_id or "RUN")[0]
            # the tables one command writes for a run go together: a set with one part removed would
            # read as whole (attribution's verdicts without its drift table)
            together = [store / DERIVED_DIR / other / f"{finding.run_id}.parquet" for other in written_with(table)]
            kept = [part for part in together if part.exists() and part not in dropped]
            for part in kept:
                drop(part)
            also = f", and {', '.join(str(p.relative_to(store)) for p in kept)} written with it" if kept else ""
            repair.done.append(f"removed {finding.path} ({finding.message.split(' (')[0]}){also}; {command} computes "
                               "it again (the options it ran with are not recorded)")
        # A restored run's analyses may have been computed from its damaged files: they go too.
        stale: dict[str, list[str]] = {}
        for run_id in restored:
            for table, parts in derived_files(store).items():  # resolved paths, however STORE was spelled
                part = store / DERIVED_DIR / table / f"{run_id}.parquet"
                if store.resolve() / DERIVED_DIR / table / part.name in parts and part not in dropped:
                    drop(part)
                    stale.setdefault(run_id, []).append(table)
        publisher.publish(views)
        for run_id in restored:
            repair.done.append(f"wrote run {run_id} again from its source: its files are as ingested")
            if stale.get(run_id):
                commands = rewriting_commands(stale[run_id], store, run_id)
                verb = "computes" if len(commands) == 1 else "compute"
                repair.done.append(f"removed run {run_id}'s analyses ({', '.join(stale[run_id])}), which may have been "
                                   f"computed from its damaged files; {' and '.join(commands)} {verb} them again")
        views(store)
        if database_stale and views.written:
            repair.done.append(f"wrote the views of {DATABASE_FILE} again: they list the store's files as they are now")
    finally:
        lock.release()
    if not verify_store(store, run).ok and not repair.cannot:
        repair.cannot.append("problems remain; run `trajlens verify` again to see them")
    return repair


@dataclass
class _Views:
    """:func:`rebuild_database` for a repair that leaves the runs ``damaged`` as they were: views
    over a file that cannot be read cannot be written, so then the database is left as it is and
    :attr:`Repair.cannot` says so, once (ingesting those runs again writes it)."""

    damaged: list[str]
    repair: Repair
    written: bool = False

    def __call__(self, store: Path) -> None:
        try:
            rebuild_database(store)
        except duckdb.Error:
            if not self.damaged:
                raise
            if not any(line.startswith(f"the views of {DATABASE_FILE}") for line in self.repair.cannot):
                self.repair.cannot.append(f"the views of {DATABASE_FILE} are not written again while run "
                                          f"{', '.join(self.damaged)} cannot be read; ingesting it again writes them")
            self.written = False
        else:
            self.written = True


def written_with(table: str) -> list[str]:
    """The other analysis tables the command that writes ``table`` writes with it, run by run."""
    command = ANALYSIS_TABLES.get(table)
    return [other for other, writer in ANALYSIS_TABLES.items() if writer == command and other != table] \
        if command is not None else []


def _restore_run(store: Path, run_id: str, publisher: Publisher, repair: Repair) -> bool:
    """Ingest the run's recorded call into scratch space and stage the run when it hashes as recorded."""
    from trajlens.ingest import ingest
    from trajlens.limits import Limits
    from trajlens.store.integrity import hash_run

    run_dir = store / RUNS_DIR / run_id
    record = RunRecord.read(run_dir)
    call = record.call
    again = f"ingest it again from its logs (`trajlens ingest LOGS --store {store} --replace`)"
    if call is None:
        repair.cannot.append(f"run {run_id}: cannot write it again: ingest.json does not record the ingest that "
                             f"wrote it; {again}")
        return False
    sources = [Path(source) for source in call.get("sources", [])]
    missing = [str(source) for source in sources if not source.exists()]
    if not sources or missing:
        repair.cannot.append(f"run {run_id}: cannot write it again: its source {', '.join(missing) or '(none)'} "
                             f"no longer exists; {again}")
        return False
    # Inside the store's own staging: the store lies outside every input, and the move is a rename.
    scratch = publisher.staging / "repair" / run_id
    scratch.mkdir(parents=True)
    try:
        try:
            limits = Limits(**call.get("limits") or {})
            ingest(sources, scratch / "store", strict=bool(call.get("strict", True)), run_id=call.get("run_id"),
                   limits=limits)
        except (TrajlensError, TypeError, ValueError) as error:
            repair.cannot.append(f"run {run_id}: cannot write it again: its source no longer ingests "
                                 f"({str(error).splitlines()[0] if str(error) else type(error).__name__}); {again}")
            return False
        rebuilt = scratch / "store" / RUNS_DIR / run_id
        if not rebuilt.is_dir() or hash_run(rebuilt).content_hash != record.content_hash:
            repair.cannot.append(f"run {run_id}: cannot restore it: its source now gives other content (changed "
                                 f"since ingest); {again}")
            return False
        staged = publisher.stage_path(RUNS_DIR, run_id)
        staged.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(rebuilt), staged)
        publisher.replace(staged, f"{RUNS_DIR}/{run_id}")
        return True
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


__all__ = ["Finding", "Repair", "Verification", "repair_store", "verify_store"]

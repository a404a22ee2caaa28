"""Finding the first damaged file of a store: a table file (of a run or an analysis table)
that fails to read, or, in a deep check, whose bytes differ from the SHA-256 recorded when it
was written. Every command that meets a file it cannot read names it through
:func:`first_damaged_file` and suggests ``trajlens verify``.
"""

from __future__ import annotations

from pathlib import Path

from trajlens.store.database import derived_files, run_dirs
from trajlens.store.integrity import DamagedStoreError, file_sha256, parquet_problem, read_checksum, run_files
from trajlens.store.writer import RunRecord


def first_damaged_file(store: Path, *, deep: bool = False) -> DamagedStoreError | None:
    """The first table file of ``store`` (runs, then analysis tables) that fails to read, as
    the error to report; None when every file reads.

    Only footers are read, unless ``deep``: then each file is also checked against its
    recorded SHA-256 (a flipped byte inside a page leaves the footer whole), and a file with
    no recorded checksum is read in full. A deep check reads the whole store once.
    """
    runs = [(run_dir, path) for run_dir in run_dirs(store) for path in run_files(run_dir)]
    parts = [path for files in derived_files(store).values() for path in files]
    for path in [path for _, path in runs] + parts:
        reason = parquet_problem(path)
        if reason is not None:
            return DamagedStoreError(store, path, reason)
    if not deep:
        return None
    recorded: dict[Path, dict[str, str] | None] = {}
    for run_dir, path in runs:
        if run_dir not in recorded:
            recorded[run_dir] = RunRecord.read(run_dir).files
        files = recorded[run_dir]
        digest = None if files is None else files.get(path.relative_to(run_dir).as_posix())
        reason = _content_problem(path, digest)
        if reason is not None:
            return DamagedStoreError(store, path, reason)
    for path in parts:
        reason = _content_problem(path, read_checksum(path))
        if reason is not None:
            return DamagedStoreError(store, path, reason)
    return None


def _content_problem(path: Path, digest: str | None) -> str | None:
    """Why a file's bytes are not those written: its checksum differs, or (none recorded) it
    fails to read in full."""
    if digest is not None:
        return None if file_sha256(path) == digest else "its SHA-256 differs from the one recorded when it was written"
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pq.read_table(path)
    except (OSError, pa.ArrowException) as error:
        text = str(error).strip()
        return text.splitlines()[0] if text else type(error).__name__
    return None


__all__ = ["first_damaged_file"]

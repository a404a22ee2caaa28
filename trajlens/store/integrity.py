"""Checksums of a store's own files, and the one-line error for a file that fails to read.

Every table file gets a SHA-256 when it is written:

- a run's Parquet files, in ``runs/<id>/ingest.json`` under ``files`` (path inside the run
  directory -> hex digest), computed in the same pass that hashes the whole run for
  ``content_hash``, so recording them reads no byte twice;
- an analysis table's part ``derived/<table>/<run>.parquet``, in the hidden file beside it,
  ``derived/<table>/.<run>.parquet.sha256``, published in the same step as the part.

``trajlens verify`` (:mod:`trajlens.store.verify`) checks them. Any other command that meets
a file it cannot read reports :class:`DamagedStoreError`: the file, why, and
``trajlens verify STORE``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from trajlens.errors import StoreError

BLOCK = 1 << 20
CHECKSUM_SUFFIX = ".sha256"


@dataclass(frozen=True)
class RunHashes:
    """A run directory's ``content_hash`` (one digest over every file's path and bytes) and
    the SHA-256 of each file (by path inside the run directory)."""

    content_hash: str
    files: dict[str, str]
    sizes: dict[str, int]
    """Each file's size in bytes (by path inside the run directory): what a store checks, one
    stat per file, when it opens (:func:`size_problem`)."""


def run_files(run_dir: Path) -> list[Path]:
    """A run directory's Parquet files, in the order :func:`hash_run` reads them."""
    return sorted(p for p in run_dir.rglob("*.parquet") if p.is_file())


def hash_run(run_dir: Path) -> RunHashes:
    """Both digests of a run directory, reading each file once."""
    whole = hashlib.sha256()
    files, sizes = {}, {}
    for path in run_files(run_dir):
        name = path.relative_to(run_dir).as_posix()
        whole.update(str(path.relative_to(run_dir)).encode())
        one = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(BLOCK), b""):
                whole.update(block)
                one.update(block)
        files[name] = one.hexdigest()
        sizes[name] = path.stat().st_size
    return RunHashes(whole.hexdigest(), files, sizes)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def checksum_name(part_name: str) -> str:
    """The name of the file beside an analysis table's part that keeps its checksum."""
    return f".{part_name}{CHECKSUM_SUFFIX}"


def checksum_file(part: Path) -> Path:
    """Where the checksum of an analysis table's part is kept: a hidden file beside it."""
    return part.with_name(checksum_name(part.name))


def write_checksum(part: Path) -> Path:
    """Record the SHA-256 of ``part`` beside it, and on a second line its size in bytes;
    returns the checksum file."""
    target = checksum_file(part)
    target.write_text(f"{file_sha256(part)}\n{SIZE_PREFIX}{part.stat().st_size}\n")
    return target


SIZE_PREFIX = "size "


def _checksum_lines(part: Path) -> list[str]:
    try:
        return checksum_file(part).read_text().split("\n")
    except (OSError, UnicodeDecodeError):
        return []


def read_checksum(part: Path) -> str | None:
    """The SHA-256 recorded beside an analysis table's part (its checksum file's first line)."""
    lines = _checksum_lines(part)
    return (lines[0].strip() or None) if lines else None


def read_recorded_size(part: Path) -> int | None:
    """The size recorded beside an analysis table's part; None when none is (a part written
    before sizes were recorded)."""
    for line in _checksum_lines(part)[1:]:
        if line.startswith(SIZE_PREFIX) and line[len(SIZE_PREFIX):].strip().isdigit():
            return int(line[len(SIZE_PREFIX):])
    return None


def size_problem(path: Path, recorded: int | None) -> str | None:
    """Why a store file is not the one written, as far as its size tells (one stat): missing,
    or another size than ``recorded``; None when it matches or no size was recorded. A change
    that keeps the size is found by ``trajlens verify``, which reads every byte."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "missing"
    except OSError as error:
        return error.strerror or type(error).__name__
    if recorded is not None and size != recorded:
        return f"changed since it was written: {size:,} bytes where {recorded:,} were written"
    return None


def parquet_problem(path: Path) -> str | None:
    """Why a Parquet file cannot be read (missing, cut short, not Parquet), or None.

    Reads the footer and the metadata it points to; a file cut short loses its footer.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pq.read_metadata(path)
    except FileNotFoundError:
        return "missing"
    except (OSError, pa.ArrowException) as error:
        text = str(error).strip()
        return text.splitlines()[0] if text else type(error).__name__
    return None


class DamagedStoreError(StoreError):
    """A file of a store that cannot be read; the message names it and ``trajlens verify``."""

    def __init__(self, store: Path, path: Path, reason: str, *, readable: bool = False) -> None:
        self.store = store
        self.path = path
        what = reason if readable else f"cannot be read ({reason})"
        super().__init__(f"{path}: {what}; the store is damaged: run `trajlens verify {store}` "
                         "(--repair restores what it can)")


__all__ = ["CHECKSUM_SUFFIX", "DamagedStoreError", "RunHashes", "checksum_file", "checksum_name", "file_sha256",
           "hash_run", "parquet_problem", "read_checksum", "read_recorded_size", "run_files", "size_problem",
           "write_checksum"]

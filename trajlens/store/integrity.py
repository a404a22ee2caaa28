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


def run_files(run_dir: Path) -> list[Path]:
    """A run directory's Parquet files, in the order :func:`hash_run` reads them."""
    return sorted(p for p in run_dir.rglob("*.parquet") if p.is_file())


def hash_run(run_dir: Path) -> RunHashes:
    """Both digests of a run directory, reading each file once."""
    whole = hashlib.sha256()
    files = {}
    for path in run_files(run_dir):
        name = path.relative_to(run_dir).as_posix()
        whole.update(str(path.relative_to(run_dir)).encode())
        one = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(BLOCK), b""):
                whole.update(block)
                one.update(block)
        files[name] = one.hexdigest()
    return RunHashes(whole.hexdigest(), files)


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
    """Record the SHA-256 of ``part`` beside it; returns the checksum file."""
    target = checksum_file(part)
    target.write_text(file_sha256(part) + "\n")
    return target


def read_checksum(part: Path) -> str | None:
    try:
        text = checksum_file(part).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


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

    def __init__(self, store: Path, path: Path, reason: str) -> None:
        self.store = store
        self.path = path
        super().__init__(f"{path}: cannot be read ({reason}); the store is damaged: run `trajlens verify {store}` "
                         "(--repair restores what it can)")


__all__ = ["CHECKSUM_SUFFIX", "DamagedStoreError", "RunHashes", "checksum_file", "checksum_name", "file_sha256",
           "hash_run", "parquet_problem", "read_checksum", "run_files", "write_checksum"]

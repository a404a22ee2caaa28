"""What format detection may look at: a path and, read once on first use, the two ends of a file.

Every format's ``detect`` takes a :class:`Probe` (or a path, wrapped into one) and answers
yes or no. A probe reads at most :data:`SNIFF_BYTES` from each end of a file, once, and keeps
them only as long as the probe lives: detection holds no cache beyond one file's survey.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

from trajlens.errors import InputError
from trajlens.limits import UTF8_BOM

SNIFF_BYTES = 65536


class Probe:
    """One path under detection."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._ends: tuple[str, str] | None = None

    @classmethod
    def of(cls, target: "Probe | Path | str") -> "Probe":
        return target if isinstance(target, Probe) else cls(target)

    @property
    def is_dir(self) -> bool:
        return self.path.is_dir()

    @property
    def is_file(self) -> bool:
        return self.path.is_file()

    @property
    def suffix(self) -> str:
        return self.path.suffix

    @property
    def head(self) -> str:
        return self._read()[0]

    @property
    def tail(self) -> str:
        return self._read()[1]

    def first_line(self) -> str:
        """The first non-blank line of the head ('' when none)."""
        return next((line for line in self.head.splitlines() if line.strip()), "")

    def _read(self) -> tuple[str, str]:
        if self._ends is None:
            self._ends = _ends(self.path)
        return self._ends


def _ends(path: Path) -> tuple[str, str]:
    if not path.is_file():  # a folder, a FIFO or a device is never read (a FIFO would block)
        return "", ""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size <= 2 * SNIFF_BYTES:
                data = handle.read()
                head, tail = data[:SNIFF_BYTES], data[-SNIFF_BYTES:]
            else:
                head = handle.read(SNIFF_BYTES)
                handle.seek(size - SNIFF_BYTES)
                tail = handle.read(SNIFF_BYTES)
    except OSError:
        return "", ""
    if head.startswith(UTF8_BOM):  # written by editors and tools on Windows; JSON readers skip it
        head = head[len(UTF8_BOM):]
    return head.decode("utf-8", "replace"), tail.decode("utf-8", "replace")


def files_of(paths: Sequence[Path | str] | Path | str, detect: Callable[["Probe"], bool]) -> list[Path]:
    """The files a loader of row files reads: files named directly, and the files below named
    folders that ``detect`` recognises (sorted); an InputError when a folder holds none."""
    given = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    files: list[Path] = []
    for path in given:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".") and detect(Probe(p)))
            if not found:
                raise InputError(str(path), "no files of this format in the directory", found="none")
            files.extend(found)
        else:
            files.append(path)
    return files

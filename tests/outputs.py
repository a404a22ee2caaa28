"""What the output tests look at: a folder's files and bytes, and the one error line a refused
or failed write gives."""

from __future__ import annotations

from pathlib import Path

LONGEST_NAME = 255
"""Longest file name most filesystems take: a name this long has no room for ``.partial``."""


def contents(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with its bytes (None for a folder)."""
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


def one_error_line(done) -> str:
    """The one ``error:`` line a finished command printed, naming no partial file and with no traceback."""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert ".partial" not in lines[0] and "Traceback" not in done.stderr
    return lines[0]

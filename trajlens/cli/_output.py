"""Writing a command's output file: the folder is checked first, nothing partial is left."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from trajlens.errors import ConfigError


def check_output(path: Path, suffixes: tuple[str, ...] | None = None) -> None:
    """Fail before any work when ``path`` cannot be written."""
    problems = []
    if not path.parent.is_dir():
        problems.append(f"--out {path}: folder {path.parent} does not exist")
    if suffixes and path.suffix.lower() not in suffixes:
        problems.append(f"--out {path}: expected a {', '.join(suffixes)} file")
    if problems:
        raise ConfigError(problems)


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """Write through ``write(partial)`` and rename into place; remove the partial on failure."""
    partial = path.with_name(path.name + ".partial")
    try:
        write(partial)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)

"""Copying a store folder, for tests that write into a copy of a shared store."""

from __future__ import annotations

import shutil
from pathlib import Path


def copy_store(source: Path, target: Path) -> Path:
    """Copy the store folder ``source`` to ``target`` (without the session's marker file); return ``target``."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".ingested"))
    return target

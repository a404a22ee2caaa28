"""Resident memory of this process, read from ``/proc/self/status``, for the benchmarks."""

from __future__ import annotations

import ctypes
import ctypes.util
import re
from pathlib import Path


def status_bytes(field: str) -> int:
    """A memory field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``) in bytes."""
    text = Path("/proc/self/status").read_text()
    match = re.search(rf"{field}:\s+(\d+)", text)
    if match is None:
        raise RuntimeError(f"/proc/self/status has no {field} field")
    return int(match.group(1)) * 1024


def release_free_memory() -> None:
    """Hand freed heap pages back to the OS (glibc ``malloc_trim``), so RSS counts live memory only."""
    name = ctypes.util.find_library("c")
    if name:
        try:
            ctypes.CDLL(name).malloc_trim(0)
        except (OSError, AttributeError):
            pass

"""A command's process keeps the memory it frees for the steps that follow.

A command reads a run step by step, and every step allocates arrays of about the same sizes (the
step's token arrays, their flat buffers, the recomputations) and frees them. By default glibc's
malloc gives a block above its threshold a mapping of its own and unmaps it when it is freed (the
threshold starts at 128 KiB and rises with the blocks freed, up to 32 MiB: larger ones always), and
trims the top of its heap, so the next step faults every page of them in again:
on the 388 M-token run of ``benchmarks/bench_commands.py``, ``trajlens check`` of the run
directory took 700,000 page faults and 6.7 s of system time beside 22 s of wall time. Kept, the
pages are reused: 300,000 faults, 4 s of system time, about 2 s less wall time. The peak is the
same, since a step reuses what the one before freed.

Only the command line does this (:func:`keep_freed_memory` is called before a command runs); a
Python process that imports trajlens keeps its allocator as it is.
"""

from __future__ import annotations

import ctypes
import sys

KEPT_BYTES = 1 << 30
"""Blocks up to this size come from the heap, and up to this much freed memory at its top stays
mapped (a step's arrays are tens of MB; a command's peak stays under 1.5 GB)."""

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameters (``malloc.h``)."""


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed memory mapped for reuse; whether it was done (False on
    another C library or system, which keep their own policy)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return all(mallopt(parameter, KEPT_BYTES) == 1 for parameter in (_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD))

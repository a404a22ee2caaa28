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

Arrow's buffers (the Parquet files read, the token arrays handed to the estimators) come from the
same malloc (:func:`arrow_on_malloc`): Arrow's default pool, mimalloc, returns the pages of freed
buffers to the system on its own schedule, so each step faulted its buffers in again. On the
468 M-token multi-reward run, ``trajlens advantages --identify`` took 6-7 s of system time with
mimalloc and 3.5-4.4 s on malloc, 2-3 s less wall time and 40 MB less peak (three runs each, back to back).

Only the command line does this (:func:`keep_freed_memory` and :func:`arrow_on_malloc` are called
before a command runs); a Python process that imports trajlens keeps its allocators as they are.
"""

from __future__ import annotations

import ctypes
import os
import sys

ARROW_POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"
"""Arrow's own setting of its default pool, read once, when pyarrow is first imported."""

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


def arrow_on_malloc() -> bool:
    """Have Arrow allocate its buffers with malloc (its ``system`` pool), unless the user chose a
    pool with :data:`ARROW_POOL_VARIABLE`; whether it was set here. Done before pyarrow is imported."""
    if ARROW_POOL_VARIABLE in os.environ or "pyarrow" in sys.modules:
        return False
    os.environ[ARROW_POOL_VARIABLE] = "system"
    return True

"""Background CPU load for benchmarks: one busy process per CPU this process may use.

    with busy_cores() as workers:
        ...  # timed code runs beside ``workers`` spinning processes

Each worker is a plain Python interpreter spinning in ``while True: pass``; they are killed
(by their own process id) when the block ends, also on an exception.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def busy_cores(count: int | None = None, settle_seconds: float = 0.3) -> Iterator[int]:
    """Run ``count`` (default: one per CPU) spinning processes for the duration of the block."""
    count = cpu_count() if count is None else count
    workers = [subprocess.Popen([sys.executable, "-S", "-c", "while True: pass"]) for _ in range(count)]
    try:
        time.sleep(settle_seconds)  # let the scheduler see them before timing starts
        yield count
    finally:
        for worker in workers:
            worker.kill()
        for worker in workers:
            worker.wait()


@contextlib.contextmanager
def condition(loaded: bool) -> Iterator[str]:
    """``busy_cores()`` when ``loaded``, else nothing; yields a label for printing."""
    if not loaded:
        yield "no added load"
        return
    with busy_cores() as count:
        yield f"under load ({count} busy processes)"

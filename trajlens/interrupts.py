"""One Ctrl-C, one interrupt: :func:`one_interrupt_per_ctrl_c`.

Polars and DuckDB notice Ctrl-C themselves and end their work with an error of their own
(``KeyboardInterrupt``, ``Query interrupted``) while Python's own signal flag is still set, so
one Ctrl-C raises a second time, at the first function call of the clean-up the first one
started (removing a partial file, a staging folder): the clean-up stops half done and leaves
the partial output behind. Python raises a pending interrupt when a function starts, so no
clean-up function can guard its own start; instead, while a command runs, SIGINT raises
``KeyboardInterrupt`` only when no interrupt is already being handled. A Ctrl-C pressed during
the clean-up of an earlier one waits for it to end, which takes moments.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    if isinstance(sys.exc_info()[1], KeyboardInterrupt):
        return  # the same Ctrl-C, or one pressed while its clean-up runs
    raise KeyboardInterrupt


@contextlib.contextmanager
def one_interrupt_per_ctrl_c() -> Iterator[None]:
    """Within the block, Ctrl-C raises ``KeyboardInterrupt`` only when none is being handled, so
    the ``finally`` and ``except`` blocks an interrupt runs finish their clean-up. Only in the
    main thread, and only where Python's default SIGINT handler is installed (a program that
    set its own keeps it); the CLI runs every command in it."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    previous = signal.signal(signal.SIGINT, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)

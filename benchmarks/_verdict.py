"""How every benchmark ends: a PASS or FAIL line per target, and the exit status."""

from __future__ import annotations

from collections.abc import Sequence


def report_targets(results: Sequence[tuple[str, bool]]) -> int:
    """Print each target's text after ``PASS`` or ``FAIL``; 0 when every target holds, else 1."""
    for text, ok in results:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    return 0 if all(ok for _, ok in results) else 1

"""Training steps as text: the one way every surface writes a set of steps, ``1-3, 7, 9-10``.

It stands below everything else in trajlens and imports nothing from it, so checks, reports,
attribution and the synthetic runs' READMEs all call it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

Rank = TypeVar("Rank")


def step_spans(steps: Iterable[int]) -> list[tuple[int, int]]:
    """(first, last) of each run of consecutive steps, in order; repeated steps count once."""
    spans: list[tuple[int, int]] = []
    for step in sorted(set(steps)):
        if spans and spans[-1][1] == step - 1:
            spans[-1] = (spans[-1][0], step)
        else:
            spans.append((step, step))
    return spans


def spans_text(spans: Iterable[tuple[int, int]]) -> str:
    """``1-3, 7`` for the spans (1, 3) and (7, 7), in the order given; ``""`` for none."""
    return ", ".join(f"{first}-{last}" if first != last else str(first) for first, last in spans)


def steps_text(steps: Iterable[int], most: int | None = None) -> str:
    """``1-3, 7, 9-10`` for steps 1, 2, 3, 7, 9, 10 (in any order); ``""`` for none. With
    ``most``, the first ``most`` spans and how many more there are (``1-3, 7 and 4 more``)."""
    spans = step_spans(steps)
    if most is None or len(spans) <= most:
        return spans_text(spans)
    return f"{spans_text(spans[:most])} and {len(spans) - most:,} more"


def stage_index(rank: Rank, count: int | Rank, parts: int) -> Rank:
    """The part (0 to ``parts - 1``) the ``rank``-th (from 0) of ``count`` distinct steps falls in
    when the steps are cut, in order, into ``parts`` equal parts: ``rank * parts // count``.

    The one cut behind every staging by position: the quartiles Q1..Q4 and early/late of the
    stage reports and the checks, and the first and the last quarter every early-vs-late
    comparison takes (:func:`trajlens.run.quarters.quarters`). ``rank`` and ``count`` may be
    integers, NumPy arrays or Polars expressions.
    """
    return rank * parts // count  # type: ignore[operator, no-any-return]

"""Training steps as text: the one way every surface writes a set of steps, ``1-3, 7, 9-10``.

It stands below everything else in trajlens and imports nothing from it, so checks, reports,
attribution and the synthetic runs' READMEs all call it.
"""

from __future__ import annotations

from collections.abc import Iterable


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


def steps_text(steps: Iterable[int]) -> str:
    """``1-3, 7, 9-10`` for steps 1, 2, 3, 7, 9, 10 (in any order); ``""`` for none."""
    return spans_text(step_spans(steps))

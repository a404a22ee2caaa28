"""Scenario curves: a behaviour rate or scalar as a table of (step, value) anchor points.

A :class:`Curve` is data, not code: the anchors are the numbers a source reports ("think share
0.29 at step 115") and the value between two anchors is their linear interpolation. Before the
first anchor and after the last the curve stays flat. ``origin`` says where the anchors come from,
so a README can tell the seed's numbers from the ones the generator had to choose.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

Origin = Literal["seed", "chosen"]


@dataclass(frozen=True)
class Curve:
    """A piecewise-linear function of the training step."""

    anchors: tuple[tuple[float, float], ...]
    """(step, value) points in increasing step order; at least one."""
    origin: Origin = "seed"
    """``"seed"`` when the anchors are the source's numbers, ``"chosen"`` when the generator's."""
    doc: str = ""
    """What the value means (a share of tool calls, a multiplier, ...)."""

    def __post_init__(self) -> None:
        steps = [s for s, _ in self.anchors]
        if not steps or steps != sorted(steps):
            raise ValueError(f"curve anchors must be a non-empty list in step order, got {self.anchors}")

    def at(self, steps: np.ndarray | int | float) -> np.ndarray:
        """Interpolated values at ``steps`` (flat beyond the first and last anchor)."""
        xs = np.array([s for s, _ in self.anchors], dtype=np.float64)
        ys = np.array([v for _, v in self.anchors], dtype=np.float64)
        return np.interp(np.asarray(steps, dtype=np.float64), xs, ys)

    def value(self, step: int | float) -> float:
        """The curve at one step, as a float."""
        return float(self.at(step))

    def as_json(self) -> dict:
        return {"anchors": [list(a) for a in self.anchors], "origin": self.origin, "doc": self.doc}


def flat(value: float, origin: Origin = "seed", doc: str = "") -> Curve:
    """A constant curve."""
    return Curve(((0.0, value),), origin, doc)

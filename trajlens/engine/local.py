"""The local engine: the step function runs in this process, one step after another."""

from __future__ import annotations

from typing import Iterator, Sequence

from trajlens.engine.base import StepFunction, StepResult
from trajlens.run.location import StoreLocation


class LocalEngine:
    """Runs each step in this process, in order; memory is that of one step's results."""

    name = "local"

    def map_steps(
        self, function: StepFunction, location: StoreLocation, run_id: str, steps: Sequence[int]
    ) -> Iterator[StepResult]:
        for step in steps:
            yield StepResult(step, function(location, run_id, step))

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return "LocalEngine()"


__all__ = ["LocalEngine"]

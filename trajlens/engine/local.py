"""The local engine: the step function runs in this process, one step after another."""

from __future__ import annotations

from typing import Iterator, Sequence

from trajlens.engine.base import StepFunction, StepResult, run_group
from trajlens.run.location import StoreLocation


class LocalEngine:
    """Runs the step function in this process, in step order. Tiny steps packed into one file
    (:mod:`trajlens.store.layout`) run together when the function takes several steps at once
    (a ``steps`` method, see :data:`~trajlens.engine.base.StepFunction`): one read and one call per
    packed file, as the partition reader batches them; memory is that of one file's steps
    (:func:`~trajlens.engine.base.run_group`, which the Ray engine runs too)."""

    name = "local"

    def map_steps(
        self, function: StepFunction, location: StoreLocation, run_id: str, steps: Sequence[int]
    ) -> Iterator[StepResult]:
        for group in location.step_groups(run_id, steps):
            yield from run_group(function, location, run_id, group)

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return "LocalEngine()"


__all__ = ["LocalEngine"]

"""The local engine: the step function runs in this process, one step after another."""

from __future__ import annotations

from typing import Iterator, Sequence

from trajlens.engine.base import StepFunction, StepResult
from trajlens.run.location import StoreLocation


class LocalEngine:
    """Runs the step function in this process, in step order. Tiny steps packed into one file
    (:mod:`trajlens.store.layout`) run together when the function takes several steps at once
    (a ``steps`` method, see :data:`~trajlens.engine.base.StepFunction`): one read and one call per
    packed file, as the partition reader batches them; memory is that of one file's steps."""

    name = "local"

    def map_steps(
        self, function: StepFunction, location: StoreLocation, run_id: str, steps: Sequence[int]
    ) -> Iterator[StepResult]:
        several = getattr(function, "steps", None)
        groups = location.step_groups(run_id, steps) if several is not None else [[step] for step in steps]
        for group in groups:
            if len(group) == 1:
                yield StepResult(group[0], function(location, run_id, group[0]))
            else:
                yield StepResult(group[-1], several(location, run_id, group))

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return "LocalEngine()"


__all__ = ["LocalEngine"]

"""What every engine does: map a per-step function over a run's step partitions.

A *step function* takes a :class:`~trajlens.run.location.StoreLocation`, a run id and a
step, reads that step's partitions itself, and returns its results as named Arrow tables
(``{"call_classes": ..., "trajectory_measures": ...}``). It must be picklable (a module-level
function, or a frozen dataclass holding its options) so that it can run in another process.
An engine runs it once per step and hands the results back in step order; the caller
concatenates or reduces them and writes the store's tables.

Errors a step function raises as :class:`~trajlens.errors.TrajlensError` reach the caller as
they were raised, whichever engine ran the step.
"""

from __future__ import annotations

from typing import Callable, Iterator, NamedTuple, Protocol, Sequence

import pyarrow as pa

from trajlens.run.location import StoreLocation

StepTables = dict[str, pa.Table]
"""A step's results: table name -> Arrow table (names are the step function's own)."""

StepFunction = Callable[[StoreLocation, str, int], StepTables]
"""``function(location, run_id, step) -> StepTables``. A function whose steps are independent of
each other may also have a method ``steps(location, run_id, steps) -> StepTables``, the tables of
several steps together (in step order); an engine may then hand it a group of tiny steps at once,
and yields one :class:`StepResult` for the group, under its last step."""


class StepResult(NamedTuple):
    """The results of one step."""

    step: int
    tables: StepTables


def run_group(function: StepFunction, location: StoreLocation, run_id: str, group: Sequence[int]) -> Iterator[StepResult]:
    """The results of one group of :meth:`~trajlens.run.location.StoreLocation.step_groups` (the
    steps packed into one file, or a step alone), as every engine gives them: the
    group's together under its last step when the function takes several steps at once (its
    ``steps`` method: one read of their file), else one step's after another."""
    several = getattr(function, "steps", None)
    if several is not None and len(group) > 1:
        yield StepResult(group[-1], several(location, run_id, list(group)))
        return
    for step in group:
        yield StepResult(step, function(location, run_id, step))


class Engine(Protocol):
    """Runs a step function over the steps of a run."""

    name: str
    """``local`` or ``ray``."""

    def map_steps(
        self, function: StepFunction, location: StoreLocation, run_id: str, steps: Sequence[int]
    ) -> Iterator[StepResult]:
        """``function(location, run_id, step)`` for every step, yielded in the order of ``steps``."""
        ...

    def close(self) -> None:
        """Release what the engine holds (a cluster connection)."""
        ...


__all__ = ["Engine", "StepFunction", "StepResult", "StepTables", "run_group"]

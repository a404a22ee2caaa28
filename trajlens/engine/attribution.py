"""Attribution on an engine: :func:`attribute_on`.

:func:`trajlens.attribution.attribute` credits a run step by step: its step function
(:class:`~trajlens.attribution.api.CreditStep`) reads a step's partitions through a
:class:`~trajlens.run.reader.RunReader`, credits its calls under every estimator and reduces
them to the step's tables; the credit stream folds those in and publishes ``call_credit`` and
``class_credit``. Here the step function runs where the engine runs the step. The run-level
parts stay with the caller: outcome and channel estimators on the trajectories table (GDPO's
dynamic weights carry from step to step), stages, drift, length bias.
"""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa

from trajlens.engine.base import Engine, StepFunction
from trajlens.run.location import StoreLocation


def engine_steps(engine: Engine, location: StoreLocation, run_id: str):
    """``map_steps`` for :func:`~trajlens.attribution.attribute`: the step function run on ``engine``."""

    def map_steps(function: StepFunction, steps: list[int]) -> Iterator[tuple[int, dict[str, pa.Table]]]:
        for result in engine.map_steps(function, location, run_id, steps):
            yield result.step, result.tables

    return map_steps


def attribute_on(engine: Engine, store: Any, run_id: str, *args: Any, **kwargs: Any) -> Any:
    """:func:`trajlens.attribution.attribute` on an open local ``store``, its steps run on ``engine``."""
    from trajlens.attribution import attribute
    from trajlens.engine.local import LocalEngine

    # in this process the credit stream reads blocks of steps itself, with the saved classification
    map_steps = None if isinstance(engine, LocalEngine) else engine_steps(engine, StoreLocation.of(store.path), run_id)
    return attribute(store, run_id, *args, map_steps=map_steps, **kwargs)


__all__ = ["attribute_on", "engine_steps"]

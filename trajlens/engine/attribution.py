"""Attribution step by step on an engine: :func:`attribute_on`.

:func:`trajlens.attribution.attribute` already streams by step: each step's calls are read,
classified, credited under every estimator and reduced to per-step class sums. Here that
per-step work runs where the engine runs the step (:class:`CreditStep`, which reads the step's
partitions through ``pyarrow.fs``), and its results (the step's ``call_credit`` rows and the
sums) come back to the caller, which publishes ``call_credit`` and ``class_credit`` and draws
the findings exactly as the local run does. The run-level parts stay with the caller: outcome
and channel estimators on the trajectories table (GDPO's dynamic weights carry from step to
step), stages, drift, length bias.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import polars as pl
import pyarrow as pa

from trajlens.attribution.api import _CreditStream, _steps_of
from trajlens.engine.base import Engine, StepTables
from trajlens.run.location import StoreLocation

_KEPT_ROWS = ("class_rows", "trajectory_rows", "push_rows")
"""Per-step frames the credit stream keeps for the run-level measures."""


@dataclass(frozen=True)
class CreditStep:
    """The step function: credit one step's calls and reduce them, as the local stream does."""

    recs: tuple[Any, ...]
    outcome: dict[str, pl.DataFrame]
    modes: tuple[str, ...]
    has_tokens: bool

    def __call__(self, location: StoreLocation, run_id: str, step: int) -> StepTables:
        part = location.read_step(run_id, "trajectories", step)
        if part is None:
            return {}
        batch = (pl.DataFrame(part).filter((pl.col("run_id") == run_id) & (pl.col("split") == "train"))
                 .sort("step", "trajectory_id"))
        if batch.is_empty():
            return {}
        stream = _PartitionCreditStream(location, run_id, batch, self.recs, self.outcome, self.modes, self.has_tokens)
        calls = list(stream._steps())
        tables: StepTables = {
            "classes": pa.table({"primary_class": pa.array(sorted(stream.classes), pa.string())}),
            "counts": pa.table({"fallback_calls": [stream.fallback_calls], "total_calls": [stream.total_calls]}),
        }
        if calls:
            tables["call_credit"] = pa.concat_tables(calls)
        if stream.flags:
            tables["flags"] = pl.DataFrame(stream.flags).to_arrow()
        for name in _KEPT_ROWS:
            rows = getattr(stream, name)
            if rows:
                tables[name] = pl.concat(rows, how="diagonal_relaxed").to_arrow()
        return tables


class _PartitionCreditStream(_CreditStream):
    """The local credit stream over one step, reading its partitions through ``pyarrow.fs``."""

    def __init__(self, location: StoreLocation, run_id: str, batch: pl.DataFrame, recs: tuple[Any, ...],
                 outcome: dict[str, pl.DataFrame], modes: tuple[str, ...], has_tokens: bool) -> None:
        super().__init__(None, run_id, batch, recs, outcome, modes, has_tokens, None)
        self.location = location

    def _read_tokens(self, step: int, columns: tuple[str, ...]) -> pa.Table | None:
        table = self.location.read_step(self.run_id, "tokens", step, columns)
        return table if table is not None and table.num_rows else None

    def _read(self, table: str, steps: list[int], columns: list[str]) -> pl.DataFrame | None:
        parts = [part for step in steps if (part := self.location.read_step(self.run_id, table, step)) is not None]
        if not parts:
            return None
        frame = pl.DataFrame(pa.concat_tables(parts) if len(parts) > 1 else parts[0])
        return frame.select([c for c in columns if c in frame.columns])


class EngineCreditStream(_CreditStream):
    """The credit stream of :func:`trajlens.attribution.attribute`, its steps run on an engine."""

    engine: Engine
    location: StoreLocation

    def _steps(self) -> Iterator[pa.Table]:
        steps, _ = _steps_of(self.trajectories)
        function = CreditStep(self.recs, self.outcome, self.modes, self.has_tokens)
        for result in self.engine.map_steps(function, self.location, self.run_id, steps):
            tables = result.tables
            for name in _KEPT_ROWS:
                if name in tables:
                    getattr(self, name).append(pl.DataFrame(tables[name]))
            if "flags" in tables:
                self.flags += pl.DataFrame(tables["flags"]).to_dicts()
            if "classes" in tables:
                self.classes.update(tables["classes"].column("primary_class").to_pylist())
            if "counts" in tables:
                counts = tables["counts"].to_pylist()[0]
                self.fallback_calls += counts["fallback_calls"]
                self.total_calls += counts["total_calls"]
            if "call_credit" in tables:
                yield tables["call_credit"]
                if self.progress is not None:
                    self.progress(f"step {result.step}")


class EngineStore:
    """An open store whose attribution runs its steps on ``engine``; everything else is the store's."""

    def __init__(self, store: Any, engine: Engine, location: StoreLocation) -> None:
        self._store = store
        self._engine = engine
        self._location = location

    def credit_stream(self, store: Any, *args: Any) -> EngineCreditStream:
        """The credit stream :func:`~trajlens.attribution.attribute` uses for this store."""
        stream = EngineCreditStream(self._store, *args)
        stream.engine, stream.location = self._engine, self._location
        return stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def attribute_on(engine: Engine, store: Any, run_id: str, *args: Any, **kwargs: Any) -> Any:
    """:func:`trajlens.attribution.attribute` on an open local ``store``, its steps run on ``engine``."""
    from trajlens.attribution import attribute

    return attribute(EngineStore(store, engine, StoreLocation.of(store.path)), run_id, *args, **kwargs)


__all__ = ["CreditStep", "EngineCreditStream", "EngineStore", "attribute_on"]

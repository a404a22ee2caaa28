"""The Ray engine: each group of a run's steps is one task of a Ray Data pipeline.

The groups are the local engine's (:meth:`~trajlens.run.location.StoreLocation.step_groups`):
the tiny steps packed into one file together, any other step alone. The pipeline is a dataset
of them, one block per group, mapped with ``map_batches`` (one group per batch) by a function
that reads the group's partitions straight from the store through ``pyarrow.fs`` (so a worker
on another machine reads a store on shared storage) and returns its results as Arrow IPC in a
columnar batch: one row per result table, ``step``, ``name``, ``table``. Order is preserved, so
results come back in step order and the caller streams them into the store's tables without
holding the run. A run of many tiny steps costs a task per file, not per step; a step that
fails ends its group's results with its error.

Connecting: ``address=None`` runs ``ray.init()`` with no address, which starts a local cluster
on this machine (or joins the one ``RAY_ADDRESS`` names); ``"auto"`` joins the cluster that
``ray start --head`` started on this machine; ``"ray://host:10001"`` goes through Ray Client;
``"host:6379"`` joins a cluster's head directly. Every node needs trajlens installed (with the
``ray`` extra), in the same version as the caller.

Ray is an optional dependency (``pip install 'trajlens[ray]'``); this module imports it only
when an engine is made.
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import pyarrow as pa

from trajlens.engine.base import StepFunction, StepResult, StepTables, run_group
from trajlens.run.location import StoreLocation
from trajlens.errors import ConfigError, MissingDependencyError, TrajlensError

RAY_EXTRA = "'trajlens[ray]'"
"""What to install for this engine."""

RESULT_SCHEMA = pa.schema([
    pa.field("step", pa.int64()),
    pa.field("name", pa.string()),
    pa.field("table", pa.large_binary()),
    pa.field("error", pa.large_binary()),
])
"""A step's results inside the pipeline: one row per named table (Arrow IPC stream bytes), or
one row whose ``error`` holds the pickled :class:`~trajlens.errors.TrajlensError` the step raised."""


CONNECT_TIMEOUT_S = 5.0
"""Seconds a cluster's head has to accept a connection before --ray-address is refused (Ray itself
retries an address that does not answer for minutes, printing a warning every few seconds)."""


def reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Raise :class:`~trajlens.errors.ConfigError` when ``address`` (``host:port`` or
    ``ray://host:port``) does not accept a TCP connection within ``timeout`` seconds; an address
    of another form (``auto``) is left to Ray."""
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not colon or not port.isdigit() or not host:
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as error:
        reason = "no answer" if isinstance(error, TimeoutError) else error.strerror or type(error).__name__
        raise ConfigError([f"--ray-address {address}: no Ray cluster there ({reason}); start one with "
                           "`ray start --head`, or name the address its head printed"]) from None


def _import_ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401 - the engine's pipeline; missing when ray is installed without [data]
    except ImportError:
        raise MissingDependencyError(RAY_EXTRA, "--engine ray") from None
    return ray


class RayEngine:
    """Maps step functions over a run's steps on a Ray cluster with Ray Data."""

    name = "ray"

    def __init__(self, address: str | None = None) -> None:
        ray = _import_ray()
        self.address = address
        self._started = False
        if not ray.is_initialized():
            # Options that configure a new cluster are refused when joining one.
            own_cluster = {} if address else {"include_dashboard": False}
            # A cluster trajlens starts sends no usage statistics anywhere (Ray's default is to).
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            if address:
                reachable(address)
            try:
                ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR, **own_cluster)
            except ConnectionError as error:  # "auto" with no cluster started on this machine
                raise ConfigError([f"--ray-address {address}: {error}"]) from None
            except Exception as error:  # Ray's own start-up failures (a node timed out on a busy machine)
                where = f"--ray-address {address}" if address else "--engine ray: a local Ray cluster"
                reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                raise ConfigError([f"{where} did not start: {reason}"]) from None
            self._started = True
        # The command draws its own progress; Ray Data's bars and notices would interleave with it.
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        context = ray.data.DataContext.get_current()
        context.execution_options.preserve_order = True
        context.enable_progress_bars = False
        context.print_on_execution_start = False

    def map_steps(
        self, function: StepFunction, location: StoreLocation, run_id: str, steps: Sequence[int]
    ) -> Iterator[StepResult]:
        import ray

        if not steps:
            return
        groups = location.step_groups(run_id, steps)
        dataset = ray.data.from_items([{"steps": [int(step) for step in group]} for group in groups],
                                      override_num_blocks=len(groups))
        results = dataset.map_batches(RayStep(function, location, run_id), batch_size=1, batch_format="pyarrow",
                                      zero_copy_batch=True)
        yield from step_results(results.iter_batches(batch_format="pyarrow", batch_size=None))

    def close(self) -> None:
        if self._started:
            import ray

            ray.shutdown()
            self._started = False

    def __repr__(self) -> str:
        return f"RayEngine(address={self.address!r})"


@dataclass(frozen=True)
class RayStep:
    """The ``map_batches`` function: runs the step function on the batch's group of steps
    (:func:`~trajlens.engine.base.run_group`)."""

    function: StepFunction
    location: StoreLocation
    run_id: str

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows: list[dict[str, Any]] = []
        for group in batch.column("steps").to_pylist():
            results = run_group(self.function, self.location, self.run_id, group)
            try:
                for step, tables in results:
                    rows += [{"step": step, "name": name, "table": _to_ipc(table), "error": None}
                             for name, table in tables.items()]
                    if not tables:  # the step still reports back, so the caller sees every step
                        rows.append({"step": step, "name": None, "table": None, "error": None})
            except TrajlensError as error:  # the caller raises it at this row: the group stops here
                rows.append({"step": group[-1], "name": None, "table": None, "error": _pickle_error(error)})
        return pa.Table.from_pylist(rows, schema=RESULT_SCHEMA)


def step_results(batches: Iterable[pa.Table]) -> Iterator[StepResult]:
    """Batches of :data:`RESULT_SCHEMA` rows (in step order) back into one result per step;
    a step's error is raised as the step function raised it."""
    current: int | None = None
    tables: StepTables = {}
    for batch in batches:
        for row in batch.to_pylist():
            if row["error"] is not None:
                raise _unpickle_error(row["error"])
            if current is not None and row["step"] != current:
                yield StepResult(current, tables)
                tables = {}
            current = row["step"]
            if row["name"] is not None:
                tables[row["name"]] = _from_ipc(row["table"])
    if current is not None:
        yield StepResult(current, tables)


def _pickle_error(error: TrajlensError) -> bytes:
    # Not the exception itself: trajlens errors build their message in __init__ from other
    # arguments (a list of problems, a file and a field), so unpickling would call it wrongly.
    return pickle.dumps((type(error), str(error), dict(vars(error))))


def _unpickle_error(data: bytes) -> TrajlensError:
    kind, message, state = pickle.loads(data)
    error: TrajlensError = kind.__new__(kind)
    BaseException.__init__(error, message)
    vars(error).update(state)
    return error


def _to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def _from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


__all__ = ["RAY_EXTRA", "RESULT_SCHEMA", "RayEngine", "RayStep", "step_results"]

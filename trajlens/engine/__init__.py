"""Where per-step work runs: in this process, or on a Ray cluster.

Classification, recomputation and attribution all work one training step at a time, and the
store keeps one Parquet partition per step (``runs/<id>/<table>/step=N/``, tiny steps packed
into ``step=A-B/``). An engine maps a step function over the steps and hands back each step's
results as Arrow tables, in step order (:mod:`trajlens.engine.base`):

- :class:`~trajlens.engine.local.LocalEngine` runs the steps here, one after another;
- :class:`~trajlens.engine.ray.RayEngine` runs each step as a Ray Data task, on a local
  cluster or an existing one (``pip install 'trajlens[ray]'``).

The stores are read and written through ``pyarrow.fs`` (:mod:`trajlens.run`), so a store on
shared storage (``s3://...``, a network mount) works the same. Every per-step command runs on
an engine, the local one by default: its step function and reduction are in
:mod:`trajlens.engine.classify`, :mod:`trajlens.engine.advantages` and
:mod:`trajlens.engine.attribution` (which runs :class:`trajlens.attribution.api.CreditStep`).

Importing this package does not import Ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajlens.engine.base import Engine, StepFunction, StepResult, StepTables
from trajlens.engine.local import LocalEngine
from trajlens.run.location import StoreLocation
from trajlens.errors import ConfigError

if TYPE_CHECKING:
    from trajlens.engine.ray import RayEngine

ENGINES: dict[str, str] = {
    "local": "this process, a step at a time (the default)",
    "ray": "a Ray cluster, one task per step (pip install 'trajlens[ray]')",
}
"""Engine names the command line accepts, and what each means."""


def open_engine(name: str, address: str | None = None) -> Engine:
    """The engine called ``name``; ``address`` is the Ray cluster to join (``ray`` only)."""
    if name not in ENGINES:
        raise ConfigError([f"--engine {name!r}: expected one of {', '.join(ENGINES)}"])
    if name == "local":
        if address is not None:
            raise ConfigError(["--ray-address needs --engine ray"])
        return LocalEngine()
    from trajlens.engine.ray import RayEngine

    return RayEngine(address)


__all__ = ["ENGINES", "Engine", "LocalEngine", "RayEngine", "StepFunction", "StepResult", "StepTables",
           "StoreLocation", "open_engine"]


def __getattr__(name: str) -> type:
    if name == "RayEngine":
        from trajlens.engine.ray import RayEngine

        return RayEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

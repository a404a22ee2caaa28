"""trajlens: see why an RL training run of a coding agent drifted.

Load trajectory logs into a store, classify every tool call, measure each training stage,
and recompute the advantages each estimator would have given::

    import trajlens
    trajlens.ingest(["sample_data/sao-r6"], "store")
    store = trajlens.open("store")
    store.sql("SELECT step, count(*) AS n FROM trajectories GROUP BY step ORDER BY step")
    report = trajlens.stage_report(store, run_id="sao-r6")

Names are imported on first use, so ``import trajlens`` stays fast and never imports torch
(nor does ``from trajlens import *``, which leaves out ``recompute``).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "open": "trajlens.store.handle:open_store",
    "Store": "trajlens.store.handle:Store",
    "load": "trajlens.ingest:load",
    "RunData": "trajlens.rows:RunData",
    "TrajlensError": "trajlens.errors:TrajlensError",
    "InputError": "trajlens.errors:InputError",
    "SchemaError": "trajlens.errors:SchemaError",
    "StoreError": "trajlens.errors:StoreError",
    "RunConflictError": "trajlens.errors:RunConflictError",
    "QueryError": "trajlens.errors:QueryError",
    "FrameError": "trajlens.errors:FrameError",
    "ConfigError": "trajlens.errors:ConfigError",
    "CommandImportError": "trajlens.errors:CommandImportError",
    "MissingDependencyError": "trajlens.errors:MissingDependencyError",
    "Problem": "trajlens.errors:Problem",
    "classify_calls": "trajlens.classify:classify_calls",
    "trajectory_measures": "trajlens.classify:trajectory_measures",
    "stage_report": "trajlens.classify:stage_report",
    "assign_stages": "trajlens.classify:assign_stages",
    "recompute": "trajlens.estimators:recompute",
    "report_store": "trajlens.report:report_store",
    "classify_store": "trajlens.report:classify_store",
    "SCHEMAS": "trajlens.schema:SCHEMAS",
}

# Bound eagerly: the name is also a subpackage, and importing ``trajlens.ingest.<module>``
# would otherwise leave the module, not the function, under ``trajlens.ingest``.
from trajlens.ingest import ingest  # noqa: E402

_IMPORTS_TORCH = frozenset({"recompute"})
"""Names left out of ``from trajlens import *``, which would otherwise import torch."""

__all__ = ["__version__", "ingest", *(name for name in _EXPORTS if name not in _IMPORTS_TORCH)]


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'trajlens' has no attribute {name!r}")
    module_name, attribute = target.split(":")
    value = getattr(importlib.import_module(module_name), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, *_IMPORTS_TORCH])

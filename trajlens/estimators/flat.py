"""Kernels over flat token buffers, for recomputing a stored run a step or a batch at a time.

A step's token arrays come out of Parquet as Arrow list columns: one flat buffer of every
trajectory's tokens and B + 1 offsets. The run layer (:mod:`trajlens.run.stepwise`) and
attribution read them that way, without padding to (B, T_max); this module is their entry to the
estimators' flat kernels, so nothing outside this package imports its private modules:

* :func:`flat_list` / :func:`list_array`: a list column as flat NumPy buffers, and back;
* :func:`flat_masked_scan`: the masked reverse scan behind GAE and discounted returns;
  :func:`reset_returns_rows`: verl <= 0.8's returns, reset after every token outside the mask;
* :func:`masked_moments`, :func:`row_summaries`, :func:`last_model_token`: one compiled pass
  each over the model tokens (moments and sign counts; per-row mean, first and last; the last
  model token of each row);
* :func:`flat_scan_of`: whether an estimator under its options is that scan, here (the compiled
  kernels available, and its registry entry's :class:`~trajlens.estimators.spec.FlatScan` holds);
* :func:`one_intra_op_thread`: run a block's torch ops on one thread (the kernels parallelise
  across rows themselves);
* :func:`unit_interval`: an option checked to lie in [0, 1], with the estimators' one-line error.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from trajlens.estimators._arrays import FlatList, flat_list, list_array
from trajlens.estimators._compiled import AVAILABLE as COMPILED
from trajlens.estimators._compiled import last_model_token, masked_moments, reset_returns_rows, row_summaries

if TYPE_CHECKING:
    from trajlens.estimators._scan import _one_intra_op_thread as one_intra_op_thread
    from trajlens.estimators._scan import flat_masked_scan
    from trajlens.estimators._validate import unit_interval
    from trajlens.estimators.spec import EstimatorChoice, FlatScan

_TORCH_NAMES: dict[str, tuple[str, str]] = {
    "flat_masked_scan": ("_scan", "flat_masked_scan"),
    "one_intra_op_thread": ("_scan", "_one_intra_op_thread"),
    "unit_interval": ("_validate", "unit_interval"),
}
"""Names whose modules import torch: imported on first use, so a reader of flat buffers that
runs no scan (``trajlens view``, the saved advantages of a report) never loads torch."""


def __getattr__(name: str) -> Any:
    if name not in _TORCH_NAMES:
        raise AttributeError(f"module 'trajlens.estimators.flat' has no attribute {name!r}")
    module, attribute = _TORCH_NAMES[name]
    value = getattr(importlib.import_module(f"trajlens.estimators.{module}"), attribute)
    globals()[name] = value
    return value


def flat_scan_of(choice: EstimatorChoice) -> FlatScan | None:
    """The registry entry's flat scan of ``choice`` when it runs on flat buffers here, else None."""
    if not COMPILED:
        return None
    settings = choice.settings()
    return next((scan for scan in choice.spec().flat_scans if scan.applies(settings)), None)


__all__ = ["COMPILED", "FlatList", "flat_list", "flat_masked_scan", "flat_scan_of", "last_model_token", "list_array",
           "masked_moments", "one_intra_op_thread", "reset_returns_rows", "row_summaries", "unit_interval"]

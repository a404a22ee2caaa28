"""What a stored run trained with: :func:`run_trained_with`.

:func:`trajlens.estimators.trained_with` answers from a run's logged config; when the config names
no estimator, the run's logged advantages may: the estimator :func:`~trajlens.estimators.identify_advantages`
matches on its first training step that logs advantages and tells the estimators apart (a few
steps' rows, so a run of any size costs a few steps) is
taken, and the answer says so (``source == "identified"``). Attribution and the report read the
run's estimator here; the checks, which also read run folders that are not stores, feed the same
:class:`trajlens.run.identify.LoggedEstimator` batch after batch, as this does step after step.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import polars as pl

from trajlens.estimators import EstimatorInputError
from trajlens.estimators.trained import TrainedWith, trained_with
from trajlens.run.config import run_declared
from trajlens.run.facts import logs_token_advantages
from trajlens.run.identify import LoggedEstimator
from trajlens.run.reader import RunReader
from trajlens.run.splits import TRAIN_SPLIT


def run_trained_with(store: Any, run_id: str, trajectories: pl.DataFrame | None = None) -> TrainedWith:
    """The estimator and loss aggregation ``run_id`` trained with: from its config, else from its
    logged advantages. ``trajectories``: its training trajectories when the caller has them."""
    config, column = run_declared(store, run_id)
    found = trained_with(config, column)
    if found.choice is not None:
        return found
    reader = RunReader.of(store, run_id)
    logs_tokens = functools.cache(lambda: logs_token_advantages(reader))  # the footers, once, before any token file

    def step_tokens(step: int) -> pl.DataFrame | None:
        return _step_tokens(reader, step) if logs_tokens() else None

    identifier = LoggedEstimator(config)
    try:
        # the caller's trajectories, or the run's training steps read one at a time until one decides
        for part in [trajectories] if trajectories is not None else _training_steps(reader):
            identifier.add(part, step_tokens)
            if identifier.done:
                break
    except EstimatorInputError:
        return found
    identified = identifier.found
    return trained_with(config, column, identified) if identified is not None else found


def _training_steps(reader: RunReader) -> Iterator[pl.DataFrame]:
    """The trajectories of each of the run's steps that train, in step order (a validation pass
    may come first)."""
    for step in reader.steps("trajectories"):
        rows = reader.read_steps("trajectories", [step])
        if rows is not None and (rows := rows.filter(pl.col("split") == TRAIN_SPLIT)).height:
            yield rows


def _step_tokens(reader: RunReader, step: int) -> pl.DataFrame | None:
    rows = reader.read_step("tokens", step)
    return pl.from_arrow(rows) if rows is not None else None  # type: ignore[return-value]


__all__ = ["run_trained_with"]

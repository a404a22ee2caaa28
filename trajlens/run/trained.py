"""What a stored run trained with: :func:`run_trained_with`.

:func:`trajlens.estimators.trained_with` answers from a run's logged config; when the config names
no estimator, the run's logged advantages may: the estimator :func:`~trajlens.estimators.identify_advantages`
matches on its first training step that logs advantages and tells the estimators apart (a few
steps' rows, so a run of any size costs a few steps) is
taken, and the answer says so (``source == "identified"``). Attribution and the report read the
run's estimator here; the checks, which also read run folders that are not stores, ask
:func:`trajlens.run.identify.identify_logged_estimator` of the first batch that trains, as this does.
"""

from __future__ import annotations

import functools
from typing import Any

import polars as pl

from trajlens.estimators import EstimatorInputError
from trajlens.estimators.trained import TrainedWith, trained_with
from trajlens.run.facts import logs_token_advantages
from trajlens.run.identify import IDENTIFY_STEPS, identify_logged_estimator
from trajlens.run.reader import RunReader
from trajlens.run.splits import TRAIN_SPLIT


def run_trained_with(store: Any, run_id: str, trajectories: pl.DataFrame | None = None) -> TrainedWith:
    """The estimator and loss aggregation ``run_id`` trained with: from its config, else from its
    logged advantages. ``trajectories``: its training trajectories when the caller has them."""
    runs = store.table("runs").filter(pl.col("run_id") == run_id).select("config", "estimator").collect()
    config, column = (runs["config"][0], runs["estimator"][0]) if runs.height else (None, None)
    found = trained_with(config, column)
    if found.choice is not None:
        return found
    reader = RunReader.of(store, run_id)
    if trajectories is None:
        trajectories = _training_trajectories(reader)
    logs_tokens = functools.cache(lambda: logs_token_advantages(reader))  # the footers, once, before any token file

    def step_tokens(step: int) -> pl.DataFrame | None:
        return _step_tokens(reader, step) if logs_tokens() else None

    try:
        identified = identify_logged_estimator(trajectories, step_tokens, config)
    except EstimatorInputError:
        identified = None
    return trained_with(config, column, identified) if identified is not None else found


def _training_trajectories(reader: RunReader) -> pl.DataFrame:
    """The run's training trajectories, the first :data:`~trajlens.run.identify.IDENTIFY_STEPS`
    steps that train (a validation pass may come first)."""
    train: list[pl.DataFrame] = []
    for step in reader.steps("trajectories"):
        rows = reader.read_steps("trajectories", [step])
        if rows is not None and (rows := rows.filter(pl.col("split") == TRAIN_SPLIT)).height:
            train.append(rows)
            if len(train) == IDENTIFY_STEPS:
                break
    return pl.concat(train) if train else pl.DataFrame()


def _step_tokens(reader: RunReader, step: int) -> pl.DataFrame | None:
    rows = reader.read_step("tokens", step)
    return pl.from_arrow(rows) if rows is not None else None  # type: ignore[return-value]


__all__ = ["run_trained_with"]

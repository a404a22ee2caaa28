"""What a stored run trained with: :func:`run_trained_with`.

:func:`trajlens.estimators.trained_with` answers from a run's logged config; when the config names
no estimator, the run's logged advantages may: the estimator :func:`~trajlens.estimators.identify_advantages`
matches on its first training step (one step's rows, so a run of any size costs one step) is
taken, and the answer says so (``source == "identified"``). Attribution and the report read the
run's estimator here; the checks, which also read run folders that are not stores, identify on
the first batch of steps they read (:mod:`trajlens.checks.data`), through the same two functions.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from trajlens.estimators.trained import TrainedWith, trained_with
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
        steps = reader.steps("trajectories")
        first = reader.read_steps("trajectories", steps[:1]) if steps else None
        trajectories = first.filter(pl.col("split") == TRAIN_SPLIT) if first is not None else pl.DataFrame()
    identified = identify_first_step(reader, trajectories, config)
    return trained_with(config, column, identified) if identified is not None else found


def identify_first_step(reader: RunReader, trajectories: pl.DataFrame, config: Any) -> Any:
    """:func:`~trajlens.estimators.identify_advantages` on the logged advantages of the first step
    of ``trajectories`` (and that step's token arrays when the trajectories carry none); None
    when none are logged or they cannot be compared."""
    from trajlens.estimators import EstimatorInputError
    from trajlens.estimators.identify import identify_advantages

    if not trajectories.height:
        return None
    first = trajectories.filter(pl.col("step") == trajectories["step"].min())
    tokens = None
    if "logged_advantage" not in first.columns or first["logged_advantage"].null_count() == first.height:
        rows = reader.read_step("tokens", int(first["step"][0]))
        if rows is None or not rows.num_rows or "logged_advantages" not in rows.column_names:
            return None
        tokens = pl.from_arrow(rows)
    try:
        return identify_advantages(first, tokens, config=config)
    except EstimatorInputError:
        return None


__all__ = ["identify_first_step", "run_trained_with"]

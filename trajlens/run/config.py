"""A stored run's logged config, and where a verl-style config keeps what the checks compare
with the logged metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl


@dataclass(frozen=True)
class LearningRate:
    """A logged learning-rate metric and where its configured value sits in a verl-style config."""

    metric: str
    config_path: tuple[str, ...]


LEARNING_RATES: tuple[LearningRate, ...] = (
    LearningRate("actor/lr", ("actor_rollout_ref", "actor", "optim", "lr")),
    LearningRate("critic/lr", ("critic", "optim", "lr")),
)
"""The learning rates a run logs, each with its place in the config."""


def run_config_text(store: Any, run_id: str) -> str | None:
    """The run's logged config (JSON text), read from its ``runs`` row without a query engine."""
    frame = store.table("runs").filter(pl.col("run_id") == run_id).select("config").collect()
    return frame["config"][0] if frame.height else None


__all__ = ["LEARNING_RATES", "LearningRate", "run_config_text"]

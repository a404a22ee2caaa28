"""A stored run's logged config, and where a verl-style config keeps what the checks compare
with the logged metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

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

CRITIC_GRAD_CLIP_PATHS: tuple[tuple[str, ...], ...] = (("critic", "grad_clip"), ("critic", "optim", "clip_grad"))
"""Where a verl-style config keeps the critic's gradient clip, in the order they are looked up."""


def lookup(config: Any, path: Sequence[str]) -> Any:
    """The value at a key path of a nested dict, or None."""
    for key in path:
        if not isinstance(config, dict) or key not in config:
            return None
        config = config[key]
    return config


def run_config_text(store: Any, run_id: str) -> str | None:
    """The run's logged config (JSON text), read from its ``runs`` row without a query engine."""
    frame = store.table("runs").filter(pl.col("run_id") == run_id).select("config").collect()
    return frame["config"][0] if frame.height else None


__all__ = ["CRITIC_GRAD_CLIP_PATHS", "LEARNING_RATES", "LearningRate", "lookup", "run_config_text"]

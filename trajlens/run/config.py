"""What a stored run's ``runs`` row declares (its logged config and its estimator), and where a
verl-style config keeps what the checks compare with the logged metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import polars as pl

from trajlens.estimators.trained import config_at


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


def configured_lr(config: Any, rate: LearningRate) -> tuple[Any, Any]:
    """The learning rate ``config`` sets for ``rate``'s metric, and its warm-up steps (None where unset)."""
    return config_at(config, rate.config_path), config_at(config, (*rate.config_path[:-1], "lr_warmup_steps"))


def critic_grad_clip_of(config: Any) -> Any:
    """The critic's gradient clip ``config`` sets (the first of :data:`CRITIC_GRAD_CLIP_PATHS`), or None."""
    return next((value for path in CRITIC_GRAD_CLIP_PATHS if (value := config_at(config, path)) is not None), None)


class Declared(NamedTuple):
    """What a stored run's ``runs`` row declares of its training: its logged config (JSON text)
    and its ``estimator`` column, which stands for the config's ``algorithm.adv_estimator``
    where the config lacks it (:func:`trajlens.estimators.trained_with`)."""

    config: str | None
    estimator: str | None


def run_declared(store: Any, run_id: str) -> Declared:
    """The run's :class:`Declared`, read from its ``runs`` row without a query engine."""
    frame = store.table("runs").filter(pl.col("run_id") == run_id).select("config", "estimator").collect()
    return Declared(frame["config"][0], frame["estimator"][0]) if frame.height else Declared(None, None)


__all__ = ["CRITIC_GRAD_CLIP_PATHS", "LEARNING_RATES", "Declared", "LearningRate", "configured_lr",
           "critic_grad_clip_of", "run_declared"]

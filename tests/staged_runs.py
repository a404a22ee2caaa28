"""Runs made of their stage values: the stage table and the staged trajectories of a run whose
behaviour metrics hold given values in its first and its last quarter, for the report's stage
findings to read as they read a real run's (:func:`trajlens.classify.stage_report`)."""

from __future__ import annotations

import polars as pl

from trajlens.classify import stage_report
from trajlens.classify.per_trajectory import MEASURES

STEPS = 8
"""Steps 1-8: two a quarter; steps 1-6 hold a metric's first value, 7-8 (Q4) its last."""
CALLS = 100
"""Behaviour calls (and verification calls) of each trajectory: a share is a count of them."""


def staged_run(values: dict[str, tuple[float, float]], per_step: int = 500) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(rates, measures)`` of :func:`~trajlens.classify.stage_report` on a run of ``per_step``
    trajectories a step whose metrics (``share:<class>``, ``verification:<class>``,
    ``ran_suite``, ``mean:<measure>``) hold the first value of their pair in Q1-Q3 and the second
    in Q4; a share or rate of units is rounded to whole calls or trajectories, a mean's
    trajectories lie a tenth of it either side."""
    rows = []
    for step in range(1, STEPS + 1):
        for unit in range(per_step):
            row: dict[str, object] = {"run_id": "r", "step": step, "trajectory_id": f"t{step}-{unit}",
                                      "n_calls": CALLS, "n_verification": CALLS, "ran_suite": False}
            for metric, (first, last) in values.items():
                value = last if step > STEPS - 2 else first
                kind, _, name = metric.partition(":")
                if kind in ("share", "verification"):
                    row[f"count_{name}"] = round(value * CALLS)
                elif kind == "ran_suite":
                    row["ran_suite"] = unit < round(value * per_step)
                else:  # a tenth either side of the value, one trajectory in two: a mean with spread
                    row[name] = value * (1.1 if unit % 2 else 0.9)
            # the calls no metric names are `other`, so the classes' counts add up to the calls
            row.setdefault("count_other", CALLS - sum(v for k, v in row.items() if k.startswith("count_")))
            rows.append(row)
    return staged(pl.DataFrame(rows, infer_schema_length=None))


def staged(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(rates, measures)`` of :func:`~trajlens.classify.stage_report` on the trajectories of
    ``frame`` (``run_id``, ``step``, ``trajectory_id`` and any measures; a count it lacks is 0,
    another measure null), quartile stages, N = 80."""
    names = [m.name for m in MEASURES]
    counts = [pl.lit(0, dtype=pl.Int64).alias(n) for n in names if n.startswith("count_") and n not in frame.columns]
    others = [pl.lit(None, dtype=pl.Float64).alias(n) for n in names if not n.startswith("count_") and n not in frame.columns]
    measures = frame.with_columns(*counts, *others).select(names)
    trajectories = measures.select("run_id", "trajectory_id", "step", "num_turns", "model_tokens", "reasoning_tokens",
                                   pl.lit("train").alias("split"))
    calls = pl.DataFrame(schema={"run_id": pl.String, "trajectory_id": pl.String})
    stage = stage_report((trajectories, calls), run_id=frame["run_id"][0], measures=measures)
    return stage.rates, stage.measures

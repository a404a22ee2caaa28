"""An attribution saved in the store, and read back without recomputing anything.

:func:`trajlens.attribution.attribute` (with ``write=True``) saves, per run, the analysis tables

``call_credit``
    one row per call, estimator and aggregation (written step by step);
``class_credit``
    one row per step, class, estimator and aggregation;
``attribution_steps``
    per step and estimator, whether its batch was all-negative or all-positive;
``attribution_summary``
    per stage, class, estimator and aggregation: credit, relative credit, reward relevance and
    superstition (``AttributionResult.class_summary``);
``attribution_length_bias``
    per estimator and aggregation: the elasticity of push per token on response length;
``attribution_drift``
    one row per drifting class and estimator;
``attribution_verdicts``
    one row per drifting class: its verdict and the evidence that decided it;
``attribution_evidence``
    one row per drifting class and counterfactual: the cumulative push over the drift window;
``attribution_projection``
    one row per class and estimator: the final share its pushes would have produced;
``attribution_runs``
    one row per run: its own estimator and aggregation, the recomputations and aggregations
    compared, the findings, notes and flags in words. Written last: a run is attributed when
    this table holds it.

:func:`load_attribution` rebuilds the :class:`~trajlens.attribution.AttributionResult` from
them (the per-step reward-channel measures are recomputed from the ``trajectories`` table,
a pass over one row per trajectory), so the report shows an attributed run without a second
recomputation of every estimator.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from trajlens.run.splits import TRAIN_SPLIT

RUNS_TABLE = "attribution_runs"
"""The table whose row says that a run is attributed (written after the others)."""

FRAME_TABLES: dict[str, str] = {
    "step_flags": "attribution_steps",
    "class_summary": "attribution_summary",
    "length_bias": "attribution_length_bias",
    "drift": "attribution_drift",
    "verdicts": "attribution_verdicts",
    "evidence": "attribution_evidence",
    "projection": "attribution_projection",
}
"""AttributionResult field -> the table it is saved in (``run_id`` added)."""


def save_attribution(store: Any, result: Any) -> None:
    """Save the per-run tables of ``result`` (``call_credit`` and ``class_credit`` are written by
    :func:`~trajlens.attribution.attribute` itself)."""
    for attribute, table in FRAME_TABLES.items():
        frame = getattr(result, attribute)
        store.write_derived(table, result.run_id, frame.select(pl.lit(result.run_id).alias("run_id"), pl.all()))
    row = {
        "run_id": result.run_id, "own_estimator": result.own.label, "aggregation": result.own.aggregation,
        "aggregation_logged": result.own.aggregation_logged, "own_not_computed": result.own.not_computed,
        "recomputations": [r.label for r in result.recomputations],
        "estimators": [r.estimator for r in result.recomputations],
        "options": [json.dumps(r.options, sort_keys=True, default=str) for r in result.recomputations],
        "aggregations": list(result.aggregations), "findings": list(result.findings), "notes": list(result.notes),
        "flags": list(result.flags), "fallback_calls": int(result.fallback_calls),
        "cause_verdicts": list(result.cause_verdicts),
    }
    schema = {"run_id": pl.String, "own_estimator": pl.String, "aggregation": pl.String,
              "aggregation_logged": pl.Boolean, "own_not_computed": pl.String, **{k: pl.List(pl.String) for k in (
                  "recomputations", "estimators", "options", "aggregations", "findings", "notes", "flags")},
              "fallback_calls": pl.Int64, "cause_verdicts": pl.List(pl.String)}
    store.write_derived(RUNS_TABLE, result.run_id, pl.DataFrame([row], schema=schema))


def is_attributed(store: Any, run_id: str) -> bool:
    """Whether the store holds a saved attribution of ``run_id``."""
    if RUNS_TABLE not in store.tables():
        return False
    return store.table(RUNS_TABLE).filter(pl.col("run_id") == run_id).select(pl.len()).collect().item() > 0


def load_attribution(store: Any, run_id: str) -> Any | None:
    """The saved :class:`~trajlens.attribution.AttributionResult` of ``run_id``; None when there is none."""
    from trajlens.attribution.api import AttributionResult
    from trajlens.attribution.statistics import channel_measures
    from trajlens.attribution.recomputations import RunEstimator
    from trajlens.estimators.spec import EstimatorChoice

    if not is_attributed(store, run_id):
        return None
    row = store.table(RUNS_TABLE).filter(pl.col("run_id") == run_id).collect().row(0, named=True)
    frames = {}
    for attribute, table in FRAME_TABLES.items():
        frames[attribute] = (store.table(table).filter(pl.col("run_id") == run_id).collect().drop("run_id")
                             if table in store.tables() else pl.DataFrame())
    recomputations = tuple(EstimatorChoice(label, estimator, json.loads(options))
                           for label, estimator, options in zip(row["recomputations"], row["estimators"], row["options"]))
    trajectories = store.trajectories.filter((pl.col("run_id") == run_id) & (pl.col("split") == TRAIN_SPLIT)).collect()
    return AttributionResult(
        run_id=run_id,
        own=RunEstimator(row["own_estimator"], row["aggregation"], row["aggregation_logged"], row.get("own_not_computed")),
        recomputations=recomputations,
        aggregations=tuple(row["aggregations"]),
        call_credit=store.table("call_credit").filter(pl.col("run_id") == run_id),
        class_credit=store.table("class_credit").filter(pl.col("run_id") == run_id).collect(),
        channels=channel_measures(trajectories),  # empty with fewer than two reward channels
        findings=list(row["findings"]), notes=list(row["notes"]), fallback_calls=row["fallback_calls"],
        flags=list(row["flags"]), cause_verdicts=list(row.get("cause_verdicts") or []), **frames,
    )

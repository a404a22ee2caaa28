"""The verdicts of an attribution as plain data: what ``trajlens attribute --json FILE`` writes.

One JSON object per run::

    {"run_id", "estimator", "aggregation", "aggregation_logged",
     "drifts": [{"class", "direction", "share_first", "share_last", "onset_step",
                 "peak_steps" (an excursion's furthest steps, where share_last was reached; for a drift that
                 turned back within the last stage, the k steps where it went furthest; null for a drift
                 from the first stage to the last that held), "share_end" (the last stage's share, or the
                 last k steps' after a late turn), "peak_share" (a late turn's furthest share, else null),
                 "verdict", "reason",
                 "estimator", "aggregation", "own_known", "dissenting", "window",
                 "push": {"value", "low", "high"}, "relevance": {"value", "low", "high"},
                 "structural": [...], "displaced_by": [the classes that drifted the other way and took its calls, or gave
                 theirs up, when its share of the calls other than theirs held; empty when none did],
                 "counterfactuals": [{"estimator", "aggregation", "own", "push": {"value", "low", "high"}}],
                 "timing": [{"estimator", "r", "r_low", "r_high", "pivotal_steps", "pivot_kind"}],
                 "projection": [{"estimator", "share_start", "share_end", "projected_end",
                                 "projected_low", "projected_high"}]}],
     "causes": [the response-length and reward-channel verdicts, in words, "VERDICT: ..."],
     "findings": [...], "notes": [...]}

Every ``verdict`` (and the head of every cause) is one of :data:`~trajlens.attribution.VERDICTS`:
``estimator artefact``, ``aggregation artefact``, ``learning`` or ``unexplained``.

Numbers that cannot be computed are ``null``, never NaN.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from trajlens.jsontext import json_values


def _interval(row: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {"value": json_values(row[prefix]), "low": json_values(row[f"{prefix}_low"]), "high": json_values(row[f"{prefix}_high"])}


def verdict_document(result: Any) -> dict[str, Any]:
    """The verdicts of ``result`` (an :class:`~trajlens.attribution.AttributionResult`) as JSON-ready data."""
    drifts = []
    verdicts = result.verdicts if result.verdicts.height else pl.DataFrame()
    projection = getattr(result, "projection", None)
    projection = projection if projection is not None and projection.height else pl.DataFrame()
    for row in verdicts.iter_rows(named=True):
        name = row["primary_class"]
        evidence = result.evidence.filter(pl.col("primary_class") == name) if result.evidence.height else result.evidence
        timing = result.drift.filter(pl.col("primary_class") == name) if result.drift.height else result.drift
        drifts.append({
            "class": name, "direction": row["direction"], "share_first": json_values(row["share_first"]),
            "share_last": json_values(row["share_last"]), "onset_step": row["onset_step"],
            "peak_steps": row["peak_steps"] or None, "share_end": json_values(row["share_end"]),
            "peak_share": json_values(row.get("peak_share")), "verdict": row["verdict"],
            "reason": row["reason"], "estimator": row["estimator"], "aggregation": row["aggregation"],
            "own_known": row["own_known"], "dissenting": [d for d in row["dissenting"].split(", ") if d],
            "window": row["window"], "push": _interval(row, "push"), "relevance": _interval(row, "relevance"),
            "structural": [c for c in row["structural"].split(", ") if c],
            "displaced_by": [c for c in (row.get("displaced_by") or "").split(", ") if c],
            "counterfactuals": [{"estimator": e["estimator"], "aggregation": e["aggregation"], "own": e["own"],
                                 "push": _interval(e, "push")} for e in evidence.iter_rows(named=True)],
            "timing": [{"estimator": t["estimator"], "r": json_values(t["r"]), "r_low": json_values(t["r_low"]),
                        "r_high": json_values(t["r_high"]), "pivotal_steps": t["pivotal_steps"],
                        "pivot_kind": t["pivot_kind"]} for t in timing.iter_rows(named=True)],
            "projection": [{"estimator": p["estimator"], "share_start": json_values(p["share_start"]),
                            "share_end": json_values(p["share_end"]), "projected_end": json_values(p["projected_end"]),
                            "projected_low": json_values(p["projected_low"]), "projected_high": json_values(p["projected_high"])}
                           for p in projection.filter(pl.col("primary_class") == name).iter_rows(named=True)]
            if projection.height else [],
        })
    return {"run_id": result.run_id, "estimator": result.own.label, "estimator_not_computed": result.own.not_computed,
            "aggregation": result.own.aggregation,
            "aggregation_logged": result.own.aggregation_logged, "drifts": drifts,
            "causes": list(getattr(result, "cause_verdicts", []) or []),
            "findings": list(result.findings), "notes": list(result.notes)}

"""Which estimator and convention produced the advantages a trainer logged.

:func:`identify_advantages` recomputes a run's logged advantages under every candidate in
:data:`CANDIDATES` that the run's data allows (each an :class:`EstimatorChoice`: a registry
estimator with options, its ``doc`` in the trainer's own terms), measures the max and median absolute difference per
candidate, and names the closest. When none is within tolerance it says where the closest one
departs: the steps and groups with the largest differences. It catches silent trainer
misconfigurations: the wrong ``scale_rewards``, an eps, a whitening left on.

Logged advantages come in as columns the trajlens schema declares: ``logged_advantage``
(float64, nullable) of the ``trajectories`` frame, one per trajectory (TRL's ``advantage``
column), or ``logged_advantages`` (list<float32>, nullable) of the ``tokens`` frame, one per
token (verl dumps). Token arrays are compared on model tokens; a candidate with one advantage
per trajectory is broadcast over them.

Notation: B trajectories, T token positions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import polars as pl

from trajlens.estimators._errors import EstimatorInputError
from trajlens.estimators.registry import ESTIMATOR_REGISTRY, RunFacts, estimator_spec, run_facts
from trajlens.estimators.spec import EstimatorChoice
from trajlens.estimators.trained import trained_with

# A logged advantage written in float32 differs from its float64 recomputation by ~1e-7 relative.
MATCH_TOLERANCE = 1e-5
"""Largest |logged - recomputed|, relative to max(1, max |logged|), that still counts as a match."""


CANDIDATES: tuple[EstimatorChoice, ...] = tuple(
    convention for spec in ESTIMATOR_REGISTRY.values() for convention in spec.conventions)
"""Every candidate :func:`identify_advantages` tries, where the run's data allows its estimator:
every registry entry's conventions, in registry order.

Order breaks ties: where two candidates give the same advantages on a run (TRL's group rule and
verl's with eps 1e-4 agree unless a group has one member), the earlier is named and the other
listed as indistinguishable."""


@dataclass(frozen=True)
class CandidateFit:
    """How close one candidate's recomputation comes to the logged advantages."""

    candidate: EstimatorChoice
    max_abs_diff: float
    median_abs_diff: float
    n: int
    """Values compared: trajectories, or model tokens when token arrays were logged."""
    worst_step: int | None = None
    worst_group: str | None = None
    worst_trajectory: str | None = None
    error: str | None = None
    """Why the candidate could not be recomputed on this run, if it could not."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.candidate.label,
            "estimator": self.candidate.estimator,
            "options": dict(self.candidate.options),
            "description": self.candidate.doc,
            "max_abs_diff": _json_float(self.max_abs_diff),
            "median_abs_diff": _json_float(self.median_abs_diff),
            "n": self.n,
            "worst": {"step": self.worst_step, "group_id": self.worst_group, "trajectory_id": self.worst_trajectory},
            **({"error": self.error} if self.error else {}),
        }


@dataclass(frozen=True)
class Identification:
    """The verdict: the closest candidate, every candidate's fit, and where the closest departs."""

    best: CandidateFit
    candidates: tuple[CandidateFit, ...]
    matched: bool
    tolerance: float
    unit: str
    """``trajectories`` or ``model tokens``."""
    equivalent: tuple[CandidateFit, ...] = ()
    """Other candidates that also match: indistinguishable from the best on this run's data."""
    departures: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Per (step, group_id) of the closest candidate, where it departs by more than the tolerance,
    largest first: ``step``, ``group_id``, ``max_abs_diff``, ``n``."""
    steps: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Per step of the closest candidate, in step order: ``step``, ``max_abs_diff``, ``n``."""

    @property
    def verdict(self) -> str:
        fit = self.best
        measured = f"max |diff| {fit.max_abs_diff:.1e} over {fit.n:,} {self.unit}"
        if self.matched:
            also = "; ".join(other.candidate.doc for other in self.equivalent)
            return f"{fit.candidate.doc}: {measured}" + (f" (indistinguishable here from: {also})" if also else "")
        where = ", ".join(f"step {row['step']} group {row['group_id']} ({row['max_abs_diff']:.2g})"
                          for row in self.departures.head(5).iter_rows(named=True))
        return (f"no candidate matches within {self.tolerance:.0e}; closest: {fit.candidate.doc}: {measured}"
                + (f"; it departs most at {where}" if where else ""))

    def to_dict(self) -> dict[str, Any]:
        """``{"best": {...}, "candidates": [...], "matched", "verdict", "departures"}``, JSON-ready."""
        return {
            "best": self.best.to_dict(),
            "candidates": [fit.to_dict() for fit in self.candidates],
            "matched": self.matched,
            "tolerance": self.tolerance,
            "unit": self.unit,
            "verdict": self.verdict,
            "equivalent": [fit.candidate.label for fit in self.equivalent],
            "departures": [{k: _json_float(v) if isinstance(v, float) else v for k, v in row.items()}
                           for row in self.departures.iter_rows(named=True)],
        }


def identify_advantages(
    trajectories: pl.DataFrame,
    tokens: pl.DataFrame | None = None,
    *,
    config: Mapping[str, Any] | str | None = None,
    candidates: tuple[EstimatorChoice, ...] = CANDIDATES,
    tolerance: float = MATCH_TOLERANCE,
) -> Identification:
    """Recompute the logged advantages under every candidate the run allows and name the closest.

    Args:
        trajectories: the run's training trajectories, with ``logged_advantage`` (or ``tokens``
            with ``logged_advantages``), rewards, groups and channels.
        tokens: the run's ``tokens`` frame (needed by token-level candidates, and when the
            advantages were logged per token).
        config: the run's logged config: every candidate is tried, and of equally close ones the
            one :func:`~trajlens.estimators.trained_with` reads from the config is named.
        candidates: what to try (default :data:`CANDIDATES`).
        tolerance: a match is ``max |diff| <= tolerance * max(1, max |logged|)``.
    """
    return identify_batches([(trajectories, tokens)], facts=run_facts(trajectories, tokens, config), config=config,
                            candidates=candidates, tolerance=tolerance)


EXACT_MEDIAN_VALUES = 4_000_000
"""Differences kept per candidate for an exact median; beyond that (a stored run read a batch
of steps at a time) the median comes from a histogram of the differences' leading 20 bits
(sign, exponent and 8 mantissa bits): the midpoint of the bin holding it, within 2^-9 relative."""
_HISTOGRAM_SHIFT = 44


class _Accumulated:
    """One candidate's differences, gathered batch after batch."""

    def __init__(self) -> None:
        self.max = -math.inf
        self.worst: tuple[int, str, str] | None = None
        self.n = 0
        self.kept: list[np.ndarray] | None = []
        self.histogram = np.zeros(1 << (64 - _HISTOGRAM_SHIFT), dtype=np.int64)
        self.steps: list[pl.DataFrame] = []
        self.groups: list[pl.DataFrame] = []
        self.error: str | None = None

    def add(self, paired: pl.DataFrame) -> None:
        diff = paired["diff"].to_numpy()
        if not diff.size:
            return
        at = int(np.argmax(diff))
        if diff[at] > self.max:
            self.max = float(diff[at])
            worst = paired.row(at, named=True)
            self.worst = (int(worst["step"]), str(worst["group_id"]), str(worst["trajectory_id"]))
        self.n += diff.size
        self.histogram += np.bincount(np.ascontiguousarray(diff, dtype=np.float64).view(np.uint64) >> _HISTOGRAM_SHIFT,
                                      minlength=self.histogram.size)
        if self.kept is not None:
            self.kept.append(diff.copy())
            if self.n > EXACT_MEDIAN_VALUES:
                self.kept = None
        self.steps.append(paired.group_by("step").agg(pl.col("diff").max().alias("max_abs_diff"), pl.len().alias("n")))
        self.groups.append(paired.group_by("step", "group_id").agg(pl.col("diff").max().alias("max_abs_diff"),
                                                                    pl.len().alias("n")))

    def median(self) -> float:
        if self.kept is not None:
            return float(np.median(np.concatenate(self.kept)))
        rank = self.n // 2
        bin_ = int(np.searchsorted(np.cumsum(self.histogram), rank, side="right"))
        low = np.array([bin_ << _HISTOGRAM_SHIFT], dtype=np.uint64).view(np.float64)[0]
        high = np.array([(bin_ + 1) << _HISTOGRAM_SHIFT], dtype=np.uint64).view(np.float64)[0]
        return float(low) if not math.isfinite(high) else float((low + high) / 2)

    def fit(self, candidate: EstimatorChoice) -> CandidateFit:
        if self.error is not None or self.worst is None:
            return CandidateFit(candidate, math.inf, math.inf, 0, error=self.error or "nothing to compare")
        return CandidateFit(candidate, self.max, self.median(), self.n, *self.worst)


def identify_batches(
    batches: Iterable[tuple[pl.DataFrame, pl.DataFrame | None]],
    *,
    facts: RunFacts,
    config: Mapping[str, Any] | str | None = None,
    candidates: tuple[EstimatorChoice, ...] = CANDIDATES,
    tolerance: float = MATCH_TOLERANCE,
) -> Identification:
    """:func:`identify_advantages` over a run read in ``batches`` of whole steps (training
    trajectories and their token rows), in memory bounded by a batch: every estimator works
    within a step's batch, so each batch is recomputed on its own and the differences are
    gathered as they come (the median exact up to :data:`EXACT_MEDIAN_VALUES` per candidate).
    ``facts``: the whole run's, deciding which candidates it allows.
    """
    allowed = {c.label: c.missing(facts) for c in candidates}
    gathered = {c.label: _Accumulated() for c in candidates}
    unit: str | None = None
    scale = 1.0
    for trajectories, tokens in batches:
        found = _logged(trajectories, tokens)
        if found is None:
            continue  # steps with nothing logged
        logged, batch_unit = found
        if unit is not None and batch_unit != unit:
            raise EstimatorInputError(f"identify_advantages: advantages logged per {unit} in some steps and per "
                                      f"{batch_unit} in others")
        unit = batch_unit
        scale = max(scale, float(cast(float, logged["logged"].abs().max()) or 0.0))
        for candidate in candidates:
            accumulated = gathered[candidate.label]
            if allowed[candidate.label] or accumulated.error is not None:
                continue
            try:
                recomputed = _recompute(trajectories, tokens, candidate)
            except EstimatorInputError as error:
                accumulated.error = str(error)
                continue
            accumulated.add(_paired(logged, recomputed, unit))
    if unit is None:
        raise EstimatorInputError(
            "identify_advantages: no logged advantages: trajectories has no logged_advantage values and tokens no "
            "logged_advantages arrays")
    fits = []
    for candidate in candidates:
        lacking = allowed[candidate.label]
        fits.append(CandidateFit(candidate, math.inf, math.inf, 0, error="needs " + " and ".join(lacking))
                    if lacking else gathered[candidate.label].fit(candidate))
    # among equally close candidates, the one the config says the run trained with comes first
    declared = trained_with(config).choice
    ranked = tuple(sorted(fits, key=lambda f: (f.max_abs_diff, f.median_abs_diff, not f.candidate.computes_as(declared))))
    best = ranked[0]
    if not math.isfinite(best.max_abs_diff):
        reasons = "; ".join(f"{f.candidate.label}: {f.error}" for f in ranked[:3])
        raise EstimatorInputError(f"identify_advantages: no candidate could be recomputed on this run ({reasons})")
    matched = best.max_abs_diff <= tolerance * scale
    equivalent = tuple(f for f in ranked[1:] if matched and f.max_abs_diff <= tolerance * scale)
    chosen = gathered[best.candidate.label]
    departures = pl.DataFrame() if matched else _departures(pl.concat(chosen.groups), tolerance * scale)
    steps = pl.concat(chosen.steps).group_by("step").agg(pl.col("max_abs_diff").max(), pl.col("n").sum()).sort("step")
    return Identification(best, ranked, matched, tolerance * scale, unit, equivalent, departures, steps)


def _logged(trajectories: pl.DataFrame, tokens: pl.DataFrame | None) -> tuple[pl.DataFrame, str] | None:
    """Long frame of logged values: run_id, step, trajectory_id, group_id, position (-1 per
    trajectory), logged; and its unit. None when nothing is logged."""
    keys = ["run_id", "step", "trajectory_id", "group_id"]
    if tokens is not None and "logged_advantages" in tokens.columns and tokens["logged_advantages"].null_count() < tokens.height:
        present = tokens.select("run_id", "trajectory_id", "response_mask", "logged_advantages").filter(
            pl.col("logged_advantages").is_not_null())
        uneven = present.filter(pl.col("logged_advantages").list.len() != pl.col("response_mask").list.len())
        if uneven.height:
            row = uneven.row(0, named=True)
            raise EstimatorInputError(
                f"identify_advantages: trajectory {row['trajectory_id']!r}: logged_advantages has "
                f"{len(row['logged_advantages'])} entries but response_mask has {len(row['response_mask'])}")
        rows = (
            present
            .join(trajectories.select(keys), on=["run_id", "trajectory_id"], how="inner")
            .with_columns(pl.int_ranges(0, pl.col("response_mask").list.len()).alias("position"))
            .explode(["response_mask", "logged_advantages", "position"])
            .filter(pl.col("response_mask"))
            .select(*keys, "position", pl.col("logged_advantages").cast(pl.Float64).alias("logged"))
        )
        return rows, "model tokens"
    if "logged_advantage" in trajectories.columns and trajectories["logged_advantage"].null_count() < trajectories.height:
        rows = trajectories.filter(pl.col("logged_advantage").is_not_null()).select(
            *keys, pl.lit(-1, dtype=pl.Int64).alias("position"), pl.col("logged_advantage").cast(pl.Float64).alias("logged"))
        return rows, "trajectories"
    return None


def _recompute(trajectories: pl.DataFrame, tokens: pl.DataFrame | None, candidate: EstimatorChoice) -> pl.DataFrame:
    from trajlens.estimators.adapters import recompute
    from trajlens.estimators.registry import Input

    spec = estimator_spec(candidate.estimator)
    uses_tokens = bool(spec.inputs & (Input.TOKEN_ARRAYS | Input.TOKEN_COUNTS))
    return recompute(trajectories, tokens if uses_tokens else None, candidate.estimator, **dict(candidate.options))


def _paired(logged: pl.DataFrame, recomputed: pl.DataFrame, unit: str) -> pl.DataFrame:
    """``logged`` with the recomputed value beside each entry, and ``diff`` = |logged - recomputed|."""
    if unit == "model tokens" and "token_advantages" in recomputed.columns:
        per_token = (
            recomputed.select("run_id", "trajectory_id", "token_advantages")
            .with_columns(pl.int_ranges(0, pl.col("token_advantages").list.len()).alias("position"))
            .explode(["token_advantages", "position"])
            .select("run_id", "trajectory_id", "position", pl.col("token_advantages").cast(pl.Float64).alias("value"))
        )
        paired = logged.join(per_token, on=["run_id", "trajectory_id", "position"], how="left")
    else:
        paired = logged.join(recomputed.select("run_id", "trajectory_id", pl.col("advantage").alias("value")),
                             on=["run_id", "trajectory_id"], how="left")
    return paired.with_columns((pl.col("logged") - pl.col("value")).abs().fill_nan(math.inf).fill_null(math.inf).alias("diff"))


def _departures(groups: pl.DataFrame, tolerance: float) -> pl.DataFrame:
    """Per (step, group_id) maxima and counts (gathered batch by batch) above ``tolerance``, largest first."""
    return (
        groups
        .group_by("step", "group_id")
        .agg(pl.col("max_abs_diff").max(), pl.col("n").sum())
        .filter(pl.col("max_abs_diff") > tolerance)
        .sort(["max_abs_diff", "step", "group_id"], descending=[True, False, False])
    )


def _json_float(value: float) -> float | None:
    return value if math.isfinite(value) else None

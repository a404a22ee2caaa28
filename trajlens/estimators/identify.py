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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple, TypeAlias, cast

import numpy as np
import polars as pl
import pyarrow as pa

from trajlens.estimators._arrays import flat_list
from trajlens.estimators._errors import EstimatorInputError
from trajlens.estimators.registry import ESTIMATOR_REGISTRY, RunFacts, run_facts
from trajlens.estimators.spec import EstimatorChoice
from trajlens.estimators.trained import trained_with
from trajlens.frames import as_frame

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
        measured = f"max |diff| {fit.max_abs_diff:.1e} over {fit.n:,} {self.unit}{self._of_steps}"
        if self.matched:
            also = "; ".join(other.candidate.doc for other in self.equivalent)
            return f"{fit.candidate.doc}: {measured}" + (f" (indistinguishable here from: {also})" if also else "")
        where = ", ".join(f"step {row['step']} group {row['group_id']} ({row['max_abs_diff']:.2g})"
                          for row in self.departures.head(5).iter_rows(named=True))
        return (f"no candidate matches within {self.tolerance:.0e}; closest: {fit.candidate.doc}: {measured}"
                + (f"; it departs most at {where}" if where else ""))

    @property
    def _of_steps(self) -> str:
        """The steps the evidence covers: `` of step 3`` (one step decided), `` of 12 steps``."""
        if "step" not in self.steps.columns or self.steps.is_empty():
            return ""
        return f" of step {self.steps['step'][0]}" if self.steps.height == 1 else f" of {self.steps.height:,} steps"

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
    trajectories = as_frame(trajectories, "identify_advantages: trajectories")
    tokens = None if tokens is None else as_frame(tokens, "identify_advantages: tokens")
    return identify_batches([(trajectories, tokens)], facts=run_facts(trajectories, tokens, config), config=config,
                            candidates=candidates, tolerance=tolerance)


EXACT_MEDIAN_VALUES = 4_000_000
"""Differences kept for exact medians, shared among the candidates compared (32 MB in all);
beyond a candidate's share (a stored run read a batch of steps at a time) its median comes from
a histogram of the differences' exponent and leading 8 mantissa bits (4 MB): the midpoint of
the bin holding it, within 2^-9 relative."""
_HISTOGRAM_SHIFT = 44


class _Accumulated:
    """One candidate's differences, gathered batch after batch."""

    def __init__(self, medians: bool = True, exact: int = EXACT_MEDIAN_VALUES) -> None:
        self.max = -math.inf
        self.exact = exact
        """Differences kept for an exact median, at most."""
        self.worst: tuple[int, str, str] | None = None
        self.n = 0
        self.medians = medians
        self.kept: list[tuple[np.ndarray, np.ndarray | None]] | None = [] if medians else None
        """The differences so far, each with how many values it stands for (None: one each)."""
        # differences are >= 0 (infinite at most, never NaN): the sign bit is clear, 19 bits count
        self.histogram = np.zeros(1 << (63 - _HISTOGRAM_SHIFT) if medians else 0, dtype=np.int64)
        self.rows: list[_RowMaxima] = []
        """What was compared, kept as it came (its arrays, and the batch's keys it shares with the
        other candidates): the rows' maxima are only summed up for the candidate named."""
        self.error: str | None = None

    def add(self, paired: _Paired) -> None:
        from trajlens.estimators._compiled import largest_and_histogram

        diff, weights = paired.diff, paired.weights
        if not diff.size:
            return
        # in one pass, compiled (a run-length pairing is short: NumPy's)
        counted = self.medians and largest_and_histogram is not None and weights is None
        at = int(largest_and_histogram(diff, diff.view(np.int64), _HISTOGRAM_SHIFT, self.histogram) if counted
                 else np.argmax(diff))
        if diff[at] > self.max:
            self.max = float(diff[at])
            worst = paired.keys.row(paired.rows.row_at(at), named=True)
            self.worst = (int(worst["step"]), str(worst["group_id"]), str(worst["trajectory_id"]))
        self.n += paired.count
        self.rows.append(paired.per_row())
        if not self.medians:
            return
        if not counted:
            bins = diff.view(np.int64) >> _HISTOGRAM_SHIFT  # differences are >= 0: the sign bit is clear
            low, high = int(bins.min()), int(bins.max())
            bins -= low
            self.histogram[low:high + 1] += np.bincount(bins, weights, minlength=high - low + 1).astype(np.int64)
        if self.kept is not None:
            self.kept.append((diff, weights))
            if self.n > self.exact:
                self.kept = None

    def median(self) -> float:
        if not self.medians:
            return math.nan
        if self.kept is not None:
            return _median(self.kept)
        rank = self.n // 2
        bin_ = int(np.searchsorted(np.cumsum(self.histogram), rank, side="right"))
        if bin_ == 0:  # the bin of exact zeros (and differences below 2^-1012)
            return 0.0
        low = np.array([bin_ << _HISTOGRAM_SHIFT], dtype=np.uint64).view(np.float64)[0]
        high = np.array([(bin_ + 1) << _HISTOGRAM_SHIFT], dtype=np.uint64).view(np.float64)[0]
        return float(low) if not math.isfinite(high) else float((low + high) / 2)

    def fit(self, candidate: EstimatorChoice) -> CandidateFit:
        if self.error is not None or self.worst is None:
            return CandidateFit(candidate, math.inf, math.inf, 0, error=self.error or "nothing to compare")
        return CandidateFit(candidate, self.max, self.median(), self.n, *self.worst)


def _median(kept: list[tuple[np.ndarray, np.ndarray | None]]) -> float:
    """``np.median`` of the differences ``kept``, each repeated as many times as its weight says."""
    diff = np.concatenate([d for d, _ in kept])
    if all(w is None for _, w in kept):
        return float(np.median(diff))
    weights = np.concatenate([np.ones(d.size, dtype=np.int64) if w is None else w for d, w in kept])
    order = np.argsort(diff, kind="stable")
    ends = np.cumsum(weights[order])  # the position after each value's last copy, in sorted order
    n = int(ends[-1])
    lower, upper = (diff[order][np.searchsorted(ends, (n - 1) // 2, side="right")],
                    diff[order][np.searchsorted(ends, n // 2, side="right")])
    return float(np.mean([lower, upper]))  # the two middle values, as np.median takes them


def identify_batches(
    batches: Iterable[tuple[pl.DataFrame, pl.DataFrame | None]],
    *,
    facts: RunFacts | None,
    config: Mapping[str, Any] | str | None = None,
    candidates: tuple[EstimatorChoice, ...] = CANDIDATES,
    tolerance: float = MATCH_TOLERANCE,
    flat_step: FlatStep | None = None,
    medians: bool = True,
    run: pl.DataFrame | None = None,
) -> Identification:
    """:func:`identify_advantages` over a run read in ``batches`` of whole steps (training
    trajectories and their token rows), in memory bounded by a batch (an :class:`Identifier`
    fed each batch in turn; its arguments are this function's)."""
    identifier = Identifier(facts=facts, config=config, candidates=candidates, tolerance=tolerance,
                            flat_step=flat_step, medians=medians, run=run)
    for trajectories, tokens in batches:
        identifier.add(trajectories, tokens)
    return identifier.result()


class Identifier:
    """:func:`identify_advantages` fed a batch of whole steps at a time (:meth:`add`), with its
    verdict over everything fed at the end (:meth:`result`): every estimator works within a
    step's batch, so each batch is recomputed on its own and the differences are gathered as
    they come (the median exact up to a candidate's share of :data:`EXACT_MEDIAN_VALUES`).
    Candidates whose advantages on a batch are the very same share their differences, computed
    once.

    ``facts``: the whole run's, deciding which candidates it allows; None decides from each
    batch's own frames (a candidate a batch does not allow is then left out of the verdict).
    ``flat_step``: the recomputation of the token-level candidates it can do on a batch of one
    step's flat buffers (the run layer's, which ``trajlens advantages`` runs too); the others,
    and every candidate without it, are recomputed on the batch's frames. ``medians=False``
    leaves each fit's median difference NaN, and the differences it would need ungathered (a
    check that reads the maxima alone). ``run``: the run's training trajectories, whole, when the
    caller holds them: the candidates that read nothing of the token arrays are recomputed on
    them at once (every estimator works within a step, so a batch's rows of that are what the
    batch alone gives), and each batch takes its rows, rather than preparing them batch after batch;
    a channel estimator's channels are then named and ordered over the run, as attribution names them.
    """

    def __init__(self, *, facts: RunFacts | None = None, config: Mapping[str, Any] | str | None = None,
                 candidates: tuple[EstimatorChoice, ...] = CANDIDATES, tolerance: float = MATCH_TOLERANCE,
                 flat_step: FlatStep | None = None, medians: bool = True, run: pl.DataFrame | None = None) -> None:
        self.config = config
        self.candidates = candidates
        self.tolerance = tolerance
        self.flat_step = flat_step
        self.facts = facts
        self.lacking: dict[str, list[str]] = {} if facts is None else {
            c.label: list(missing) for c in candidates if (missing := c.missing(facts))}
        share = EXACT_MEDIAN_VALUES // max(1, sum(c.label not in self.lacking for c in candidates))
        self.gathered = {c.label: _Accumulated(medians, share) for c in candidates}
        self.unit: str | None = None
        self.scale = 1.0
        self.run = None if run is None else run.select("run_id", "trajectory_id")
        self.whole = _whole_run(run, tuple(c for c in candidates if c.label not in self.lacking))
        """Label -> each trajectory's advantage (float64; infinite where it has none) of the
        candidate recomputed on ``run``, in its rows' order (the candidates that read no token
        array and raise nothing there)."""

    def add(self, trajectories: pl.DataFrame, tokens: pl.DataFrame | None,
            flat_step: FlatStep | None = None) -> pl.DataFrame | None:
        """Compare one batch of whole steps. Returns, per step of it with logged values, the
        closest candidate's largest difference relative to that step's own max(1, max |logged|)
        (``step``, ``relative``); None when the batch logged nothing, and no rows when no
        candidate could be recomputed on it (there is nothing to measure; :meth:`result` says
        why). ``flat_step``: this batch's, in place of the identifier's."""
        from trajlens.estimators.adapters import Recomputer

        flat_step = flat_step or self.flat_step
        found = _logged(trajectories, tokens)
        if found is None:
            return None  # steps with nothing logged
        if self.unit is not None and found.unit != self.unit:
            raise EstimatorInputError(f"identify_advantages: advantages logged per {self.unit} in some steps and per "
                                      f"{found.unit} in others")
        self.unit = found.unit
        self.scale = max(self.scale, float(np.abs(found.logged).max(initial=0.0)))
        if self.facts is None:
            facts = run_facts(trajectories, tokens, self.config)
            for candidate in self.candidates:
                if (missing := candidate.missing(facts)):
                    self.lacking.setdefault(candidate.label, list(missing))
        todo = tuple(c for c in self.candidates
                     if c.label not in self.lacking and self.gathered[c.label].error is None)
        flat = flat_step(trajectories, tokens, todo, mask=found.token_mask) \
            if flat_step is not None and found.positions is not None else {}
        index = found.flat_index(trajectories, tokens) if flat else None
        closest = np.full(found.steps.size, math.inf)  # per step: the closest candidate's largest difference
        compared = False
        # what to pair with the logged values (a flat result, or a recomputation of whole
        # trajectories), each with the candidates it stands for: conventions that give the very
        # same advantages on this batch are paired once
        pending: list[tuple[Any, list[_Accumulated]]] = []
        recomputer: Recomputer | None = None  # the batch prepared once for every candidate recomputed on it
        rows = _rows_in(self.run, found.keys) if self.whole else None  # the logged rows' rows of the whole run

        def add(paired: _Paired, members: list[_Accumulated]) -> None:
            nonlocal closest, compared
            for accumulated in members:
                accumulated.add(paired)
                compared = True
                if paired.diff.size:
                    closest = np.minimum(closest, found.step_largest(accumulated.rows[-1].largest))

        for candidate in todo:
            accumulated = self.gathered[candidate.label]
            if candidate.label in flat:
                result = flat[candidate.label]
                if isinstance(result, Exception):
                    accumulated.error = str(result)
                else:
                    pending.append((result, [accumulated]))
                continue
            if rows is not None and candidate.label in self.whole:
                _pair_once(pending, _PerRow(self.whole[candidate.label][rows]), accumulated)
                continue
            try:
                if recomputer is None:
                    recomputer = Recomputer(trajectories, tokens, readers_only=True)
                recomputed = recomputer.recompute(candidate.estimator, **dict(candidate.options))
            except EstimatorInputError as error:
                accumulated.error = str(error)
                continue
            if "token_advantages" in recomputed.columns:  # a step's token arrays: paired now, not kept
                add(found.paired(recomputed), [accumulated])
                continue
            _pair_once(pending, recomputed, accumulated)
        for source, members in pending:
            add(found.paired(source) if isinstance(source, pl.DataFrame)
                else found.paired_values(source.values) if isinstance(source, _PerRow)
                else found.paired_flat(source, cast(np.ndarray, index)), members)
        relative = found.step_relative(closest)
        return relative if compared else relative.clear()

    def result(self) -> Identification:
        """The verdict over every batch fed (:class:`Identification`).

        Raises :class:`EstimatorInputError` when nothing fed was logged, or no candidate could
        be recomputed.
        """
        if self.unit is None:
            raise EstimatorInputError(
                "identify_advantages: no logged advantages to identify (trajectories has no logged_advantage values "
                "and tokens no logged_advantages arrays): a log that keeps them is needed, such as verl's rollout "
                "dumps with advantages or TRL's completions table")
        fits = []
        for candidate in self.candidates:
            lacking = self.lacking.get(candidate.label)
            fits.append(CandidateFit(candidate, math.inf, math.inf, 0, error="needs " + " and ".join(lacking))
                        if lacking else self.gathered[candidate.label].fit(candidate))
        # among equally close candidates, the one the config says the run trained with comes first
        declared = trained_with(self.config).choice
        ranked = tuple(sorted(fits, key=lambda f: (f.max_abs_diff, f.median_abs_diff,
                                                   not f.candidate.computes_as(declared))))
        best = ranked[0]
        if not math.isfinite(best.max_abs_diff):
            reasons = "; ".join(f"{f.candidate.label}: {f.error or 'a logged or recomputed value is infinite'}"
                                for f in ranked[:3])
            raise EstimatorInputError(f"identify_advantages: no candidate could be recomputed on this run ({reasons})")
        tolerance = self.tolerance * self.scale
        matched = best.max_abs_diff <= tolerance
        equivalent = tuple(f for f in ranked[1:] if matched and f.max_abs_diff <= tolerance)
        rows = pl.concat([part.frame() for part in self.gathered[best.candidate.label].rows])
        departures = pl.DataFrame() if matched else _departures(rows, tolerance)
        steps = rows.group_by("step").agg(pl.col("max_abs_diff").max(), pl.col("n").sum()).sort("step")
        return Identification(best, ranked, matched, tolerance, self.unit, equivalent, departures, steps)


def _whole_run(run: pl.DataFrame | None, candidates: tuple[EstimatorChoice, ...]) -> dict[str, np.ndarray]:
    """Each of ``candidates`` that reads no token array recomputed on ``run`` (one preparation for
    them all): its advantages, in ``run``'s order, infinite where null (as :meth:`_Logged.paired`
    reads them). One whose inputs fail there is left to the batches, which find its error where it is."""
    from trajlens.estimators.adapters import Recomputer
    from trajlens.estimators.registry import reads_tokens

    if run is None or run.is_empty():
        return {}
    whole: dict[str, np.ndarray] = {}
    recomputer: Recomputer | None = None
    for candidate in candidates:
        if reads_tokens(candidate.estimator):
            continue
        try:
            recomputer = recomputer or Recomputer(run)
            recomputed = recomputer.recompute(candidate.estimator, **dict(candidate.options))
        except EstimatorInputError:
            continue
        whole[candidate.label] = recomputed["advantage"].cast(pl.Float64).fill_null(math.inf).to_numpy()
    return whole


def _rows_in(run: pl.DataFrame | None, keys: pl.DataFrame) -> np.ndarray | None:
    """Each row of ``keys``'s row in ``run`` (by run and trajectory); None where one is not there."""
    if run is None:
        return None
    ids = ["run_id", "trajectory_id"]
    found = keys.select(ids).join(run.with_row_index("__run"), on=ids, how="left", maintain_order="left")["__run"]
    return None if found.null_count() else found.to_numpy()


class _PerRow(NamedTuple):
    """One recomputed advantage per row of a batch's logged keys."""

    values: np.ndarray


def _pair_once(pending: list[tuple[Any, list[_Accumulated]]], source: pl.DataFrame | _PerRow,
               accumulated: _Accumulated) -> None:
    """``accumulated``'s candidate among the members of the source in ``pending`` of the same
    kind with the very same per-trajectory advantages (in the same rows), else ``source`` added
    to ``pending`` with it: candidates that agree on the batch are paired once."""
    values = _advantages_of(source)
    for other, members in pending:
        if type(other) is type(source) and np.array_equal(_advantages_of(other), values, equal_nan=True):
            members.append(accumulated)
            return
    pending.append((source, [accumulated]))


def _advantages_of(source: pl.DataFrame | _PerRow) -> np.ndarray:
    return source.values if isinstance(source, _PerRow) else source["advantage"].to_numpy()


@dataclass(frozen=True)
class _Paired:
    """Each compared value's ``diff`` = |logged - recomputed| (infinite where the recomputation
    has no finite value), laid out by the ``rows`` of ``keys`` they belong to; with ``weights``,
    each difference stands for that many values (a run of equal logged values in a row)."""

    keys: pl.DataFrame
    diff: np.ndarray
    rows: _Rows
    weights: np.ndarray | None = None

    @property
    def count(self) -> int:
        """Values compared."""
        return self.diff.size if self.weights is None else int(self.weights.sum())

    def per_row(self) -> _RowMaxima:
        """Each compared row's largest difference and count."""
        rows = self.rows
        largest = np.maximum.reduceat(self.diff, rows.starts) if rows.compared.size else np.zeros(0)
        return _RowMaxima(self.keys, rows.compared, largest, rows.counts)


class _Rows(NamedTuple):
    """Which rows of a batch's keys have compared values (``row`` ascending), where each row's
    values start and how many there are: the same for every candidate of the batch."""

    compared: np.ndarray
    starts: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, counts: np.ndarray) -> _Rows:
        """From how many values each row of the keys has (the values laid out row by row)."""
        compared = np.flatnonzero(counts)
        kept = counts[compared].astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(kept)[:-1]]).astype(np.int64)
        return cls(compared, starts, kept)

    def row_at(self, value: int) -> int:
        """The row of the keys the value at position ``value`` belongs to."""
        return int(self.compared[np.searchsorted(self.starts, value, side="right") - 1])


RUNS_WORTH = 8
"""Logged values per run of equal values, at least, for the comparisons to take the runs."""


class _Runs(NamedTuple):
    """A batch's logged values as runs of equal values within each row."""

    values: np.ndarray
    lengths: np.ndarray
    """Values in each run."""
    row: np.ndarray
    """Each run's row of the keys."""
    rows: _Rows
    """The compared rows, their runs laid out row by row (``starts`` in runs, ``counts`` in values)."""


@dataclass(frozen=True)
class _RowMaxima:
    """Per compared row (``rows`` of ``keys``): its largest difference and how many values."""

    keys: pl.DataFrame
    rows: np.ndarray
    largest: np.ndarray
    counts: np.ndarray

    def frame(self) -> pl.DataFrame:
        """``step``, ``group_id``, ``max_abs_diff`` and ``n`` of each compared row."""
        return self.keys[self.rows].select("step", "group_id").with_columns(
            pl.Series("max_abs_diff", self.largest, dtype=pl.Float64), pl.Series("n", self.counts, dtype=pl.UInt32))


@dataclass(frozen=True)
class _Logged:
    """A batch's logged advantages as flat arrays: per row of ``keys`` (run_id, step,
    trajectory_id, group_id; one per trajectory with logged values), its ``counts`` values in row
    order. Per token: ``positions`` are the model tokens among the rows' ``lengths`` positions."""

    keys: pl.DataFrame
    unit: str
    logged: np.ndarray
    counts: np.ndarray
    lengths: np.ndarray | None = None
    positions: np.ndarray | None = None
    """Per token: where each logged value lies among the rows' positions laid end to end (the
    response mask's model tokens)."""
    orders: dict[str, Any] = field(default_factory=dict, compare=False)
    """:meth:`order_of`'s last answer, and the recomputation's ids it answered for."""
    token_mask: Any = field(default=None, compare=False)
    """Per token: the ``flat_list`` of the tokens frame's response mask, in its rows' order, when
    every row logged values (the flat kernels read the same); None otherwise."""

    @cached_property
    def rows(self) -> _Rows:
        return _Rows.of(self.counts)

    @cached_property
    def runs(self) -> _Runs | None:
        """The logged values as runs of equal values within each row, when there are few (an
        estimator of whole trajectories logs one value over each one's tokens); None otherwise."""
        rows, logged = self.rows, self.logged
        if logged.size < RUNS_WORTH or not rows.compared.size:
            return None
        begins = np.ones(logged.size, dtype=bool)
        begins[1:] = logged[1:] != logged[:-1]  # (a NaN begins a run of its own)
        begins[rows.starts] = True
        starts = np.flatnonzero(begins)
        if starts.size * RUNS_WORTH > logged.size:
            return None
        lengths = np.diff(np.append(starts, logged.size))
        row = rows.compared[np.searchsorted(rows.starts, starts, side="right") - 1]
        return _Runs(logged[starts], lengths, row, _Rows(rows.compared, np.searchsorted(starts, rows.starts), rows.counts))

    def order_of(self, recomputed: pl.DataFrame) -> pl.Series:
        """Each row of the keys' row in ``recomputed`` (null where it has none); the recomputations
        of a batch share their order, so it is found once."""
        ids = recomputed.select("run_id", "trajectory_id")
        cached = self.orders.get("ids")
        if cached is not None and cached.equals(ids):
            found: pl.Series = self.orders["order"]
            return found
        order = self.keys.select("run_id", "trajectory_id").join(
            ids.with_row_index("__recomputed"), on=["run_id", "trajectory_id"], how="left",
            maintain_order="left")["__recomputed"]
        self.orders.update(ids=ids, order=order)
        return order

    @cached_property
    def row(self) -> np.ndarray:
        """Each value's row of ``keys``."""
        return np.repeat(np.arange(self.counts.size), self.counts)

    @cached_property
    def _step_of(self) -> tuple[np.ndarray, np.ndarray]:
        return np.unique(self.keys["step"].to_numpy()[self.rows.compared], return_inverse=True)

    @property
    def steps(self) -> np.ndarray:
        """The steps of the compared rows, ascending."""
        return self._step_of[0]

    def step_largest(self, largest: np.ndarray) -> np.ndarray:
        """Per step of :attr:`steps`, the largest of ``largest`` (one difference per compared row)."""
        steps, step_of = self._step_of
        diff = np.full(steps.size, -np.inf)
        np.maximum.at(diff, step_of, largest)
        return diff

    def step_relative(self, largest: np.ndarray) -> pl.DataFrame:
        """``largest`` (one difference per step of :attr:`steps`) relative to the step's max(1,
        max |logged|): ``step``, ``relative``; infinite where an infinite value was logged (no
        finite recomputation matches it)."""
        rows = self.rows
        logged = np.fmax.reduceat(np.abs(self.logged), rows.starts) if rows.compared.size else np.zeros(0)
        steps, step_of = self._step_of
        scale = np.ones(steps.size)
        np.fmax.at(scale, step_of, logged)  # max(1, max |logged|), a NaN left out
        with np.errstate(invalid="ignore"):
            relative = np.where(np.isinf(scale), np.inf, largest / scale)
        return pl.DataFrame({"step": steps, "relative": relative})

    def paired(self, recomputed: pl.DataFrame) -> _Paired:
        """The logged values beside ``recomputed`` (one row per trajectory: ``advantage``, and
        ``token_advantages`` from a token-level estimator), row by row without a join per value."""
        order = self.order_of(recomputed)
        if self.unit == "model tokens" and "token_advantages" in recomputed.columns:
            values = self._token_values(recomputed["token_advantages"].gather(order))
        else:
            per_row = recomputed["advantage"].cast(pl.Float64).gather(order).fill_null(math.inf).to_numpy()
            return self.paired_values(per_row)
        return self._paired(values)

    def paired_values(self, per_row: np.ndarray) -> _Paired:
        """``|logged - per_row[row]|``: one recomputed value per row of the keys, beside each of
        its logged values (one compiled pass; NumPy's gather and expressions without numba)."""
        from trajlens.estimators._compiled import abs_diff_rows

        runs = self.runs
        if runs is not None:  # one difference per run of equal logged values
            diff = np.abs(runs.values - per_row[runs.row])
            diff[np.isnan(diff)] = math.inf
            return _Paired(self.keys, diff, runs.rows, runs.lengths)
        if abs_diff_rows is None:
            return self._paired(per_row[self.row])
        diff = np.empty(self.logged.size)
        abs_diff_rows(self.logged, self.counts.astype(np.int64, copy=False), per_row, diff)
        return _Paired(self.keys, diff, self.rows)

    def paired_flat(self, flat: FlatAdvantages, index: np.ndarray) -> _Paired:
        """The logged values beside ``flat``, one step's token advantages, at ``index``
        (:meth:`flat_index`)."""
        from trajlens.estimators._compiled import abs_diff_at

        base, shift, scale = flat if isinstance(flat, tuple) else (flat, 0.0, 1.0)
        if abs_diff_at is None or base.dtype.kind != "f":
            # (base - shift) * scale, at the index alone
            return self._paired(base[index] if isinstance(flat, np.ndarray) else (base[index] - shift) * scale)
        diff = np.empty(self.logged.size)
        kind = np.result_type(base, shift, scale).type  # NumPy's promotion: float32 stays float32
        abs_diff_at(self.logged, base, index, np.array([kind(shift)]), np.array([kind(scale)]), diff)
        return _Paired(self.keys, diff, self.rows)

    def _paired(self, values: np.ndarray) -> _Paired:
        """``|logged - values|``, infinite where either side is not a number (no match)."""
        diff = np.subtract(self.logged, values, dtype=np.float64)
        np.abs(diff, out=diff)
        diff[np.isnan(diff)] = math.inf  # |inf - inf|, a NaN on either side
        return _Paired(self.keys, diff, self.rows)

    def flat_index(self, trajectories: pl.DataFrame, tokens: pl.DataFrame | None) -> np.ndarray:
        """Where each logged value lies among the token rows of ``trajectories`` laid end to end
        in its order (every trajectory with a row in ``tokens``), as the flat kernels lay them."""
        assert self.lengths is not None and self.positions is not None and tokens is not None
        ids = ["run_id", "trajectory_id"]
        if self.keys.height == trajectories.height and self.keys.select(ids).equals(trajectories.select(ids)):
            return self.positions  # every trajectory logged, its token rows in its order
        lengths = tokens.select(*ids, pl.col("response_mask").list.len().alias("__n"))
        order = trajectories.select(ids).join(lengths, on=ids, how="left", maintain_order="left")["__n"]
        counts = order.to_numpy().astype(np.int64)
        starts = trajectories.select(ids).with_columns(pl.Series("__start", np.cumsum(counts) - counts))
        start = self.keys.select(ids).join(starts, on=ids, how="left", maintain_order="left")["__start"].to_numpy()
        within = np.arange(int(self.lengths.sum())) - np.repeat(np.cumsum(self.lengths) - self.lengths, self.lengths)
        index: np.ndarray = (np.repeat(start, self.lengths) + within)[self.positions]
        return index

    def _token_values(self, lists: pl.Series) -> np.ndarray:
        """Recomputed token values at the logged model tokens; infinite where a row's array has
        another length than its response mask (or none)."""
        assert self.lengths is not None and self.positions is not None
        full = np.full(int(self.lengths.sum()), math.inf)
        fits = (lists.list.len().fill_null(-1).to_numpy() == self.lengths)
        if fits.any():
            kept = lists.filter(pl.Series(fits)).explode().cast(pl.Float64).fill_null(math.inf)
            full[np.repeat(fits, self.lengths)] = kept.to_numpy()
        values: np.ndarray = full[self.positions]
        return values


FlatAdvantages: TypeAlias = "np.ndarray | tuple[np.ndarray, float, float]"
"""One step's token advantages over its trajectories' token rows laid end to end in their order:
the values, or ``(base, shift, scale)`` for ``(base - shift) * scale`` (a whitened scan)."""
FlatStep: TypeAlias = Callable[..., Mapping[str, "FlatAdvantages | Exception"]]
"""One step's trajectories and tokens, and candidates (and ``mask=``: the ``flat_list`` of the
tokens' response mask in their order, or None) -> per label it recomputed, its
:data:`FlatAdvantages` or the input error; labels it leaves out are recomputed on the frames."""


LOGGED_COLUMNS: dict[str, str] = {"trajectories": "logged_advantage", "tokens": "logged_advantages"}
"""The column of the advantages a trainer logged, per table: one per trajectory, or one per token."""


def logs_advantages(frame: pl.DataFrame | None, table: str) -> bool:
    """Whether ``frame`` (rows of ``table``: ``trajectories`` or ``tokens``) holds a logged advantage."""
    column = LOGGED_COLUMNS[table]
    return frame is not None and column in frame.columns and frame[column].null_count() < frame.height


def _logged(trajectories: pl.DataFrame, tokens: pl.DataFrame | None) -> _Logged | None:
    """The batch's logged advantages (:class:`_Logged`); None when nothing is logged."""
    keys = ["run_id", "step", "trajectory_id", "group_id"]
    if logs_advantages(tokens, "tokens"):
        assert tokens is not None
        logged_lists, mask_lists = tokens["logged_advantages"], tokens["response_mask"]
        present = logged_lists.is_not_null()
        uneven = present & (logged_lists.list.len() != mask_lists.list.len())
        if uneven.any():
            row = tokens.filter(uneven).row(0, named=True)
            raise EstimatorInputError(
                f"identify_advantages: trajectory {row['trajectory_id']!r}: logged_advantages has "
                f"{len(row['logged_advantages'])} entries but response_mask has {len(row['response_mask'])}")
        # the token rows of the batch's trajectories with logged values, in the tokens' order
        rows = (tokens.select("run_id", "trajectory_id").with_row_index("__token").filter(present)
                .join(trajectories.select(keys), on=["run_id", "trajectory_id"], how="inner", maintain_order="left"))
        take = rows["__token"].to_numpy()
        mask_arrow, logged_arrow = mask_lists.to_arrow(), logged_lists.to_arrow()
        if take.size != tokens.height:  # (the join keeps the order: all rows kept means none moved)
            order = pa.array(take)
            mask_arrow, logged_arrow = mask_arrow.take(order), logged_arrow.take(order)
        response = flat_list(mask_arrow, np.bool_, False)
        lengths = response.lengths
        stored = logged_arrow.type.value_type.to_pandas_dtype()  # float32 as the schema has it; any float as it is
        model = np.flatnonzero(response.values)
        logged = flat_list(logged_arrow, stored, math.nan).values[model].astype(np.float64)
        per_row = np.diff(np.searchsorted(model, response.offsets))  # model tokens of each row
        return _Logged(rows.select(keys), "model tokens", logged, per_row, lengths, model,
                       token_mask=response if take.size == tokens.height else None)
    if logs_advantages(trajectories, "trajectories"):
        rows = trajectories.filter(pl.col("logged_advantage").is_not_null())
        return _Logged(rows.select(keys), "trajectories", rows["logged_advantage"].cast(pl.Float64).to_numpy(),
                       np.ones(rows.height, dtype=np.int64))
    return None


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

"""``attribute``: credit every call of a run under each estimator, measure classes, attribute drift.

Streams by step: the tool calls and token arrays of one step are read, classified, credited
and reduced to per-step class sums before the next step is read, so memory is bounded by one
step plus the per-trajectory summaries. Outcome and channel estimators are recomputed once on
the run's trajectories table (no token arrays needed, and GDPO's dynamic weights carry from
step to step); token estimators (GAE, REINFORCE) step by step.

The per-call table ``call_credit`` and the per-step table ``class_credit`` are written into the
store (views that SQL can join to ``call_classes``) when ``write=True``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from trajlens.attribution._rows import RowBlocks
from trajlens.attribution.calls import CREDITED_CALLS, step_call_credit
from trajlens.attribution.drift import DriftConfig, attribute_drift
from trajlens.attribution.statistics import channel_measures, class_summary, length_bias, reward_relevance
from trajlens.attribution.projection import PROJECTION_SCHEMA
from trajlens.attribution.verdicts import (
    EVIDENCE_SCHEMA, VERDICT_SCHEMA, drift_verdicts, structural_classes, verdict_order,
)
from trajlens.attribution.recomputations import (
    AGGREGATIONS, RECOMPUTATIONS, RunEstimator, other_conventions, own_recomputation, with_own,
)
from trajlens.estimators.spec import EstimatorChoice
from trajlens.errors import ConfigError
from trajlens.estimators.registry import RunFacts
from trajlens.run.facts import stored_facts
from trajlens.run.location import StoreLocation
from trajlens.run.reader import RunReader
from trajlens.run.splits import TRAIN_SPLIT
from trajlens.run.step_advantages import TOKEN_ESTIMATORS
from trajlens.run.trained import run_trained_with

MapSteps = Callable[["CreditStep", list[int]], Iterator[tuple[int, dict[str, pa.Table]]]]
"""``map_steps(function, steps)``: ``(step, function(location, run_id, step))`` for every step, in order."""

CALL_CREDIT_COLUMNS: dict[str, pl.DataType] = {
    "run_id": pl.String, "step": pl.Int64, "trajectory_id": pl.String, "call_index": pl.Int32,
    "primary_class": pl.String, "estimator": pl.String, "aggregation": pl.String, "advantage": pl.Float64,
    "push": pl.Float64, "tokens": pl.Float64, "token_start": pl.Int64, "token_end": pl.Int64, "fallback": pl.Boolean,
}
"""Columns of ``call_credit``: one row per call, estimator and aggregation. ``advantage`` is the
mean advantage over the call's credited tokens, ``push`` the sum over them of loss weight times
advantage, ``tokens`` their number, ``token_start``/``token_end`` the credited span (null under
the fallback), ``fallback`` whether the trajectory's advantage was spread over its calls by turn."""

CALL_CREDIT_SCHEMA: pa.Schema = pa.schema([
    (field.name, pa.string() if pa.types.is_large_string(field.type) else field.type)
    for field in pl.DataFrame(schema=CALL_CREDIT_COLUMNS).to_arrow().schema])
"""``call_credit`` as Arrow writes it (the columns above)."""

CALL_CREDIT_BUILT: pa.Schema = pa.schema([
    pa.field(f.name, pa.dictionary(pa.int32(), pa.string())) if pa.types.is_string(f.type) else f
    for f in CALL_CREDIT_SCHEMA])
"""``call_credit`` as each step's rows are built and written: its strings as dictionaries (the
step's names once, each row a code into them), which Parquet stores as its own dictionary pages
with no string copied or hashed. Files hold plain strings (:data:`CALL_CREDIT_WRITE` keeps no
Arrow schema), so every reader sees :data:`CALL_CREDIT_SCHEMA`."""

CALL_CREDIT_WRITE: dict[str, Any] = {
    "compression": "lz4",
    "use_dictionary": [f.name for f in CALL_CREDIT_SCHEMA if pa.types.is_string(f.type)],
    "write_statistics": [f.name for f in CALL_CREDIT_SCHEMA if not pa.types.is_floating(f.type)],
    "store_schema": False,
}
"""How ``call_credit`` is written: dictionaries for its strings, min/max statistics for the
columns a query filters on (not the floats: their statistics took 40% of the write, a tenth of
``trajlens attribute`` on a run of 64 x 50 calls a step and 14 estimators), LZ4 (the rows of
such a run encode in half the time zstd takes, for a file 8% larger), and no stored Arrow schema:
the dictionaries the rows are built with read back as plain strings."""

CALLS_PER_BLOCK = 20_000
"""Tool calls classified together (a block of steps); bounds memory, amortises the classifier."""

CLASS_CREDIT_COLUMNS: tuple[str, ...] = (
    "run_id", "step", "stage", "stage_index", "primary_class", "estimator", "aggregation", "calls", "step_calls",
    "class_share", "credit", "share_pushed_up", "relative_credit", "relative_credit_scaled", "push_sum_scaled",
    "push_sumsq_scaled", "step_mean_scaled", "fallback_share",
)
"""Columns of ``class_credit``: one row per step, class, estimator and aggregation."""


@dataclass
class AttributionResult:
    """Everything :func:`attribute` found for one run, as Polars frames and sentences."""

    run_id: str
    own: RunEstimator
    recomputations: tuple[EstimatorChoice, ...]
    aggregations: tuple[str, ...]
    call_credit: pl.LazyFrame
    class_credit: pl.DataFrame
    class_summary: pl.DataFrame
    length_bias: pl.DataFrame
    channels: pl.DataFrame
    step_flags: pl.DataFrame
    """Per step and estimator: ``all_negative`` / ``all_positive`` batch flags."""
    drift: pl.DataFrame
    findings: list[str]
    cause_verdicts: list[str] = field(default_factory=list)
    """The findings on response length and collapsed reward channels, verdict first (:mod:`.causes`)."""
    verdicts: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=VERDICT_SCHEMA))
    """One row per drifting class: its verdict (estimator artefact, learning, unexplained), direction,
    onset, the run's estimator and aggregation, and the evidence that decided it (:mod:`.verdicts`)."""
    evidence: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=EVIDENCE_SCHEMA))
    """One row per drifting class and counterfactual: the cumulative push over the drift window."""
    projection: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=PROJECTION_SCHEMA))
    """One row per class and estimator: the final share its pushes would have produced (:mod:`.projection`)."""
    notes: list[str] = field(default_factory=list)
    """What was skipped or estimated (the fallback), in words."""
    fallback_calls: int = 0
    flags: list[str] = field(default_factory=list)
    """The findings that flag a problem: drift, a streak, length bias or a collapse under the run's estimator."""

    @property
    def flagged(self) -> bool:
        """Whether anything in the run calls for attention."""
        return bool(self.flags)

    def verdict_document(self) -> dict[str, Any]:
        """The verdicts as plain data (what ``trajlens attribute --json`` writes; see :mod:`.document`)."""
        from trajlens.attribution.document import verdict_document

        return verdict_document(self)


def attribute(
    store: Any,
    run_id: str,
    recomputations: tuple[EstimatorChoice, ...] | None = None,
    *,
    aggregations: tuple[str, ...] = AGGREGATIONS,
    drift: DriftConfig = DriftConfig(),
    stages: Any = "quartiles",
    write: bool = True,
    steps: Sequence[int] | None = None,
    progress: Callable[[str], None] | None = None,
    map_steps: MapSteps | None = None,
) -> AttributionResult:
    """Attribute the behaviour drift of ``run_id`` to the estimators that credited it.

    Args:
        store: an open :class:`trajlens.store.Store`.
        run_id: a run of the store.
        recomputations: estimators to compare (default :data:`RECOMPUTATIONS`, those the run's
            data allows). The run's own estimator is added when its config names one.
        aggregations: loss aggregation modes to compute each call's push under.
        drift: lag ``k`` and thresholds of drift attribution.
        stages: stages for ``class_summary`` and the drift test (see
            :func:`trajlens.classify.assign_stages`).
        write: save ``call_credit`` and ``class_credit`` into the store.
        steps: attribute these steps only (default: every training step of the run).
        progress: called with a short message after each step.
        map_steps: runs the step function (:class:`CreditStep`) over the steps, in order, as an
            engine does (``trajlens.engine``); None credits the steps here, a block at a time.
    """
    from trajlens.classify import assign_stages
    from trajlens.estimators import AGGREGATION_MODES

    store.require_runs([run_id])
    problems = [f"aggregation {m!r} is not one of {', '.join(AGGREGATION_MODES)}"
                for m in aggregations if m not in AGGREGATION_MODES]
    if not aggregations:
        problems.append(f"aggregations: expected at least one of {', '.join(AGGREGATION_MODES)}, found none")
    problems += [f"drift: {problem}" for problem in drift.problems()]
    if problems:
        raise ConfigError(problems)
    aggregations = tuple(dict.fromkeys(aggregations))  # each mode once, however often it was named
    runs = store.runs.filter(pl.col("run_id") == run_id).collect()
    trajectories = (store.trajectories.filter((pl.col("run_id") == run_id) & (pl.col("split") == TRAIN_SPLIT))
                    .collect().sort("step", "trajectory_id"))
    if steps is not None:
        trajectories = trajectories.filter(pl.col("step").is_in(list(steps)))
    if trajectories.height == 0:
        raise ConfigError([f"run {run_id!r} has no training trajectories to attribute"])
    held = trajectories["step"].n_unique()
    # A lag beyond a run that has room for the default one is refused; a run shorter than the
    # default lag is still attributed, on its stages (every lagged r is then n/a).
    if DriftConfig.k < held <= drift.k:
        raise ConfigError([f"lag k={drift.k}: run {run_id!r} has {held} training steps, so no step has one k steps "
                           f"after it to relate its credit to (k at most {held - 1})"])
    reader = RunReader.of(store, run_id)
    stored = stored_facts(reader, trajectories, runs["config"][0], store, runs["estimator"][0])
    facts, token_rows = stored.facts, stored.token_rows
    wanted = tuple(recomputations) if recomputations is not None else tuple(
        r for r in RECOMPUTATIONS if _compared_by_default(r, facts))
    trained = run_trained_with(store, run_id, trajectories)
    if recomputations is None:
        wanted = with_own(trained, wanted)
        wanted += other_conventions(trained, wanted)
    own = own_recomputation(trained, wanted)
    notes: list[str] = []
    if own.label is not None and trained.source == "identified":
        notes.append(f"the run's own estimator, {own.label}, is identified from its logged advantages "
                     f"({trained.evidence}); its config names none")
    usable = []
    lacking: dict[str, None] = {}
    for rec in wanted:
        missing = rec.missing(facts)
        if missing:
            lacking.update(dict.fromkeys(missing))
            if recomputations is not None or rec.label == own.label or rec.spec().channel_gap_note(facts):
                notes.append(f"{rec.label}: not computed (needs {', '.join(missing)})")
            continue
        usable.append(rec)
    if not usable:
        why = '; '.join(notes) or f"the run lacks what they need: {'; '.join(lacking) or 'trajectories'}"
        raise ConfigError([f"run {run_id!r}: no estimator can be recomputed ({why})"])
    if own.label is None and trained.choice is not None:
        notes.append(f"the run's own estimator, {trained.choice.label}, is not among the recomputations asked for: "
                     "no estimator is marked as the run's")
        own = RunEstimator(None, own.aggregation, own.aggregation_logged, not_computed=trained.choice.label)
    elif own.label is None:
        notes.append("the run's own estimator is not known from its config: no estimator is marked as the run's")
    elif own.label not in [r.label for r in usable]:
        own = RunEstimator(None, own.aggregation, own.aggregation_logged, not_computed=own.label)
    if not own.aggregation_logged:
        notes.append("the run's loss aggregation is not logged; token-mean (verl's default) is taken as the run's")
    aggregation = own.aggregation if own.aggregation in aggregations else aggregations[0]
    if aggregation != own.aggregation:
        notes.append(f"the run's loss aggregation, {own.aggregation}, is not among those asked for: "
                     f"the verdicts are under {aggregation}")
    outcome = _outcomes(trajectories, [r for r in usable if r.estimator not in TOKEN_ESTIMATORS])
    staged = assign_stages(trajectories.select("run_id", "step").unique(), stages).select("step", "stage", "stage_index")

    credit = CreditStep(tuple(usable), outcome, tuple(aggregations), token_rows > 0)
    stream = CreditStream(reader, trajectories, credit, progress, map_steps,
                          saved_classes=_saved_classes(store, run_id) if map_steps is None else None)
    with store.transaction() if write else contextlib.nullcontext():  # every table appears together, once
        result = _attribute_stream(store, run_id, own, usable, aggregations, aggregation, trajectories, facts, notes,
                                   drift, stream, staged, write)
    return result


def _attribute_stream(store, run_id, own, usable, aggregations, aggregation, trajectories, facts, notes, drift,
                      stream, staged, write) -> AttributionResult:
    target = None
    if write:
        target = store.write_derived("call_credit", run_id, stream)
    else:
        stream.consume()
    call_credit = pl.scan_parquet(target) if target is not None else pl.concat(stream.kept or [_empty_calls()]).lazy()
    class_credit = _class_credit(stream, run_id, staged)
    if write:
        store.write_derived("class_credit", run_id, class_credit)
    trajectory_frame = stream.trajectory_frame()
    trajectory_classes = trajectory_frame.join(staged, on="step", how="left")
    relevance = reward_relevance(trajectory_classes, sorted(stream.classes))
    summary = class_summary(class_credit, relevance)
    bias = length_bias(stream.trajectory_push_frame(), bootstrap=min(drift.bootstrap, 500), seed=drift.seed)
    channels = channel_measures(trajectories) if facts.channels > 1 else pl.DataFrame()
    flags = pl.DataFrame(stream.flags, schema={"step": pl.Int64, "estimator": pl.String, "all_negative": pl.Boolean,
                                               "all_positive": pl.Boolean})
    structural = structural_classes(trajectory_frame, sorted(stream.classes))
    drifted = attribute_drift(class_credit, flags, own.label, aggregation, drift, structural, trajectory_frame)
    if stream.fallback_calls:
        notes.append(f"{stream.fallback_calls} of {stream.total_calls} calls have no token arrays: their credit is the "
                     "trajectory's advantage spread over its calls by turn (fallback; token estimators skip them)")
    judged = drift_verdicts(drifted.frame, class_credit, trajectory_frame, own.label, aggregation, drift.k,
                            drift.bootstrap, drift.seed, structural, not_computed=own.not_computed,
                            min_change=drift.min_change)
    drift_findings = [_with_verdict(f, judged.lines) for f in drifted.findings]
    if judged.structural:
        notes.append(f"structural calls (every trajectory makes them equally often): {', '.join(judged.structural)}; "
                     "left out of the calls a class competes with")
    if stream.total_calls == 0:
        drift_findings = [NO_TOOL_CALLS]
    findings, causes = _findings(own, aggregation, flags, bias, channels, stream)
    flagged = causes + [f for f in findings if f.startswith("all-negative")
                        or (own.label is not None and f.startswith(f"length bias under {own.label} "))]
    flagged += [f for f in drift_findings if drifted.frame.height]
    result = AttributionResult(run_id, own, tuple(usable), tuple(aggregations), call_credit, class_credit, summary,
                               bias, channels, flags, drifted.frame, drift_findings + findings, causes, judged.frame,
                               judged.evidence, judged.projection, notes, stream.fallback_calls, flagged)
    if write:
        from trajlens.attribution.saved import save_attribution

        save_attribution(store, result)
    return result


def _saved_classes(store: Any, run_id: str) -> pl.DataFrame | None:
    """The primary class of each of the run's calls as ``trajlens classify`` saved it; None when
    the run's calls were not classified and saved (they are classified as they are credited)."""
    if "call_classes" not in store.tables():
        return None
    saved = (store.table("call_classes").filter(pl.col("run_id") == run_id)
             .select("step", "trajectory_id", pl.col("call_index").cast(pl.Int32), "primary_class").collect())
    return saved if saved.height else None


def _with_verdict(finding: str, lines: dict[str, str]) -> str:
    """A drift finding led by its class's verdict line; its timing evidence (onset, r) after it."""
    name = finding.split(" share ", 1)[0]
    if name not in lines:
        return finding
    return lines[name] + "; timing: " + finding.split("; ", 1)[1] if "; " in finding else lines[name]


def _compared_by_default(rec: EstimatorChoice, facts: RunFacts) -> bool:
    """Token estimators without a flat step kernel only when the run declares them (module docstring
    of :mod:`.recomputations`); every other registry estimator always."""
    from trajlens.estimators.flat import flat_scan_of

    scan = flat_scan_of(rec)
    return (rec.estimator not in TOKEN_ESTIMATORS or scan is not None and scan.compared_by_default
            or rec.estimator in facts.declared)


def _outcomes(trajectories: pl.DataFrame, recs: Sequence[EstimatorChoice]) -> dict[str, pl.DataFrame]:
    """Each estimator of whole trajectories in ``recs`` recomputed over the run (``trajectory_id``
    and ``advantage``), the run's frame prepared once for them all."""
    from trajlens.estimators import Recomputer

    if not recs:
        return {}
    recomputer = Recomputer(trajectories)
    return {rec.label: recomputer.recompute(rec.estimator, **rec.options).select("step", "trajectory_id", "advantage")
            for rec in recs}


NO_CALLS: dict[str, pl.DataType] = {
    "step": pl.Int64, "trajectory_id": pl.String, "call_index": pl.Int32, "turn": pl.Int32, "token_end": pl.Int64,
    "primary_class": pl.String,
}
"""The classified calls of a step as the credit reads them (empty for a step, or a run, without tool calls)."""

NO_TOOL_CALLS = ("no tool calls in the run: no behaviour class to attribute (drift, credit per class); "
                 "only its response length and reward channels are attributed")
"""The finding of a run without tool calls."""

SCAN_WINDOW_TOKENS = 1 << 20
"""Most tokens of the consecutive small steps whose token scans run at once (attribution)."""

CALL_CREDIT_GROUP_ROWS = 1 << 16
"""Fewest ``call_credit`` rows in a row group of its file, but the last: the rows of many small
steps are written together, not a step at a time."""

KEPT_ROWS = ("class_rows", "trajectory_rows", "push_rows")
"""Per-step frames the credit stream keeps for the run-level measures."""


@dataclass(frozen=True)
class CreditStep:
    """The step function: credit one step's calls under every estimator and reduce them to that
    step's tables (``call_credit`` rows, class sums, flags), reading the step through a
    :class:`~trajlens.run.reader.RunReader`. Picklable, so an engine runs it anywhere."""

    recs: tuple[EstimatorChoice, ...]
    outcome: dict[str, pl.DataFrame]
    """Advantages of the outcome estimators, recomputed once on the run's trajectories (``step``,
    ``trajectory_id``, ``advantage``)."""
    modes: tuple[str, ...]
    has_tokens: bool

    @cached_property
    def outcome_steps(self) -> dict[int, dict[str, pl.DataFrame]]:
        """:attr:`outcome` cut into its steps once (``trajectory_id``, ``advantage``), by step and label."""
        steps: dict[int, dict[str, pl.DataFrame]] = {}
        for label, frame in self.outcome.items():
            for (step,), part in frame.partition_by("step", as_dict=True, maintain_order=True).items():
                steps.setdefault(int(step), {})[label] = part.drop("step")
        return steps

    def __call__(self, location: StoreLocation, run_id: str, step: int) -> dict[str, pa.Table]:
        reader = RunReader(location, run_id)
        part = reader.read_steps("trajectories", [step])
        if part is None:
            return {}
        batch = part.filter((pl.col("run_id") == run_id) & (pl.col("split") == TRAIN_SPLIT)).sort("step", "trajectory_id")
        if batch.is_empty():
            return {}
        stream = CreditStream(reader, batch, self)
        tables = {"call_credit": pa.concat_tables(list(stream.credit_here()) or [CALL_CREDIT_BUILT.empty_table()])}
        tables["classes"] = pa.table({"primary_class": pa.array(sorted(stream.classes), pa.string())})
        tables["counts"] = pa.table({"fallback_calls": [stream.fallback_calls], "total_calls": [stream.total_calls]})
        if stream.flags:
            tables["flags"] = pl.DataFrame(stream.flags).to_arrow()
        for name in KEPT_ROWS:
            rows = getattr(stream, name)
            if rows:
                tables[name] = rows.frame().to_arrow()
        return tables


class CreditStream:
    """Credits a run step by step and keeps what the run-level measures need (the reduction);
    written by ``write_derived`` through :meth:`write_parquet`.

    The steps are credited here, a block of steps at a time, or, given ``map_steps``, by the
    step function :class:`CreditStep` wherever ``map_steps`` runs it, each step's tables then
    folded in with :meth:`absorb`.
    """

    def __init__(self, reader: RunReader, trajectories: pl.DataFrame, step: CreditStep,
                 progress: Callable[[str], None] | None = None, map_steps: MapSteps | None = None,
                 saved_classes: pl.DataFrame | None = None) -> None:
        self.reader, self.run_id, self.trajectories = reader, reader.run_id, trajectories
        self.saved_classes = saved_classes
        """The run's calls as ``trajlens classify`` saved them (``step``, ``trajectory_id``,
        ``call_index``, ``primary_class``), taken instead of classifying them again; None: classify."""
        self.step, self.progress, self.map_steps = step, progress, map_steps
        self.recs, self.outcome, self.modes, self.has_tokens = step.recs, step.outcome, step.modes, step.has_tokens
        self.class_rows, self.trajectory_rows, self.push_rows = RowBlocks(), RowBlocks(), RowBlocks()
        self.flags: list[dict[str, Any]] = []
        self.classes: set[str] = set()
        self.fallback_calls = 0
        self.total_calls = 0
        self.kept: list[pl.DataFrame] | None = None
        self.several_channels = _several_channels(trajectories)
        """Whether the trajectories credited here have two or more reward channels (read once, not a step at a time)."""

    def write_parquet(self, path: Path | str) -> None:
        """Stream the ``call_credit`` rows into one Parquet file, a row group of
        :data:`CALL_CREDIT_GROUP_ROWS` rows or more at a time (the steps' rows held until then).
        Each row group is encoded on a thread of its own while the next steps are credited (Arrow
        encodes without the GIL): one at a time, in order, an error raised here."""
        from concurrent.futures import Future, ThreadPoolExecutor

        writer = None
        held: list[pa.Table] = []
        rows = 0
        pending: Future[None] | None = None

        def flush(encoder: ThreadPoolExecutor) -> None:
            nonlocal writer, held, rows, pending
            if writer is None:
                writer = pq.ParquetWriter(str(path), CALL_CREDIT_BUILT, **CALL_CREDIT_WRITE)
            group = pa.concat_tables(held) if len(held) > 1 else held[0]
            if pending is not None:
                pending.result()  # the row group before it is written first
            pending = encoder.submit(writer.write_table, group)
            held, rows = [], 0

        try:
            with ThreadPoolExecutor(max_workers=1) as encoder:
                for table in self._steps():
                    held.append(table)
                    rows += table.num_rows
                    if rows >= CALL_CREDIT_GROUP_ROWS:
                        flush(encoder)
                if held:
                    flush(encoder)
                if pending is not None:
                    pending.result()
            if writer is None:
                _empty_calls().write_parquet(path)
        finally:
            if writer is not None:
                writer.close()

    def consume(self) -> None:
        """Credit every step, keeping the ``call_credit`` rows in memory (``write=False``)."""
        self.kept = [pl.from_arrow(table.cast(CALL_CREDIT_SCHEMA)) for table in self._steps()]

    def _steps(self) -> Iterator[pa.Table]:
        if self.map_steps is None:
            yield from self.credit_here()
            return
        steps, _ = _steps_of(self.trajectories)
        for step, tables in self.map_steps(self.step, steps):
            call_credit = self.absorb(tables)
            if call_credit is not None:
                yield call_credit
            if self.progress is not None:
                self.progress(f"step {step}")

    def absorb(self, tables: dict[str, pa.Table]) -> pa.Table | None:
        """Fold one step's tables from :class:`CreditStep` in; its ``call_credit`` rows back."""
        for name in KEPT_ROWS:
            if name in tables:
                getattr(self, name).append(pl.DataFrame(tables[name]))
        if "flags" in tables:
            self.flags += pl.DataFrame(tables["flags"]).to_dicts()
        if "classes" in tables:
            self.classes.update(tables["classes"].column("primary_class").to_pylist())
        if "counts" in tables:
            counts = tables["counts"].to_pylist()[0]
            self.fallback_calls += counts["fallback_calls"]
            self.total_calls += counts["total_calls"]
        call_credit = tables.get("call_credit")
        return call_credit if call_credit is not None and call_credit.num_rows else None

    def credit_here(self) -> Iterator[pa.Table]:
        """Credit the steps in this process, classifying calls a block of steps at a time."""
        from trajlens.run.stepwise import TOKEN_COLUMNS
        from trajlens.store.ahead import read_ahead

        steps, batches = _steps_of(self.trajectories)
        if not steps:
            return
        block = max(1, CALLS_PER_BLOCK // max(1, int(self.trajectories["num_turns"].head(batches[0].height).sum() or 1)))
        needs_tokens = any(rec.estimator in TOKEN_ESTIMATORS for rec in self.recs) or self.has_tokens
        # each step's token arrays are read while the step before is credited
        token_steps = read_ahead(partial(self.reader.read_step, "tokens", columns=TOKEN_COLUMNS), steps) \
            if needs_tokens else (None for _ in steps)
        with contextlib.closing(token_steps):
            yield from self._credit_blocks(steps, batches, block, token_steps)

    def _credit_blocks(self, steps: list[int], batches: list[pl.DataFrame], block: int,
                       token_steps: Iterator[pa.Table | None]) -> Iterator[pa.Table]:
        from trajlens.estimators.flat import flat_list
        from trajlens.run.step_advantages import step_advantages

        for first in range(0, len(steps), block):
            block_steps = steps[first:first + block]
            calls_of_step = self._classified_calls(block_steps).partition_by("step", as_dict=True)
            for step, batch, tokens, ran in self._scan_windows(block_steps, batches[first:first + block], token_steps):
                calls = _in_batch_order(calls_of_step.get((step,), _NO_STEP_CALLS), batch)
                # the step's response mask, read once for its scans and its calls' spans
                mask = flat_list(tokens.column("response_mask"), np.bool_, False) \
                    if tokens is not None and tokens.num_rows else None
                advantages = step_advantages(batch, tokens, self.recs, self.step.outcome_steps.get(step, {}), ran, mask)
                credit = step_call_credit(batch, calls, tokens, advantages, self.modes, mask)
                del advantages
                yield self._reduce(step, batch, calls, credit)
                if self.progress is not None and self.map_steps is None:
                    self.progress(f"step {step}")

    def _scan_windows(self, steps: list[int], batches: list[pl.DataFrame], token_steps: Iterator[pa.Table | None]
                      ) -> Iterator[tuple[int, pl.DataFrame, pa.Table | None, dict | None]]:
        """Each step with its token rows (aligned with its trajectories when every one has them)
        and its cut of the token scans run over a window of consecutive such steps at once, up to
        :data:`SCAN_WINDOW_TOKENS` tokens (None for a step alone): small steps share one scan."""
        from trajlens.run.step_advantages import align_tokens, window_scans

        window: list[tuple[int, pl.DataFrame, pa.Table]] = []
        held = 0

        def flush() -> Iterator[tuple[int, pl.DataFrame, pa.Table | None, dict | None]]:
            nonlocal window, held
            cuts = window_scans([b for _, b, _ in window], [t for _, _, t in window], self.recs)
            for index, (step, batch, tokens) in enumerate(window):
                yield step, batch, tokens, None if cuts is None else cuts[index]
            window, held = [], 0

        for step, batch in zip(steps, batches):
            tokens = next(token_steps)
            aligned = align_tokens(batch, tokens)
            if aligned is None:  # a step without every trajectory's tokens goes alone
                yield from flush()
                yield step, batch, tokens, None
                continue
            size = pc.sum(pc.list_value_length(aligned.column("response_mask"))).as_py() or 0
            if window and held + size > SCAN_WINDOW_TOKENS:
                yield from flush()
            window.append((step, batch, aligned))
            held += size
        yield from flush()

    def _classified_calls(self, steps: list[int]) -> pl.DataFrame:
        from trajlens.classify import classify_calls

        saved = self.saved_classes
        calls = self.reader.read_steps("tool_calls", steps, ["step", "trajectory_id", "call_index", "turn", "token_end"]
                                       if saved is not None else ["step", "trajectory_id", "call_index", "turn",
                                                                  "tool_name", "arguments", "command", "token_end",
                                                                  "format_error"])
        if calls is None or calls.height == 0:
            return pl.DataFrame(schema=NO_CALLS)
        if saved is not None:
            block = saved.filter(pl.col("step").is_between(min(steps), max(steps)))
            classified = calls.join(block, on=["step", "trajectory_id", "call_index"], how="left", maintain_order="left")
        else:
            classified = classify_calls(calls)
        classified = classified.filter(CREDITED_CALLS)
        return classified.select(list(NO_CALLS)).cast(NO_CALLS)  # type: ignore[arg-type]

    def _reduce(self, step, batch, calls, credit) -> pl.DataFrame:
        distinct = calls["primary_class"].unique().sort()  # as np.unique: sorted, each class's number its place
        names = distinct.to_numpy()
        class_index = calls["primary_class"].replace_strict(distinct, pl.int_range(distinct.len(), eager=True),
                                                            return_dtype=pl.Int64).to_numpy().astype(np.int64)
        self.classes.update(names.tolist())
        count = calls.height
        self.total_calls += count
        self.fallback_calls += int(credit.fallback.sum())
        per_class = np.bincount(class_index, minlength=names.size)
        k = names.size
        length = credit.lengths.astype(float)
        computed = [r for r, rec in enumerate(self.recs) if credit.computed[r]]
        for r in computed:
            self.flags.append({"step": step, "estimator": self.recs[r].label, "all_negative": bool(credit.all_negative[r]),
                               "all_positive": bool(credit.all_positive[r])})
        # One row per (estimator, aggregation) with a credited call, and its sums over each class's calls.
        modes = len(self.modes)
        push = credit.push[computed].reshape(len(computed) * modes, count)
        valid = np.isfinite(push)
        keep = valid.any(axis=1)
        push, valid = push[keep], valid[keep]
        labels = np.repeat([self.recs[r].label for r in computed], modes)[keep]
        aggregation = np.tile(self.modes, len(computed))[keep]
        if push.shape[0]:
            clean = np.where(valid, push, 0.0)
            step_calls = valid.sum(axis=1)
            scale = np.abs(clean).sum(axis=1) / step_calls  # mean |push| over the step's credited calls
            with np.errstate(invalid="ignore", divide="ignore"):
                scaled = np.where(scale[:, None] > 0, clean / scale[:, None], 0.0)
            rows = push.shape[0]
            cell = (np.arange(rows)[:, None] * k + class_index[None, :]).ravel()  # each entry's (row, class)

            def by_class(values: np.ndarray) -> np.ndarray:
                """(rows, C) -> (rows, K): the sum over each class's calls (one pass, in call
                order; a BLAS product with an indicator matrix stalls beside busy threads)."""
                return np.bincount(cell, weights=values.ravel(), minlength=rows * k).reshape(rows, k)

            n = by_class(valid)
            push_sum, push_sum_scaled = by_class(clean), by_class(scaled)
            with np.errstate(invalid="ignore", divide="ignore"):
                self.class_rows.append({
                    "step": np.full(rows * k, step), "primary_class": np.tile(names, rows),
                    "estimator": np.repeat(labels, k), "aggregation": np.repeat(aggregation, k),
                    "calls": n.ravel().astype(np.int64), "step_calls": np.repeat(step_calls, k).astype(np.int64),
                    "class_share": np.tile(per_class / count, rows), "credit": (push_sum / n).ravel(),
                    "share_pushed_up": (by_class(valid & (push > 0)) / n).ravel(),
                    "relative_credit": (push_sum / n - (clean.sum(axis=1) / step_calls)[:, None]).ravel(),
                    "relative_credit_scaled": (push_sum_scaled / n - (scaled.sum(axis=1) / step_calls)[:, None]).ravel(),
                    "push_sum_scaled": push_sum_scaled.ravel(), "push_sumsq_scaled": by_class(scaled**2).ravel(),
                    "step_mean_scaled": np.repeat(scaled.sum(axis=1) / step_calls, k),
                    "fallback_share": (by_class(valid & credit.fallback[None, :]) / n).ravel(),
                })
        # Per-trajectory push (length bias) needs no call: kept for a step without tool calls too.
        trajectory_push = credit.trajectory_push[computed].reshape(len(computed) * modes, -1)
        pushed = np.isfinite(trajectory_push).any(axis=1)
        if pushed.any():
            rows = int(pushed.sum())
            self.push_rows.append({
                "step": np.full(rows * length.size, step),
                "estimator": np.repeat(np.repeat([self.recs[r].label for r in computed], modes)[pushed], length.size),
                "aggregation": np.repeat(np.tile(self.modes, len(computed))[pushed], length.size),
                "length": np.tile(np.where(credit.measured, length, np.nan), rows),  # model tokens, never calls
                "push_per_token": (trajectory_push[pushed] / np.maximum(length, 1.0)).ravel(),
            })
        counts = np.zeros((batch.height, k))
        np.add.at(counts, (credit.call_trajectory, class_index), 1.0)
        self.trajectory_rows.append({
            "step": np.full(batch.height, step), "reward": batch["reward"].cast(pl.Float64),
            "length": credit.response_lengths,  # response length as the report and the checks read it
            **{f"count:{n}": counts[:, i] for i, n in enumerate(names)},
            **{f"tokens:{n}": tokens for n, tokens in zip(names, _class_tokens(credit, class_index, k).T)},
            **(_channel_values(batch) if self.several_channels else {}),
        })
        return self._call_rows(step, calls, credit)

    def _call_rows(self, step, calls, credit) -> pa.Table:
        """The step's ``call_credit`` rows, estimator by estimator and mode by mode, as Arrow."""
        count = calls.height
        computed = [(r, rec) for r, rec in enumerate(self.recs) if credit.computed[r]]
        blocks = len(computed) * len(self.modes)
        if not blocks or not count:
            return CALL_CREDIT_BUILT.empty_table()
        push = credit.push[[r for r, _ in computed]].reshape(-1)  # (R', M, C) in row order
        keep = np.nonzero(~np.isnan(push))[0] if np.isnan(push).any() else None

        def pick(values: np.ndarray) -> np.ndarray:
            return values if keep is None else values[keep]

        def per_call(values: np.ndarray) -> np.ndarray:
            """Each row's value of its call: ``values`` (C,) once per block of rows."""
            return pick(np.tile(values, blocks))

        def strings(names: list[str] | pa.Array, codes: np.ndarray) -> pa.Array:
            """Each row's name, ``names[codes]``: a code into the distinct names (no string copied)."""
            return pa.DictionaryArray.from_arrays(pa.array(pick(codes).astype(np.int32, copy=False)),
                                                  pa.array(names, pa.string()))

        def call_strings(names: pa.Array) -> pa.Array:
            """Each row's name of its call (``names``: one per call), a code into the distinct names."""
            distinct = pc.dictionary_encode(names.cast(pa.string()))
            return pa.DictionaryArray.from_arrays(pa.array(per_call(distinct.indices.to_numpy())), distinct.dictionary)

        fallback = per_call(credit.fallback)
        missing = fallback if fallback.any() else None  # a fallback call has no span
        rows = fallback.size
        columns = {
            "run_id": strings([self.run_id], np.zeros(push.size, dtype=np.int32)),
            "step": pa.array(np.full(rows, step, dtype=np.int64)),
            "trajectory_id": call_strings(calls["trajectory_id"].to_arrow()),
            "call_index": pa.array(per_call(calls["call_index"].to_numpy().astype(np.int32))),
            "primary_class": call_strings(calls["primary_class"].to_arrow()),
            "estimator": strings([rec.label for _, rec in computed],
                                 np.repeat(np.arange(len(computed), dtype=np.int32), count * len(self.modes))),
            "aggregation": strings(list(self.modes),
                                   np.tile(np.repeat(np.arange(len(self.modes), dtype=np.int32), count), len(computed))),
            "advantage": pa.array(pick(np.repeat(credit.advantage[[r for r, _ in computed]], len(self.modes), axis=0).reshape(-1))),
            "push": pa.array(pick(push)),
            "tokens": pa.array(per_call(credit.tokens.astype(np.float64))),
            "token_start": pa.array(per_call(credit.token_start.astype(np.int64)), mask=missing),
            "token_end": pa.array(per_call(credit.token_end.astype(np.int64)), mask=missing),
            "fallback": pa.array(fallback),
        }
        return pa.Table.from_arrays(list(columns.values()), schema=CALL_CREDIT_BUILT)

    def trajectory_frame(self) -> pl.DataFrame:
        frame = (self.trajectory_rows.frame() if self.trajectory_rows else
                 pl.DataFrame(schema={"step": pl.Int64, "reward": pl.Float64, "length": pl.Float64}))
        return frame.with_columns(pl.col("^count:.*$", "^tokens:.*$").fill_null(0.0))

    def trajectory_push_frame(self) -> pl.DataFrame:
        if not self.push_rows:
            return pl.DataFrame(schema={"step": pl.Int64, "estimator": pl.String, "aggregation": pl.String,
                                        "length": pl.Float64, "push_per_token": pl.Float64})
        return self.push_rows.frame()


def _class_tokens(credit: Any, class_index: np.ndarray, classes: int) -> np.ndarray:
    """(B, K) model tokens each trajectory's calls of each class own (the token rule of
    :mod:`.calls`); NaN for a trajectory with a call under the fallback (its tokens spread by
    turn: their split between classes would be a guess) or without a counted length."""
    tokens = np.zeros((credit.lengths.size, classes))
    np.add.at(tokens, (credit.call_trajectory, class_index), credit.tokens.astype(float))
    guessed = ~credit.measured
    np.logical_or.at(guessed, credit.call_trajectory, credit.fallback)
    tokens[guessed] = np.nan
    return tokens


def _channel_rows(trajectories: pl.DataFrame) -> pl.DataFrame:
    """One row per reward channel value of each trajectory: ``index`` (its row), ``name``, ``value``
    (read from the Arrow buffers of the list column: a null list, or a null entry, has none)."""
    schema = {"index": pl.Int64, "name": pl.String, "value": pl.Float64}
    if "reward_channels" not in trajectories.columns:
        return pl.DataFrame(schema=schema)
    lists = trajectories["reward_channels"].to_arrow()
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    entries = pc.list_flatten(lists)  # (the entries a null list may hold in its buffers are left out)
    lengths = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False)
    index = np.repeat(np.arange(len(lists), dtype=np.int64), lengths)
    kept = entries.is_valid().to_numpy(zero_copy_only=False)
    entries = entries.filter(pa.array(kept))
    return pl.DataFrame([pl.Series("index", index[kept]), pl.Series("name", entries.field("name")).cast(pl.String),
                         pl.Series("value", entries.field("value")).cast(pl.Float64)], schema=schema)


def _several_channels(trajectories: pl.DataFrame) -> bool:
    """Whether ``trajectories`` hold two or more reward channel names: when they do not, no step
    of theirs has channel values to keep (:func:`_channel_values`)."""
    return _channel_rows(trajectories)["name"].n_unique() > 1


def _channel_values(batch: pl.DataFrame) -> dict[str, np.ndarray]:
    """``channel:<name>`` -> each trajectory's value of that reward channel (NaN where it has none), for
    two or more channels."""
    long = _channel_rows(batch)
    names = long["name"].unique(maintain_order=True).to_list()
    out = {}
    for name in names if len(names) > 1 else []:
        part = long.filter(pl.col("name") == name)
        values = np.full(batch.height, np.nan)
        values[part["index"].to_numpy()] = part["value"].to_numpy()
        out[f"channel:{name}"] = values
    return out


_NO_STEP_CALLS = pl.DataFrame(schema=NO_CALLS)


def _in_batch_order(calls: pl.DataFrame, batch: pl.DataFrame) -> pl.DataFrame:
    """The calls of ``batch``'s trajectories, trajectory after trajectory in batch order, each in
    call order (a call of another trajectory, of another split, is dropped)."""
    position = {trajectory: i for i, trajectory in enumerate(batch["trajectory_id"].to_list())}
    at = calls["trajectory_id"].replace_strict(position, default=-1, return_dtype=pl.Int64).fill_null(-1).to_numpy()
    kept = np.flatnonzero(at >= 0)
    order = kept[np.lexsort((calls["call_index"].to_numpy()[kept], at[kept]))]
    return calls if np.array_equal(order, np.arange(calls.height)) else calls[order]


def _steps_of(trajectories: pl.DataFrame) -> tuple[list[int], list[pl.DataFrame]]:
    parts = trajectories.partition_by("step", maintain_order=True)
    return [int(p["step"][0]) for p in parts], parts


def _empty_calls() -> pl.DataFrame:
    return pl.DataFrame(schema=CALL_CREDIT_COLUMNS)


CLASS_CREDIT_TYPES: dict[str, pl.DataType] = {
    "run_id": pl.String, "step": pl.Int64, "stage": pl.String, "stage_index": pl.Int64, "primary_class": pl.String,
    "estimator": pl.String, "aggregation": pl.String, "calls": pl.Int64, "step_calls": pl.Int64,
    **{name: pl.Float64 for name in CLASS_CREDIT_COLUMNS[9:]},
}
"""``class_credit`` with its types (the table of a run without tool calls has these columns and no row)."""


def _class_credit(stream: CreditStream, run_id: str, staged: pl.DataFrame) -> pl.DataFrame:
    if not stream.class_rows:
        return pl.DataFrame(schema=CLASS_CREDIT_TYPES)
    frame = stream.class_rows.frame().with_columns(pl.lit(run_id).alias("run_id"))
    # Classes absent at a step count as zero calls there, so shares and drift see every step.
    full = frame.select("step", "estimator", "aggregation", "step_calls", "step_mean_scaled").unique().join(
        pl.DataFrame({"primary_class": sorted(stream.classes)}), how="cross")
    frame = full.join(frame.drop("step_calls", "step_mean_scaled"), on=["step", "estimator", "aggregation", "primary_class"],
                      how="left").with_columns(pl.col("calls").fill_null(0), pl.col("class_share").fill_null(0.0),
                                               pl.col("push_sum_scaled").fill_null(0.0), pl.col("push_sumsq_scaled").fill_null(0.0),
                                               pl.lit(run_id).alias("run_id"))
    frame = frame.join(staged, on="step", how="left").sort("estimator", "aggregation", "step", "primary_class")
    return frame.select(CLASS_CREDIT_COLUMNS)


def _findings(own: RunEstimator, aggregation: str, flags: pl.DataFrame, bias: pl.DataFrame, channels: pl.DataFrame,
              stream: CreditStream) -> tuple[list[str], list[str]]:
    """The run-level findings, and among them the length and reward-channel verdicts (verdict first)."""
    from trajlens.attribution.causes import (
        biased, channel_verdicts, elasticity_text, length_verdict, no_collapse_sentence,
    )
    from trajlens.steps import steps_text

    out = []
    if own.label:
        out.append(f"run's estimator: {own.label}, aggregation {own.aggregation}"
                   + ("" if aggregation == own.aggregation else f" (verdicts under {aggregation})"))
    if own.label:  # counterfactual estimators' streaks are in step_flags, not findings: the run never saw them
        negative = flags.filter((pl.col("estimator") == own.label) & pl.col("all_negative"))["step"].to_list()
        if negative:
            out.append(f"all-negative batches under the run's estimator ({own.label}) at steps {steps_text(negative)}")
    causes = []
    length = length_verdict(stream.trajectory_frame(), bias, own.label or own.not_computed, aggregation)
    causes += [length] if length is not None else []
    for row in bias.filter(pl.col("aggregation") == aggregation).iter_rows(named=True) if bias.height else []:
        if biased(row):
            out.append(f"length bias under {row['estimator']} / {row['aggregation']}: elasticity of push per token on "
                       f"length {elasticity_text(row)}")
    if channels.height:
        misalignment = channels["rank_misalignment"].drop_nulls()
        if misalignment.len():
            out.append(f"sum-then-normalise vs GDPO rank misalignment: mean {misalignment.mean():.2f} per group")
        collapses = channel_verdicts(channels, stream.trajectories, stream.outcome, own.label, own.not_computed)
        causes += collapses
        if not collapses and (short := no_collapse_sentence(channels, stream.trajectories)) is not None:
            out.append(short)
    causes.sort(key=verdict_order)  # an artefact first (sort() keeps the order within a verdict)
    return causes + out, causes

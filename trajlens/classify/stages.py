"""Training stages and the stage-sampled behaviour report: :func:`assign_stages`, :func:`stage_report`.

The report answers "did behaviour change between early and late training, and would a sample
of N trajectories per stage have shown it?". For each stage it draws ``n`` trajectories
(seeded, without replacement, all of them when the stage has fewer), computes each metric on
the sample with a 95% interval, and puts the same metric on the whole stage beside it.

Metrics (``metric`` column; ``kind`` says which formula applies):

``uses:<class>`` (trajectory_rate)
    Share of trajectories with at least one call of that primary class.
``ran_suite`` (trajectory_rate)
    Share of trajectories that ran the whole test suite at least once.
``share:<class>``, ``verification:<class>`` (call_share)
    Calls of a class over all behaviour calls (``share:think`` is the think share of all tool
    calls), or over verification calls (the verification mix), pooled over the trajectories.
``mean:<measure>`` (mean)
    Mean of a per-trajectory measure (turns, tokens, edits per turn, read-back share, think
    runs, position of the first verification).

Each is the checks' measure of the same name, with the one estimate of
:mod:`trajlens.intervals`: proportions get a Wilson interval on the effective sample size
(``n_effective``: calls shrunk by how much they cluster in trajectories; ``m - 1`` for a share
of ``m`` trajectories), means ``value +- z sqrt(s^2 / m)`` cut to where the trajectories' values
lie (:data:`~trajlens.classify.per_trajectory.MEAN_SUPPORT`). Changes between consecutive
stages, and from the first stage to the last, are tested for the proportion metrics with the
checks' stage test (:func:`trajlens.intervals.stage_p_value`; unadjusted for the number of metrics)
and sized with Cohen's h.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import polars as pl

from trajlens.classify import _stats
from trajlens.classify.calls import classify_calls
from trajlens.classify.per_trajectory import (
    MEASURES, MEAN_SUPPORT, OUTCOME_SPECS, TRAJECTORY_COLUMNS, UNRECORDED, behaviour_specs, stored_measures, stored_rules,
    trajectory_measures)
from trajlens.classify.rules import BEHAVIOUR_CLASSES, RULES_VERSION, VERIFICATION_CLASSES
from trajlens.errors import ConfigError
from trajlens.frames import as_frame, as_lazy, require_columns
from trajlens.intervals import Spec, pooled, stage_p_value, stage_z, sums
from trajlens.schema import TRAIN_SPLIT, in_measured_split
from trajlens.steps import stage_index, steps_text

StageSpec = Any
"""``"quartiles"``, ``"early_late"``, a sequence of ``(name, first_step, last_step)``, or those
ranges as text, ``"NAME:FIRST-LAST,..."`` (``"early:1-40,late:141-180"``), as ``--stages`` takes them."""

NAMED_STAGINGS: dict[str, tuple[str, ...]] = {
    "quartiles": ("Q1", "Q2", "Q3", "Q4"),
    "early_late": ("early", "late"),
}
"""Stagings by name: the distinct steps of each run, in order, cut into equal-sized parts."""

STEP_BOUND = re.compile(r"-?[0-9]{1,18}")
"""A step bound of stages given as text: ASCII digits (not another script's), within an int64."""


def staging(stages: StageSpec, option: str = "stages") -> StageSpec:
    """``stages`` as :func:`assign_stages` reads it: a staging's name, or ranges; stages given as
    text, ``NAME:FIRST-LAST,...`` (inclusive), become ranges. A :class:`ConfigError` naming
    ``option`` (``--stages`` on the command line) and each part that is not ``NAME:FIRST-LAST``."""
    if not isinstance(stages, str) or stages in NAMED_STAGINGS:
        return stages
    ranges, problems = [], []
    for part in stages.split(","):
        name, _, span = part.partition(":")
        first, _, last = span.partition("-")
        if not (name and STEP_BOUND.fullmatch(first.strip()) and STEP_BOUND.fullmatch(last.strip())):
            named = repr(part) if part.strip() else f"{stages!r} (an empty part)"
            problems.append(f"{option} {named}: expected {', '.join(NAMED_STAGINGS)}, or NAME:FIRST-LAST parts, "
                            "such as early:1-40")
            continue
        ranges.append((name, int(first), int(last)))
    if problems:
        raise ConfigError(problems)
    return ranges

MEAN_MEASURES: tuple[str, ...] = (
    "n_calls",
    "num_turns",
    "model_tokens",
    "think_longest_run",
    "think_runs",
    "think_empty",
    "edits_per_turn",
    "edits_per_1k_tokens",
    "readback_share",
    "first_verification_position",
)
"""Per-trajectory measures reported as stage means."""

PROPORTION_KINDS: tuple[str, ...] = ("trajectory_rate", "call_share")

CLASSIFY_INPUT: tuple[str, ...] = (
    "run_id", "step", "trajectory_id", "call_index", "tool_name", "arguments", "command", "format_error",
)
"""The tool-call columns classification and the trajectory measures read (not the tool output)."""


def assign_stages(trajectories: Any, stages: StageSpec = "quartiles") -> pl.DataFrame:
    """The trajectories table with ``stage`` (name) and ``stage_index`` (order) added.

    ``"quartiles"`` cuts each run's distinct steps, in order, into four equal-sized groups
    (Q1..Q4; fewer when a run has fewer than four steps); ``"early_late"`` into two.
    Explicit ranges ``[(name, first_step, last_step), ...]`` are inclusive at both ends and
    must not overlap; trajectories outside every range get a null stage. A ``stage`` or
    ``stage_index`` the table holds already (an earlier staging) is replaced.
    """
    frame = as_frame(trajectories, "trajectories").drop("stage", "stage_index", strict=False)
    require_columns(frame, "trajectories", "assign_stages", ("run_id", "step"))
    stages = staging(stages)
    if isinstance(stages, str):
        if problems := staging_problems(stages):
            raise ConfigError(problems)
        names = NAMED_STAGINGS[stages]
        steps = frame.select("run_id", "step").unique().with_columns(
            pl.col("step").rank("dense").over("run_id").sub(1).alias("__rank"),
            pl.col("step").n_unique().over("run_id").alias("__count"),
        )
        index = stage_index(pl.col("__rank"), pl.col("__count"), len(names)).cast(pl.Int32)
        steps = steps.select("run_id", "step", index.alias("stage_index"))
        frame = frame.join(steps, on=["run_id", "step"], how="left", maintain_order="left")
        return frame.with_columns(
            pl.col("stage_index").replace_strict(dict(enumerate(names)), return_dtype=pl.String).alias("stage")
        )
    ranges = _check_ranges(stages)
    stage = pl.lit(None, dtype=pl.String)
    index = pl.lit(None, dtype=pl.Int32)
    for position, (name, low, high) in reversed(list(enumerate(ranges))):
        inside = pl.col("step").is_between(low, high)
        stage = pl.when(inside).then(pl.lit(name)).otherwise(stage)
        index = pl.when(inside).then(pl.lit(position, dtype=pl.Int32)).otherwise(index)
    return frame.with_columns(stage.alias("stage"), index.alias("stage_index"))


def _check_ranges(stages: Any) -> list[tuple[str, int, int]]:
    problems = stage_range_problems(stages)
    if problems:
        raise ConfigError(problems)
    return [(str(name), int(low), int(high)) for name, low, high in stages]


def sampling_problems(n: Any, seed: Any, stages: Any = None) -> list[str]:
    """What is wrong with a stage report's sample size ``n``, its ``seed`` and (when given) its
    ``stages``, one line each: checked before any work by every caller of :func:`stage_report`."""
    problems = []
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        problems.append(f"n: expected a positive number of trajectories per stage, found {n!r}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        problems.append(f"seed: expected an integer, found {seed!r}")
    return problems if stages is None else problems + staging_problems(stages)


def staging_problems(stages: Any) -> list[str]:
    """What is wrong with ``stages``, one line each: a name that is none of
    :data:`NAMED_STAGINGS`, or explicit ranges (:func:`stage_range_problems`)."""
    if isinstance(stages, str) and stages not in NAMED_STAGINGS:
        if ":" not in stages:
            return [f"stages: expected one of {', '.join(NAMED_STAGINGS)}, NAME:FIRST-LAST,... or a list of "
                    f"(name, first_step, last_step), found {stages!r}"]
        try:
            stages = staging(stages)
        except ConfigError as error:
            return list(error.problems)
    return [] if isinstance(stages, str) else stage_range_problems(stages)


def stage_range_problems(stages: Any) -> list[str]:
    """What is wrong with explicit stages ``[(name, first_step, last_step), ...]``, one line each:
    an item of another shape, a name given twice, a range that ends before it starts, two ranges
    that overlap, stages out of step order, no stage at all. The stage report and the checks' ``stages`` read them alike."""
    problems: list[str] = []
    ranges: list[tuple[str, int, int]] = []
    try:
        items = list(stages)
    except TypeError:
        return [f"stages: expected a name or a list of (name, first_step, last_step), found {stages!r}"]
    for item in items:
        try:
            name, low, high = item
            ranges.append((str(name), int(low), int(high)))
        except (TypeError, ValueError):
            problems.append(f"stages: {item!r} is not (name, first_step, last_step)")
    names = [r[0] for r in ranges]
    problems += [f"stages: {name!r} is named twice" for name in sorted({n for n in names if names.count(n) > 1})]
    problems += [f"stages: {name!r} ends (step {high}) before it starts (step {low})" for name, low, high in ranges if high < low]
    ordered = sorted(ranges, key=lambda r: r[1])
    overlaps = [
        f"stages: {a[0]!r} (steps {a[1]}-{a[2]}) overlaps {b[0]!r} (steps {b[1]}-{b[2]})"
        for a, b in zip(ordered, ordered[1:])
        if b[1] <= a[2]
    ]
    problems += overlaps
    # Stages are compared in the order given (a change runs from the first to the last): out of
    # step order, a decrease would read as an increase.
    problems += [
        f"stages: {b[0]!r} (steps {b[1]}-{b[2]}) comes after {a[0]!r} (steps {a[1]}-{a[2]}); list the stages in step order"
        for a, b in zip(ranges, ranges[1:])
        if not overlaps and b[1] < a[1]
    ]
    if not ranges and not problems:
        problems.append("stages: no stage given")
    return problems


@dataclass(frozen=True)
class StageReport:
    """A stage-sampled behaviour report; every table is a Polars DataFrame."""

    rates: pl.DataFrame
    """One row per run, stage and metric: the sample value with its 95% interval, and the
    same metric on the whole stage (``population_value``) beside it."""
    changes: pl.DataFrame
    """Proportion metrics compared between consecutive stages and first to last stage:
    difference, two-proportion t statistic (column ``z``) and its p-value (on Student's t), Cohen's h,
    and the population difference."""
    stages: pl.DataFrame
    """The stages: step range, trajectories in the population and in the sample."""
    sample: pl.DataFrame
    """The sampled trajectories (run_id, stage, trajectory_id)."""
    n: int
    """Trajectories drawn per stage."""
    seed: int
    """Seed of the draw."""
    rules_version: str = RULES_VERSION
    """Version of the classification rules behind the numbers: those of the classes ``trajlens
    classify`` saved, where the report read them (:data:`~trajlens.classify.per_trajectory.UNRECORDED`
    when they do not say; several, comma-separated, for runs saved under several)."""

    @property
    def rules_text(self) -> str:
        """The rules behind the numbers, in words: ``classification rules v1.6``; for classes saved
        under other rules than this trajlens has, which, and how to classify them again."""
        if self.rules_version == RULES_VERSION:
            return f"classification rules v{RULES_VERSION}"
        saved = ("an earlier trajlens's classification rules, which it did not record" if self.rules_version == UNRECORDED
                 else f"classification rules v{self.rules_version}")
        return (f"{saved}, as `trajlens classify` saved the classes (this trajlens has v{RULES_VERSION}: "
                "`trajlens classify STORE` classifies them again)")
    measures: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False)
    """Per-trajectory measures of the whole population, with stage and ``sampled`` columns."""

    @property
    def sample_size(self) -> str:
        """The trajectories drawn per stage, in words: ``N=80 sampled per stage``, or where a stage
        held fewer and was taken whole, what the stages gave (``N=40-44 sampled per stage (whole
        stages)``)."""
        drawn = self.stages.get_column("n_sampled") if "n_sampled" in self.stages.columns else pl.Series([], dtype=pl.Int64)
        if drawn.is_empty() or int(drawn.min()) >= self.n:  # type: ignore[arg-type]
            return f"N={self.n} sampled per stage"
        low, high = int(drawn.min()), int(drawn.max())  # type: ignore[arg-type]
        counts = f"{low}" if low == high else f"{low}-{high}"
        taken = "whole stages" if high < self.n else f"{self.n} drawn, all of a stage with fewer"
        return f"N={counts} sampled per stage ({taken})"

    def tables(self) -> dict[str, pl.DataFrame]:
        """The report's tables by the names a store keeps them under."""
        return {"stage_rates": self.rates, "stage_changes": self.changes, "stages": self.stages,
                "stage_sample": self.sample}

    def to_markdown(self) -> str:
        """The report as Markdown: stages, rates (sample beside population) and changes."""
        from trajlens.classify._markdown import render

        return render(self)


def stage_report(
    store_or_frames: Any,
    run_id: str | None = None,
    n: int = 80,
    seed: int = 0,
    stages: StageSpec = "quartiles",
    split: str | None = TRAIN_SPLIT,
    *,
    measures: pl.DataFrame | None = None,
    rules_version: str | None = None,
) -> StageReport:
    """Sample ``n`` trajectories per training stage and report behaviour rates with intervals.

    ``store_or_frames`` is a store (anything with ``trajectories`` and ``tool_calls`` tables,
    such as ``trajlens.open(DIR)``) or a pair ``(trajectories, tool_calls)`` of Polars or
    Arrow tables. ``run_id`` restricts the report to one run (each run is staged and sampled
    on its own either way); ``split`` keeps each run's trajectories of that split, or of the split
    it has when it has not that one (:func:`~trajlens.schema.in_measured_split`: a run with
    validation data only is reported on it, as the CLI reports it); None keeps all.
    ``measures``: :func:`trajectory_measures` of (at least) those trajectories, when the caller
    has them; the tool calls are then neither read nor classified again. From a store, without
    them, each run's measures ``trajlens classify`` saved (with the tool map it was given) are
    read, as the CLI's reports read them; only the calls of runs without are classified, with
    the shipped tool maps. ``rules_version``: the classification rules behind ``measures``
    (:func:`trajlens.engine.classify.measures_rules`; default: this trajlens's); the report says
    which (:attr:`StageReport.rules_text`).
    """
    problems = sampling_problems(n, seed)
    if run_id is not None and not isinstance(run_id, str):
        problems.append(f"run_id: expected a run id (text), found {run_id!r}")
    if split is not None and not isinstance(split, str):
        problems.append(f"split: expected a split name (text), found {split!r}")
    if problems:
        raise ConfigError(problems)
    if measures is not None:
        measures = as_frame(measures, "measures")
        require_columns(measures, "measures", "stage_report", [measure.name for measure in MEASURES])
    saved, unsaved = _saved_measures(store_or_frames, run_id) if measures is None else (measures, [])
    if rules_version is None:
        rules_version = _saved_rules(store_or_frames, run_id, unsaved) if measures is None else RULES_VERSION
    trajectories, tool_calls = _frames(store_or_frames, run_id, split, calls_of=unsaved)
    parts = [] if saved is None else [saved.join(trajectories.select("run_id", "trajectory_id"),
                                                 on=["run_id", "trajectory_id"], how="semi", maintain_order="left")]
    if tool_calls is not None:
        classified = trajectories if unsaved is None else trajectories.filter(pl.col("run_id").is_in(unsaved))
        parts.append(trajectory_measures(classify_calls(tool_calls), classified))
    measures = pl.concat(parts, how="diagonal_relaxed")
    staged = assign_stages(trajectories.select("run_id", "trajectory_id", "step"), stages)
    # keys drawn over every trajectory of the run, before the stages keep some: a stage's sample
    # does not depend on which other stages were asked for
    measures = _draw_keys(measures, int(seed)).join(staged.select("run_id", "trajectory_id", "stage", "stage_index"),
                                                     on=["run_id", "trajectory_id"]).filter(pl.col("stage").is_not_null())
    span = steps_text(trajectories["step"].unique(), most=5)  # 1, 5, 100: not "1-100"
    if measures.is_empty():
        raise ConfigError([f"stages: no trajectory falls in any stage (the run's steps are {span})"])
    if not isinstance(stages, str):
        held = set(measures["stage"].unique())
        empty = [f"stages: stage {name!r} (steps {first}-{last}) holds no training step (the run's steps are {span})"
                 for name, first, last in _check_ranges(stages) if name not in held]
        if empty:
            raise ConfigError(empty)
    measures = _draw(measures, int(n))
    population = _metrics(measures)
    drawn = _metrics(measures.filter(pl.col("sampled")))
    rates = _rates(drawn, population)
    return StageReport(
        rates=rates,
        changes=_changes(rates),
        stages=_stage_table(measures),
        sample=measures.filter(pl.col("sampled")).select("run_id", "stage", "trajectory_id").sort(
            "run_id", "stage", "trajectory_id"),
        n=int(n),
        seed=int(seed),
        rules_version=rules_version,
        measures=measures,
    )


def _saved_rules(source: Any, run_id: str | None, unsaved: list[str] | None) -> str:
    """The rules behind a store's saved measures of ``run_id`` (every run when None) and, for the
    runs classified now (``unsaved``), this trajlens's: one version, or several comma-separated."""
    if not (hasattr(source, "tables") and hasattr(source, "run_ids")):
        return RULES_VERSION
    runs = [run_id] if run_id is not None else source.run_ids()
    saved = stored_rules(source, [run for run in runs if run not in (unsaved or [])])
    versions = sorted(set(saved.values()) | ({RULES_VERSION} if unsaved or not saved else set()))
    return ", ".join(versions)


def _saved_measures(source: Any, run_id: str | None) -> tuple[pl.DataFrame | None, list[str] | None]:
    """A store's saved measures of ``run_id`` (every run when None), where they are current
    (:func:`~trajlens.classify.per_trajectory.stored_measures`), and the runs without (None:
    every run, for frames)."""
    if not (hasattr(source, "tables") and hasattr(source, "run_ids")):
        return None, None
    current = stored_measures(source, [run_id] if run_id is not None else source.run_ids())
    found = [part for part in current.values() if part is not None]
    return (pl.concat(found) if found else None), [run for run, part in current.items() if part is None]


def _frames(source: Any, run_id: str | None, split: str | None, *, calls_of: list[str] | None = None
            ) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The trajectories of ``run_id`` (every run when None) and ``split``, and the tool calls of
    those of the runs ``calls_of`` names (None: every run; none read when it names none)."""
    if hasattr(source, "trajectories") and hasattr(source, "tool_calls"):
        trajectories, tool_calls = source.trajectories, source.tool_calls
    elif isinstance(source, Sequence) and not isinstance(source, str) and len(source) == 2:
        trajectories, tool_calls = source
    else:
        raise TypeError(
            "stage_report: expected a store (with .trajectories and .tool_calls) or a pair "
            f"(trajectories, tool_calls), got {type(source).__name__}"
        )
    trajectories = as_lazy(trajectories, "trajectories")
    tool_calls = as_lazy(tool_calls, "tool_calls")
    require_columns(trajectories, "trajectories", "stage_report", (*TRAJECTORY_COLUMNS, *(["split"] if split else [])))
    require_columns(tool_calls, "tool_calls", "stage_report", ("run_id", "trajectory_id"))
    if run_id is not None:
        trajectories = trajectories.filter(pl.col("run_id") == run_id)
        tool_calls = tool_calls.filter(pl.col("run_id") == run_id)
    if split is not None:
        trajectories = trajectories.filter(in_measured_split(split))
    trajectory_frame = trajectories.collect()
    present = tool_calls.collect_schema().names()
    if calls_of is not None:
        tool_calls = tool_calls.filter(pl.col("run_id").is_in(calls_of))
    call_frame = tool_calls.select([c for c in CLASSIFY_INPUT if c in present]).join(
        trajectories.select("run_id", "trajectory_id"), on=["run_id", "trajectory_id"], how="semi"
    ).collect() if calls_of is None or calls_of else None
    if trajectory_frame.height == 0:
        wanted = " and ".join(x for x in (run_id and f"run {run_id!r}", split and f"split {split!r}") if x)
        raise ConfigError([f"stage_report: no trajectories{' for ' + wanted if wanted else ''}"])
    return trajectory_frame, call_frame


def _draw_keys(measures: pl.DataFrame, seed: int) -> pl.DataFrame:
    """``measures`` with a uniform key per trajectory (``__key``), from a generator seeded with
    ``(seed, run)`` and read in trajectory_id order over each run's trajectories."""
    parts = []
    for (run_id,), run in measures.sort("run_id", "trajectory_id").group_by("run_id", maintain_order=True):
        generator = np.random.default_rng([seed, zlib.crc32(str(run_id).encode())])
        parts.append(run.with_columns(pl.Series("__key", generator.random(run.height))))
    return pl.concat(parts)


def _draw(measures: pl.DataFrame, n: int) -> pl.DataFrame:
    """Mark ``n`` trajectories per (run, stage) as sampled: the ``n`` smallest keys of a stage
    (:func:`_draw_keys`, drawn over the run's trajectories before staging).

    The draw is reproducible and without replacement, and depends neither on the input's row
    order, nor on which other runs are in the report, nor on the other stages asked for.
    """
    rank = pl.col("__key").rank("ordinal").over("run_id", "stage")
    return measures.with_columns((rank <= n).alias("sampled")).drop("__key")


_GROUP = ("run_id", "stage", "stage_index")


_KINDS: tuple[tuple[str, str, str], ...] = (
    ("uses:", "trajectory_rate", "wilson"),
    ("ran_suite", "trajectory_rate", "wilson"),
    ("share:", "call_share", "wilson, design effect"),
    ("verification:", "call_share", "wilson, design effect"),
    ("mean:", "mean", "normal"),
    ("reward", "mean", "normal"),
    ("resolved", "trajectory_rate", "wilson"),
)
"""Each metric's kind and interval, by the start of its name."""


def _metrics(measures: pl.DataFrame, specs: Sequence[Spec] | None = None) -> pl.DataFrame:
    """Long table (run_id, stage, stage_index, metric, kind, value, low, high, interval,
    n_trajectories, n_units, n_effective) of every metric over the given trajectories: the
    checks' measures of the same names (:func:`~trajlens.classify.per_trajectory.behaviour_specs`)
    pooled over each stage's trajectories by :func:`trajlens.intervals.pooled`, so a stage's
    value and interval are the ones ``trajlens check`` and ``trajlens compare`` give it.
    ``specs``: the measures (the behaviour metrics when None)."""
    stats = sums(measures, behaviour_specs(MEAN_MEASURES) if specs is None else specs, by=_GROUP)
    entry = {name: next(k for k in _KINDS if name.startswith(k[0])) for name in stats["measure"].unique()}
    kind = pl.col("metric").replace_strict({name: k[1] for name, k in entry.items()}, return_dtype=pl.String)
    interval = pl.col("metric").replace_strict({name: k[2] for name, k in entry.items()}, return_dtype=pl.String)
    counts = measures.group_by(*_GROUP).agg(pl.len().alias("n_trajectories"))
    means = [name for name, k in entry.items() if k[1] == "mean"]
    parts = [pooled(stats.filter(pl.col("measure").is_in(means) != proportion), proportion, MEAN_SUPPORT.get)
             for proportion in (True, False)]
    return pl.concat(parts).rename({"measure": "metric"}).join(counts, on=list(_GROUP)).select(
        *_GROUP, "metric", kind.alias("kind"), "value", "low", "high", interval.alias("interval"),
        "n_trajectories", pl.col("n").cast(pl.Int64).alias("n_units"), "n_effective",
    )


def _rates(drawn: pl.DataFrame, population: pl.DataFrame) -> pl.DataFrame:
    keys = [*_GROUP, "metric", "kind"]
    whole = population.select(*keys, pl.col("value").alias("population_value"),
                              pl.col("n_trajectories").alias("n_population"))
    table = whole.join(drawn, on=keys, how="left").with_columns(pl.col("n_trajectories").fill_null(0).alias("n_sampled"))
    # A tolerance for rounding: Wilson's upper bound at p = 1 computes to 1 - 1e-16.
    inside = (pl.col("population_value") >= pl.col("low") - 1e-9) & (pl.col("population_value") <= pl.col("high") + 1e-9)
    order = {name: i for i, name in enumerate(_metric_order())}
    return table.select(
        "run_id", "stage", "stage_index", "metric", "kind",
        pl.col("value"), pl.col("low").alias("ci_low"), pl.col("high").alias("ci_high"), "interval",
        "population_value", inside.alias("population_in_ci"),
        "n_sampled", "n_population", "n_units", "n_effective",
    ).sort("run_id", pl.col("metric").replace_strict(order, default=len(order)), "stage_index")


def _metric_order() -> list[str]:
    return [
        *(f"uses:{c}" for c in BEHAVIOUR_CLASSES), "ran_suite",
        *(f"share:{c}" for c in BEHAVIOUR_CLASSES), *(f"verification:{c}" for c in VERIFICATION_CLASSES),
        *(f"mean:{m}" for m in MEAN_MEASURES), *OUTCOME_METRICS,
    ]


OUTCOME_METRICS: tuple[str, ...] = tuple(name for name, _, _ in OUTCOME_SPECS)
"""The outcome metrics by stage (:func:`outcome_rates`): the checks' ``reward`` and ``resolved``."""


def outcome_rates(measures: pl.DataFrame) -> pl.DataFrame:
    """The run's outcome by stage, as :func:`stage_report` gives its behaviour metrics, in the
    columns of :attr:`StageReport.rates`: the checks' ``reward`` (mean reward, a mean) and
    ``resolved`` (the resolved rate, a rate of trajectories; no rows for a run without verdicts),
    on each stage's sample with its 95% interval and on the whole stage beside it. ``measures``:
    :attr:`StageReport.measures` (each trajectory's stage and whether it was drawn: the same
    sample as the behaviour metrics) with each trajectory's ``reward`` and ``resolved``. Kept
    apart from the behaviour rates, which are the classification's."""
    population = _metrics(measures, OUTCOME_SPECS)
    if population.is_empty():
        return _rates(population, population).clear()
    return _rates(_metrics(measures.filter(pl.col("sampled")), OUTCOME_SPECS), population)


def _changes(rates: pl.DataFrame) -> pl.DataFrame:
    """Proportion metrics between consecutive stages and from the first stage to the last."""
    proportions = rates.filter(pl.col("kind").is_in(list(PROPORTION_KINDS)))
    # Stages are compared by position among the stages present, so an empty stage is skipped.
    present = proportions.select("run_id", "stage_index").unique().with_columns(
        pl.col("stage_index").rank("dense").over("run_id").alias("position"),
        pl.col("stage_index").n_unique().over("run_id").alias("count"),
    )
    pairs = present.join(present.select("run_id", "stage_index", "position"), on="run_id", suffix="_to").filter(
        pl.col("position_to") > pl.col("position")
    )
    # Two stages are both neighbours and the first and the last: the pair is compared as each.
    pairs = pl.concat([
        pairs.filter(pl.col("position_to") == pl.col("position") + 1).with_columns(pl.lit("consecutive").alias("comparison")),
        pairs.filter((pl.col("position") == 1) & (pl.col("position_to") == pl.col("count")))
        .with_columns(pl.lit("first_to_last").alias("comparison")),
    ])
    columns = ["run_id", "stage_index", "stage", "metric", "kind", "value", "n_effective", "n_units", "n_sampled",
               "population_value"]
    left = proportions.select(columns)
    right = proportions.select(columns).rename({c: f"{c}_to" for c in columns if c not in ("run_id", "metric", "kind")})
    table = pairs.select("run_id", "stage_index", "stage_index_to", "comparison").join(
        left, on=["run_id", "stage_index"]).join(right, on=["run_id", "stage_index_to", "metric", "kind"])
    p1, p2 = pl.col("value"), pl.col("value_to")
    read = {"value": "value", "n_effective": "n_effective", "n": "n_units", "units": "n_sampled"}  # a pooled row's keys

    def side(suffix: str) -> list[dict[str, Any]]:
        return table.select(**{key: f"{column}{suffix}" for key, column in read.items()}).to_dicts()

    sides = list(zip(side(""), side("_to")))
    table = table.with_columns(pl.Series("z", [stage_z(*pair, proportion=True) for pair in sides], dtype=pl.Float64),
                               pl.Series("p_value", [stage_p_value(*pair, proportion=True) for pair in sides],
                                         dtype=pl.Float64))
    return table.select(
        "run_id", "metric", "kind", "comparison",
        pl.col("stage").alias("from_stage"), pl.col("stage_to").alias("to_stage"),
        p1.alias("value_from"), p2.alias("value_to"), (p2 - p1).alias("difference"),
        "z", "p_value", _stats.cohens_h(p1, p2).alias("cohens_h"),
        pl.col("n_effective").alias("n_from"), pl.col("n_effective_to").alias("n_to"),
        (pl.col("population_value_to") - pl.col("population_value")).alias("population_difference"),
    ).sort("run_id", "metric", "comparison", "from_stage")


def _stage_table(measures: pl.DataFrame) -> pl.DataFrame:
    return measures.group_by(*_GROUP).agg(
        pl.col("step").min().alias("first_step"), pl.col("step").max().alias("last_step"),
        pl.len().alias("n_population"), pl.col("sampled").sum().alias("n_sampled"),
    ).sort("run_id", "stage_index")

"""Two runs, stages or estimators side by side: :func:`compare` and :func:`describe`.

Every behaviour measure and advantage statistic present on both sides gets one row: the two
values with 95% intervals, the difference ``B - A`` with its interval, a test and an effect
size, sorted by the size of the effect.

Each side's numbers are the checks' (:mod:`trajlens.checks.step_measures` statistics of its
trajectories or steps, summed and pooled by :func:`trajlens.intervals.pooled`), and each
test is the checks' stage test (:func:`trajlens.intervals.stage_p_value`): a comparison of two
stages of a run reports the values, intervals and p-values ``trajlens check`` finds for them.
What a comparison adds (the difference's interval, Cohen's d) is in :mod:`trajlens.compare._stats`.

With some 50 rows, two or three would cross p < 0.05 by chance, so each table's p-values are
adjusted by Benjamini-Hochberg over its rows, the behaviour rows and the advantage rows each a
family of their own (:data:`ADJUSTMENT`): a row is ``significant``
when its adjusted p-value is below :data:`SIGNIFICANCE`, which keeps the expected share of
false discoveries among the significant rows at or below 5%. Measures that carry the same
numbers on both sides (turns and calls when every turn makes one call) are one row, whose
``same_as`` names the others, so they are neither shown nor counted twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import polars as pl

from trajlens.checks.step_measures import (
    STAT_SUPPORT, measure_support, outcome_stats, scalar_stats, trajectory_measure_stats)
from trajlens.classify._stats import cohens_h
from trajlens.classify.rules import BEHAVIOUR_CLASSES, VERIFICATION_CLASSES
from trajlens.compare import _stats
from trajlens.compare.sides import RECOMPUTED, Side, SideData, parse_side, read_side, stage_names
from trajlens.errors import ConfigError
from trajlens.intervals import (MEAN_TEST, PROPORTION_TEST, Support, added, cohens_d, newcombe, pooled_rows, repeat_key,
                                stage_p_value, stage_z)

SIGNIFICANCE = 0.05
"""False discovery rate at which a row's adjusted p-value is called significant."""
ADJUSTMENT = "Benjamini-Hochberg"
"""The multiple-comparison adjustment of ``p_adjusted``, named wherever a table is shown."""


@dataclass(frozen=True)
class Measure:
    """A compared quantity: its column, the test that fits it, and how a sentence says it."""

    name: str
    kind: str
    """'trajectory_rate' (share of trajectories, or of steps), 'call_share' (share of calls pooled
    over trajectories) or 'mean' (mean of a per-trajectory or per-step value). The first two are
    proportions: a Wilson interval on the design-effect sample size, a two-proportion test."""
    phrase: str
    """Completes "<side> ...", with ``{value}`` for the side's value."""


BEHAVIOUR_MEASURES: tuple[Measure, ...] = (
    Measure("resolved", "trajectory_rate", "resolves {value} of its tasks"),
    Measure("ran_suite", "trajectory_rate", "runs the full suite {value} of the time"),
    *(Measure(f"uses:{c}", "trajectory_rate", f"calls {c} at least once in {{value}} of trajectories")
      for c in BEHAVIOUR_CLASSES),
    *(Measure(f"share:{c}", "call_share", f"spends {{value}} of its tool calls on {c}") for c in BEHAVIOUR_CLASSES),
    *(Measure(f"verification:{c}", "call_share", f"gives {{value}} of its verification calls to {c}")
      for c in VERIFICATION_CLASSES),
    Measure("mean:reward", "mean", "earns a mean reward of {value}"),
    Measure("mean:num_turns", "mean", "takes {value} turns per trajectory"),
    Measure("mean:model_tokens", "mean", "generates {value} model tokens per trajectory"),
    Measure("mean:n_calls", "mean", "makes {value} tool calls per trajectory"),
    Measure("mean:n_format_errors", "mean", "has {value} format errors per trajectory"),
    Measure("mean:think_runs", "mean", "has {value} runs of consecutive think calls per trajectory"),
    Measure("mean:think_longest_run", "mean", "has a longest think run of {value} calls"),
    Measure("mean:think_empty", "mean", "makes {value} empty or filler think calls per trajectory"),
    Measure("mean:edits_per_turn", "mean", "edits {value} times per turn"),
    Measure("mean:edits_per_1k_tokens", "mean", "edits {value} times per 1,000 tokens"),
    Measure("mean:readback_share", "mean", "reads back {value} of its edits"),
    Measure("mean:first_verification_position", "mean", "first verifies {value} of the way through"),
)
"""Behaviour measures compared between sides covering different trajectories."""

ADVANTAGE_STATISTICS: tuple[Measure, ...] = (
    Measure("mean", "mean", "has a batch mean advantage of {value}"),
    Measure("std", "mean", "has a batch advantage std of {value}"),
    Measure("skew", "mean", "has a batch advantage skew of {value}"),
    Measure("kurtosis", "mean", "has a batch advantage kurtosis of {value}"),
    Measure("bimodality", "mean", "has a bimodality coefficient of {value}"),
    Measure("positive_share", "mean", "gives {value} of its units a positive advantage"),
    Measure("all_negative", "trajectory_rate", "has an all-negative batch on {value} of its steps"),
    Measure("all_positive", "trajectory_rate", "has an all-positive batch on {value} of its steps"),
)
"""Per-step statistics of ``advantage_batches``, compared per estimator label over steps."""

COMPARISON_COLUMNS: tuple[str, ...] = (
    "measure", "kind", "a", "a_value", "a_low", "a_high", "a_n", "b", "b_value", "b_low", "b_high", "b_n",
    "difference", "difference_low", "difference_high", "test", "statistic", "p_value", "p_adjusted", "effect",
    "effect_size", "significant", "same_as", "phrase",
)

_TESTS = {"trajectory_rate": (PROPORTION_TEST, "Cohen's h"), "call_share": (PROPORTION_TEST, "Cohen's h"),
          "mean": (MEAN_TEST, "Cohen's d")}
"""Each kind's test and effect size: the checks' stage test (:func:`trajlens.intervals.stage_p_value`),
on effective sizes for proportions, and for means Welch's statistic ``(m2 - m1) / sqrt(var1 + var2)``,
each read on Student's t."""


ROUNDING = 1e-6
"""A difference of means at most this, relative to the larger value (or 1), is float rounding, not
a difference: whitened batches have a std of 1 and a mean of 0 up to their last bits, which a test
on their near-zero spread would call significant."""

ADVANTAGE_PREFIX = "advantage:"
"""Names of the advantage rows; they and the behaviour rows are two families, each adjusted apart."""


def compare(store: Any, a: str, b: str, *, stages: Any = "quartiles", advantages: bool = True) -> pl.DataFrame:
    """Compare side ``a`` with side ``b`` (``RUN``, ``RUN:STAGE`` or ``RUN:LABEL``).

    Returns one row per measure present on both sides (:data:`COMPARISON_COLUMNS`), sorted by
    the absolute effect size, largest first; measures with the same numbers as an earlier one
    are folded into it (``same_as``), and ``p_adjusted`` is the Benjamini-Hochberg adjustment
    over the remaining rows of its family (behaviour measures; advantage statistics), so a
    behaviour's adjusted p is the same with ``advantages`` or without. Behaviour measures are left out when both sides
    cover the same trajectories (two estimator labels of one run). With ``advantages=False``,
    advantage statistics are left out (no recomputation) unless a side names a label.
    """
    side_a, side_b = parse_side(store, a, stages), parse_side(store, b, stages)
    _require_apart(store, side_a, side_b, stages)
    labels = _shared_labels(store, side_a, side_b) if advantages or side_a.label or side_b.label else []
    if side_a.label or side_b.label:  # before any side is read or recomputed
        _require_labels(store, side_a, labels)
        _require_labels(store, side_b, labels)
    data_a = read_side(store, side_a, stages, labels)
    data_b = read_side(store, side_b, stages, labels)
    if data_a.measures.is_empty() or data_b.measures.is_empty():
        empty = side_a if data_a.measures.is_empty() else side_b
        raise ConfigError([f"side {empty.spec!r}: no trajectories to compare"])
    rows = []
    same_trajectories = side_a.run_id == side_b.run_id and side_a.stage == side_b.stage
    if not same_trajectories:
        pooled_a = _pooled(_behaviour_sums(data_a.measures), BEHAVIOUR_MEASURES)
        pooled_b = _pooled(_behaviour_sums(data_b.measures), BEHAVIOUR_MEASURES)
        rows += [_row(m, pooled_a.get(m.name), pooled_b.get(m.name)) for m in BEHAVIOUR_MEASURES]
    rows += _advantage_rows(data_a, data_b)
    rows = _fold_duplicates([r for r in rows if r is not None])
    for family in (False, True):  # behaviour, then advantages: a behaviour's p is adjusted alike with or without them
        members = [r for r in rows if r["measure"].startswith(ADVANTAGE_PREFIX) == family]
        for row, adjusted in zip(members, _stats.benjamini_hochberg([r["p_value"] for r in members])):
            row["p_adjusted"] = adjusted
            row["significant"] = adjusted is not None and adjusted < SIGNIFICANCE
    frame = pl.DataFrame(rows, schema=_schema()).with_columns(
        _effect_sizes(), pl.lit(side_a.name).alias("a"), pl.lit(side_b.name).alias("b"))
    return frame.select(COMPARISON_COLUMNS).sort(
        pl.col("effect_size").abs(), pl.col("measure"), descending=[True, False], nulls_last=True)


def describe(comparison: pl.DataFrame, top: int = 3) -> list[str]:
    """The ``top`` largest differences in words, such as "sao-r7 (Q4) runs the full suite 0.48
    of the time against sao-r6 (Q4)'s 0.52; not significant (p = 0.62)". A measure on which
    the sides do not differ at all is no difference to tell."""
    sentences: list[str] = []
    differing = comparison.drop_nulls("effect_size").filter(pl.col("difference").fill_null(1.0) != 0)
    for row in differing.head(top).iter_rows(named=True):
        value_b = _format(row["b_value"], row["kind"])
        value_a = _format(row["a_value"], row["kind"])
        verdict = "significant" if row["significant"] else "not significant"
        adjusted = "" if row["p_adjusted"] is None else f", {_p_text(row['p_adjusted'])} adjusted"
        interval = (f"difference {_format(row['difference'], row['kind'], signed=True)} "
                    f"[{_format(row['difference_low'], row['kind'], signed=True)}, "
                    f"{_format(row['difference_high'], row['kind'], signed=True)}]"
                    if row["difference_low"] is not None else "")
        p_value = "no test" if row["p_value"] is None else _p_text(row["p_value"])
        sentences.append(
            f"{row['b']} {row['phrase'].format(value=value_b)} against {row['a']}'s {value_a}; "
            f"{verdict} ({p_value}{adjusted}; {row['effect']} {row['effect_size']:+.2f}{'; ' + interval if interval else ''})"
        )
    return sentences


def title(comparison: pl.DataFrame) -> str:
    """The comparison in a few words: "sao-r7 (Q4) against sao-r6 (Q4)", or for two
    recomputations of one run "sao-r6 recomputed under gae_raw vs under gae_whitened"."""
    if comparison.is_empty():
        return "comparison"
    a, b = comparison["a"][0], comparison["b"][0]
    run_a, _, label_a = a.partition(RECOMPUTED)
    run_b, _, label_b = b.partition(RECOMPUTED)
    if label_a and label_b and run_a == run_b:
        return f"{run_a}{RECOMPUTED}{label_a} vs under {label_b}"
    return f"{b} against {a}"


def adjustment_note(comparison: pl.DataFrame) -> str:
    """How the table's tests are read, for its caption and the console."""
    tested = comparison.filter(pl.col("p_adjusted").is_not_null()) if comparison.height else comparison
    advantage = tested.filter(pl.col("measure").str.starts_with(ADVANTAGE_PREFIX)).height if tested.height else 0
    families = (f", the {tested.height - advantage} behaviour and the {advantage} advantage rows each as one family"
                if advantage and advantage < tested.height else "")
    significant = int(comparison["significant"].sum()) if comparison.height else 0
    return (f"p-values adjusted for {tested.height} rows by {ADJUSTMENT}{families} (false discovery rate "
            f"{SIGNIFICANCE:g}); {significant} row(s) significant after adjustment")


P_FLOOR = 1e-15
"""The smallest p-value told as a number: below it a p-value is shown as ``< 1e-15`` (a float's
rounding sets it there, a test's exact answer would be smaller still, never 0)."""


def p_text(p: float | None) -> str:
    """A p-value as every surface shows it (the console's table and sentences, the Markdown and the
    page): two significant digits, ``< 1e-15`` below :data:`P_FLOOR`, empty for no test."""
    if p is None:
        return ""
    return f"< {P_FLOOR:g}" if p < P_FLOOR else f"{p:.2g}"


def _p_text(p: float) -> str:
    text = p_text(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def _fold_duplicates(rows: list[dict]) -> list[dict]:
    """Rows in order, each measure whose numbers repeat an earlier row's folded into that row's
    ``same_as`` (``mean:n_calls`` into ``mean:num_turns`` when every turn makes one call;
    :func:`~trajlens.intervals.repeat_key`, as the report's tables fold them)."""
    kept: list[dict] = []
    first_of: dict[tuple, dict] = {}
    for row in rows:
        numbers = repeat_key((row["a_value"], row["b_value"]), [row[c] for c in _NUMBERS])
        first = None if numbers is None else first_of.get((row["kind"], *numbers))
        if first is not None:
            first["same_as"] = ", ".join(filter(None, (first["same_as"], row["measure"])))
            continue
        if numbers is not None:
            first_of[(row["kind"], *numbers)] = row
        kept.append(row)
    return kept


_NUMBERS = ("a_value", "a_low", "a_high", "a_n", "b_value", "b_low", "b_high", "b_n")


def _shared_labels(store: Any, a: Side, b: Side) -> list[str]:
    """The labels both sides are compared under: those the sides name, else those the report
    recomputes for both runs (not whatever earlier commands stored, which would change the
    table, and its adjusted p-values, with the store's history)."""
    from trajlens.compare.sides import report_labels

    if a.label or b.label:
        return [label for label in (a.label, b.label) if label]
    return [label for label in report_labels(store, a.run_id) if label in set(report_labels(store, b.run_id))]


def _require_apart(store: Any, a: Side, b: Side, stages: Any) -> None:
    """Two sides must differ in their trajectories (two runs, two stages) or in the advantages
    they are read under (two labels): a side compared with itself, or with a stage of itself,
    is not two samples, and its tests would count one set of trajectories twice."""
    if a.run_id != b.run_id:
        return
    overlap = a.stage != b.stage and None in (a.stage, b.stage)
    # a side without a label is read under the other's
    same = a.stage == b.stage and (a.label is None or b.label is None or a.label == b.label)
    if not (overlap or same):
        return
    names = stage_names(store, a.run_id, stages, a.split)  # the run's own, on the way to the error
    apart = f"two stages of the run ({a.run_id}:{names[0]} {a.run_id}:{names[-1]})" if len(names) > 1 else None
    if overlap:
        instead = apart or f"two runs (the run has {'one stage' if names else 'no stage'})"
        raise ConfigError([f"sides {a.spec!r} and {b.spec!r} overlap: the stage's trajectories are part of the whole "
                           f"run's; compare {instead}"])
    choices = ", ".join(filter(None, ["two runs", apart]))
    one = "" if apart else f" (the run has {'one stage, ' + names[0] if names else 'no stage'})"
    raise ConfigError([f"sides {a.spec!r} and {b.spec!r} are the same trajectories under the same advantages: "
                       f"compare {choices} or two estimator labels{one}"])


def _require_labels(store: Any, side: Side, labels: list[str]) -> None:
    """A side is compared under its own label, else under the label the other side names: a
    run that cannot be recomputed under it is an error, not a table without advantages."""
    from trajlens.compare.sides import side_labels

    can = side_labels(store, side.run_id)
    for label in [side.label] if side.label else labels:
        if label not in can:
            raise ConfigError([f"side {side.spec!r}: run {side.run_id!r} has no {label} advantages, and its "
                               f"data cannot give them (estimator labels it has: {', '.join(can) or 'none'})"])


def _advantage_rows(a: SideData, b: SideData) -> list[dict | None]:
    if a.advantages.is_empty() or b.advantages.is_empty():
        return []
    rows: list[dict | None] = []
    pairs = ([(a.side.label, b.side.label)] if a.side.label and b.side.label else
             [(label, label) for label in a.advantages["estimator"].unique().sort().to_list()
              if label in set(b.advantages["estimator"].to_list())])
    for label_a, label_b in pairs:
        pooled_a = _pooled(_advantage_sums(a.advantages.filter(pl.col("estimator") == label_a)), ADVANTAGE_STATISTICS,
                           STAT_SUPPORT.get)
        pooled_b = _pooled(_advantage_sums(b.advantages.filter(pl.col("estimator") == label_b)), ADVANTAGE_STATISTICS,
                           STAT_SUPPORT.get)
        name = label_a if label_a == label_b else f"{label_a}|{label_b}"
        for statistic in ADVANTAGE_STATISTICS:
            # a side naming its label says it already ("sao-r6 recomputed under gae_raw")
            phrase = statistic.phrase if a.side.label else f"under {name} {statistic.phrase}"
            measure = Measure(f"{ADVANTAGE_PREFIX}{name}:{statistic.name}", statistic.kind, phrase)
            rows.append(_row(measure, pooled_a.get(statistic.name), pooled_b.get(statistic.name)))
    return rows


_CHECK_MEASURES = {"mean:reward": "reward"}
"""The checks' names (:mod:`trajlens.checks.step_measures`) of measures compare names otherwise."""


def _behaviour_sums(measures: pl.DataFrame) -> pl.DataFrame:
    """The checks' statistics of every behaviour measure over the trajectories (the step
    statistics of :mod:`trajlens.checks.step_measures`, summed over their steps, as the checks'
    stage change sums a stage's steps), under compare's measure names."""
    if "step" not in measures.columns:
        measures = measures.with_columns(pl.lit(0, dtype=pl.Int64).alias("step"))
    stats = [trajectory_measure_stats(measures)]
    if {"reward", "resolved"} <= set(measures.columns):
        stats.append(outcome_stats(measures))
    renamed = {check: name for name, check in _CHECK_MEASURES.items()}
    return added(pl.concat(stats).with_columns(pl.col("measure").replace(renamed)))


def _advantage_sums(steps: pl.DataFrame) -> pl.DataFrame:
    """Each advantage statistic's per-step values as the checks keep them (one unit per step,
    :func:`trajlens.checks.step_measures.scalar_stats`; values that are not finite left out),
    summed over the steps."""
    names = [s.name for s in ADVANTAGE_STATISTICS if s.name in steps.columns]
    long = steps.select("step", *(pl.col(name).cast(pl.Float64) for name in names)).unpivot(
        index="step", variable_name="measure", value_name="value").filter(pl.col("value").is_finite())
    return added(scalar_stats(long))


def _pooled(sums: pl.DataFrame, measures: tuple[Measure, ...], support: Support = measure_support) -> dict[str, dict]:
    """Each measure's pooled row (:func:`trajlens.intervals.pooled`: value, variance,
    n_effective, low, high) by name; proportions with their Wilson interval on the effective size,
    means within their ``support`` (by default the checks', :func:`~trajlens.checks.step_measures.measure_support`)."""
    wanted = sums.filter(pl.col("measure").is_in([m.name for m in measures]))
    return pooled_rows(wanted, [m.name for m in measures if m.kind != "mean"], support)


def estimates(names: list[str], frame: pl.DataFrame) -> dict[str, _stats.Estimate | None]:
    """Each behaviour measure of ``names`` (:data:`BEHAVIOUR_MEASURES`: ``share:think``,
    ``verification:quick_check``, ``ran_suite``, ``resolved``, ``mean:num_turns`` ...) over the
    trajectories of ``frame`` (per-trajectory measures; with ``reward`` and ``resolved`` columns
    for those two): the checks' value, 95% interval and effective size
    (:func:`trajlens.intervals.pooled`), by name; None where it has no value."""
    known = {m.name: m for m in BEHAVIOUR_MEASURES}
    rows = _pooled(_behaviour_sums(frame), tuple(known.get(name, Measure(name, "mean", "")) for name in names))
    return {name: None if rows.get(name) is None or rows[name]["value"] is None else _estimate(rows[name])
            for name in names}


def _row(measure: Measure, a: dict | None, b: dict | None) -> dict | None:
    """The row of a measure from the two sides' pooled rows: the difference tested as the
    checks' stage change tests it (:func:`trajlens.intervals.stage_p_value`)."""
    if a is None or b is None or a["value"] is None or b["value"] is None:
        return None
    proportion = measure.kind != "mean"
    difference = b["value"] - a["value"]
    rounding = not proportion and 0 < abs(difference) <= ROUNDING * max(1.0, abs(a["value"]), abs(b["value"]))
    if rounding:
        difference = 0.0  # float rounding, as between two whitened batches' std of 1: no difference to test
    p = None if rounding else stage_p_value(a, b, proportion)
    # No test where the stage test cannot tell (no spread): nothing to tell when nothing differs.
    p_value = p if p is not None else 1.0 if difference == 0 else None
    if proportion:
        interval = newcombe(a, b)
        effect_size = None  # Cohen's h, set over the whole table (_effect_sizes)
    else:
        interval = _stats.mean_difference(difference, a["variance"], b["variance"])
        effect_size = 0.0 if rounding else cohens_d(
            difference, a["variance"], a["n_effective"], b["variance"], b["n_effective"])
    test_name, effect = _TESTS[measure.kind]
    return {
        "measure": measure.name, "kind": measure.kind,
        "a_value": a["value"], "a_low": a["low"], "a_high": a["high"], "a_n": float(a["n_effective"]),
        "b_value": b["value"], "b_low": b["low"], "b_high": b["high"], "b_n": float(b["n_effective"]),
        "difference": difference, "difference_low": interval.low, "difference_high": interval.high,
        "test": test_name, "statistic": None if rounding else stage_z(a, b, proportion), "p_value": p_value, "effect": effect,
        "effect_size": effect_size,
        "p_adjusted": None, "significant": False, "same_as": None,
        "phrase": measure.phrase,
    }


def _estimate(row: dict) -> _stats.Estimate:
    return _stats.Estimate(row["value"], row["low"], row["high"], row["n_effective"])


def _effect_sizes() -> pl.Expr:
    """Cohen's h (:func:`trajlens.classify._stats.cohens_h`) for proportions; Cohen's d as the rows have it."""
    return pl.when(pl.col("kind") != "mean").then(cohens_h(pl.col("a_value"), pl.col("b_value"))).otherwise(
        pl.col("effect_size")).alias("effect_size")


def _schema() -> dict[str, Any]:
    floats = ("a_value", "a_low", "a_high", "a_n", "b_value", "b_low", "b_high", "b_n", "difference",
              "difference_low", "difference_high", "statistic", "p_value", "p_adjusted", "effect_size")
    schema: dict[str, Any] = {c: pl.String for c in ("measure", "kind", "test", "effect", "same_as", "phrase")}
    schema.update({c: pl.Float64 for c in floats})
    schema["significant"] = pl.Boolean
    return schema


def _format(value: float | None, kind: str, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    sign = "+" if signed else ""
    if kind != "mean" or abs(value) < 10:
        return f"{value:{sign}.3g}" if kind == "mean" else f"{value:{sign}.2f}"
    return f"{value:{sign},.0f}" if abs(value) >= 100 else f"{value:{sign}.1f}"

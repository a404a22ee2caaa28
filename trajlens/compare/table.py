"""Two runs, stages or estimators side by side: :func:`compare` and :func:`describe`.

Every behaviour measure and advantage statistic present on both sides gets one row: the two
values with 95% intervals, the difference ``B - A`` with its interval, a test and an effect
size (formulas in :mod:`trajlens.compare._stats`), sorted by the size of the effect.

With some 50 rows, two or three would cross p < 0.05 by chance, so each table's p-values are
adjusted by Benjamini-Hochberg over its rows (:data:`ADJUSTMENT`): a row is ``significant``
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

from trajlens.classify.rules import BEHAVIOUR_CLASSES, VERIFICATION_CLASSES
from trajlens.compare import _stats
from trajlens.compare.sides import RECOMPUTED, Side, SideData, parse_side, read_side
from trajlens.errors import ConfigError

SIGNIFICANCE = 0.05
"""False discovery rate at which a row's adjusted p-value is called significant."""
ADJUSTMENT = "Benjamini-Hochberg"
"""The multiple-comparison adjustment of ``p_adjusted``, named wherever a table is shown."""


@dataclass(frozen=True)
class Measure:
    """A compared quantity: its column, the test that fits it, and how a sentence says it."""

    name: str
    kind: str
    """'trajectory_rate' (share of trajectories), 'call_share' (share of calls pooled over
    trajectories, with a design-effect sample size) or 'mean' (mean of a per-trajectory or
    per-step value)."""
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

_TESTS = {"trajectory_rate": ("two-proportion z", "Cohen's h"), "call_share": ("two-proportion z", "Cohen's h"),
          "mean": ("Welch t", "Cohen's d")}


def compare(store: Any, a: str, b: str, *, stages: Any = "quartiles", advantages: bool = True) -> pl.DataFrame:
    """Compare side ``a`` with side ``b`` (``RUN``, ``RUN:STAGE`` or ``RUN:LABEL``).

    Returns one row per measure present on both sides (:data:`COMPARISON_COLUMNS`), sorted by
    the absolute effect size, largest first; measures with the same numbers as an earlier one
    are folded into it (``same_as``), and ``p_adjusted`` is the Benjamini-Hochberg adjustment
    over the remaining rows. Behaviour measures are left out when both sides
    cover the same trajectories (two estimator labels of one run). With ``advantages=False``,
    advantage statistics are left out (no recomputation) unless a side names a label.
    """
    side_a, side_b = parse_side(store, a, stages), parse_side(store, b, stages)
    labels = _shared_labels(store, side_a, side_b) if advantages or side_a.label or side_b.label else []
    data_a = read_side(store, side_a, stages, labels)
    data_b = read_side(store, side_b, stages, labels)
    if data_a.measures.is_empty() or data_b.measures.is_empty():
        empty = side_a if data_a.measures.is_empty() else side_b
        raise ConfigError([f"side {empty.spec!r}: no training trajectories to compare"])
    rows = []
    same_trajectories = side_a.run_id == side_b.run_id and side_a.stage == side_b.stage
    if not same_trajectories:
        rows += [_row(m, *_estimates(m, data_a.measures, data_b.measures)) for m in BEHAVIOUR_MEASURES]
    rows += _advantage_rows(data_a, data_b)
    rows = _fold_duplicates([r for r in rows if r is not None])
    for row, adjusted in zip(rows, _stats.benjamini_hochberg([r["p_value"] for r in rows])):
        row["p_adjusted"] = adjusted
        row["significant"] = adjusted is not None and adjusted < SIGNIFICANCE
    frame = pl.DataFrame(rows, schema=_schema()).with_columns(
        pl.lit(side_a.name).alias("a"), pl.lit(side_b.name).alias("b"))
    return frame.select(COMPARISON_COLUMNS).sort(
        pl.col("effect_size").abs(), pl.col("measure"), descending=[True, False], nulls_last=True)


def describe(comparison: pl.DataFrame, top: int = 3) -> list[str]:
    """The ``top`` largest differences in words, such as "sao-r7 (Q4) runs the full suite 0.48
    of the time against sao-r6 (Q4)'s 0.52; not significant (p = 0.62)"."""
    sentences: list[str] = []
    for row in comparison.drop_nulls("effect_size").head(top).iter_rows(named=True):
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
    tested = comparison["p_adjusted"].drop_nulls().len() if comparison.height else 0
    significant = int(comparison["significant"].sum()) if comparison.height else 0
    return (f"p-values adjusted for {tested} rows by {ADJUSTMENT} (false discovery rate "
            f"{SIGNIFICANCE:g}); {significant} row(s) significant after adjustment")


def _p_text(p: float) -> str:
    return "p < 1e-15" if p < 1e-15 else f"p = {p:.2g}"


def _fold_duplicates(rows: list[dict]) -> list[dict]:
    """Rows in order, each measure whose numbers repeat an earlier row's folded into that row's
    ``same_as`` (``mean:n_calls`` into ``mean:num_turns`` when every turn makes one call)."""
    kept: dict[tuple, dict] = {}
    for row in rows:
        key = (row["kind"], *(None if row[c] is None else round(row[c], 12) for c in _NUMBERS))
        if key in kept:
            first = kept[key]
            first["same_as"] = ", ".join(filter(None, (first["same_as"], row["measure"])))
        else:
            kept[key] = row
    return list(kept.values())


_NUMBERS = ("a_value", "a_low", "a_high", "a_n", "b_value", "b_low", "b_high", "b_n")


def _shared_labels(store: Any, a: Side, b: Side) -> list[str]:
    from trajlens.compare.sides import _labels

    if a.label or b.label:
        return [label for label in (a.label, b.label) if label]
    return [label for label in _labels(store, a.run_id) if label in set(_labels(store, b.run_id))]


def _advantage_rows(a: SideData, b: SideData) -> list[dict | None]:
    if a.advantages.is_empty() or b.advantages.is_empty():
        return []
    rows: list[dict | None] = []
    pairs = ([(a.side.label, b.side.label)] if a.side.label and b.side.label else
             [(label, label) for label in a.advantages["estimator"].unique().sort().to_list()
              if label in set(b.advantages["estimator"].to_list())])
    for label_a, label_b in pairs:
        steps_a = a.advantages.filter(pl.col("estimator") == label_a)
        steps_b = b.advantages.filter(pl.col("estimator") == label_b)
        name = label_a if label_a == label_b else f"{label_a}|{label_b}"
        for statistic in ADVANTAGE_STATISTICS:
            # a side naming its label says it already ("sao-r6 recomputed under gae_raw")
            phrase = statistic.phrase if a.side.label else f"under {name} {statistic.phrase}"
            measure = Measure(f"advantage:{name}:{statistic.name}", statistic.kind, phrase)
            rows.append(_row(measure, *_estimates(statistic, steps_a, steps_b)))
    return rows


def _estimates(measure: Measure, a: pl.DataFrame, b: pl.DataFrame):
    column = measure.name.split(":", 1)[1] if measure.name.startswith("mean:") else measure.name
    if measure.kind == "trajectory_rate":
        indicator = _indicator(measure.name)
        values_a, values_b = a.select(indicator).to_series().drop_nulls(), b.select(indicator).to_series().drop_nulls()
        if values_a.is_empty() or values_b.is_empty():
            return None, None, None
        estimate_a = _stats.wilson(float(values_a.sum()), float(values_a.len()))
        estimate_b = _stats.wilson(float(values_b.sum()), float(values_b.len()))
        return estimate_a, estimate_b, _stats.two_proportions(estimate_a, estimate_b)
    if measure.kind == "call_share":
        estimate_a, estimate_b = call_share(measure.name, a), call_share(measure.name, b)
        if estimate_a is None or estimate_b is None:
            return None, None, None
        return estimate_a, estimate_b, _stats.two_proportions(estimate_a, estimate_b)
    if column not in a.columns or column not in b.columns:
        return None, None, None
    sample_a, sample_b = _sample(a[column]), _sample(b[column])
    if sample_a.mean is None or sample_b.mean is None:
        return None, None, None
    return _stats.mean_estimate(sample_a), _stats.mean_estimate(sample_b), _stats.welch(sample_a, sample_b)


def _indicator(name: str) -> pl.Expr:
    if name.startswith("uses:"):
        return pl.col(f"count_{name.split(':', 1)[1]}") > 0
    return pl.col(name).cast(pl.Boolean)


def call_share(name: str, frame: pl.DataFrame) -> _stats.Estimate | None:
    """Calls of a class over calls (or verification calls), with Kish's effective size."""
    group, klass = name.split(":", 1)
    x = frame[f"count_{klass}"].cast(pl.Float64)
    n = frame["n_verification" if group == "verification" else "n_calls"].cast(pl.Float64)
    total = float(n.sum())
    m = frame.height
    if total <= 0:
        return None
    p = float(x.sum()) / total
    if m < 2:
        return _stats.wilson(p * m, float(m))
    variance = m / (m - 1) * float(((x - p * n) ** 2).sum()) / total ** 2
    n_effective = min(p * (1 - p) / variance, total) if variance > 0 else total
    return _stats.wilson(p * n_effective, n_effective)


def _sample(values: pl.Series) -> _stats.Sample:
    values = values.cast(pl.Float64).drop_nulls().drop_nans()
    if values.is_empty():
        return _stats.Sample(None, None, 0)
    sd = values.std() if values.len() > 1 else None
    return _stats.Sample(float(values.mean()), None if sd is None else float(sd), values.len())


def _row(measure: Measure, a: _stats.Estimate | None, b: _stats.Estimate | None, test: _stats.Test | None):
    if a is None or b is None or test is None:
        return None
    test_name, effect = _TESTS[measure.kind]
    return {
        "measure": measure.name, "kind": measure.kind,
        "a_value": a.value, "a_low": a.low, "a_high": a.high, "a_n": float(a.n),
        "b_value": b.value, "b_low": b.low, "b_high": b.high, "b_n": float(b.n),
        "difference": test.difference, "difference_low": test.low, "difference_high": test.high,
        "test": test_name, "statistic": test.statistic, "p_value": test.p_value, "effect": effect,
        "effect_size": test.effect_size,
        "p_adjusted": None, "significant": False, "same_as": None,
        "phrase": measure.phrase,
    }


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

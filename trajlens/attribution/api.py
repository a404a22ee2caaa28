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

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from trajlens.attribution.calls import step_call_credit
from trajlens.attribution.drift import DriftConfig, attribute_drift
from trajlens.attribution.measures import channel_measures, class_summary, length_bias, reward_relevance
from trajlens.attribution.recomputations import (
    AGGREGATIONS, RECOMPUTATIONS, TOKEN_ESTIMATORS, Recomputation, RunEstimator, own_recomputation,
)
from trajlens.errors import ConfigError

CALL_CREDIT_COLUMNS: dict[str, pl.DataType] = {
    "run_id": pl.String, "step": pl.Int64, "trajectory_id": pl.String, "call_index": pl.Int32,
    "primary_class": pl.String, "estimator": pl.String, "aggregation": pl.String, "advantage": pl.Float64,
    "push": pl.Float64, "tokens": pl.Float64, "token_start": pl.Int64, "token_end": pl.Int64, "fallback": pl.Boolean,
}
"""Columns of ``call_credit``: one row per call, estimator and aggregation. ``advantage`` is the
mean advantage over the call's credited tokens, ``push`` the sum over them of loss weight times
advantage, ``tokens`` their number, ``token_start``/``token_end`` the credited span (null under
the fallback), ``fallback`` whether the trajectory's advantage was spread over its calls by turn."""

CALLS_PER_BLOCK = 20_000
"""Tool calls classified together (a block of steps); bounds memory, amortises the classifier."""
_CLASS_SUMS = ("calls", "push_sum", "up", "push_sum_scaled", "push_sumsq_scaled", "fallback", "step_mean",
               "step_mean_scaled", "step_calls")

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
    recomputations: tuple[Recomputation, ...]
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
    notes: list[str] = field(default_factory=list)
    """What was skipped or estimated (the fallback), in words."""
    fallback_calls: int = 0
    flags: list[str] = field(default_factory=list)
    """The findings that flag a problem: drift, a streak, length bias or a collapse under the run's estimator."""

    @property
    def flagged(self) -> bool:
        """Whether anything in the run calls for attention."""
        return bool(self.flags)


def attribute(
    store: Any,
    run_id: str,
    recomputations: tuple[Recomputation, ...] | None = None,
    *,
    aggregations: tuple[str, ...] = AGGREGATIONS,
    drift: DriftConfig = DriftConfig(),
    stages: Any = "quartiles",
    write: bool = True,
    progress: Callable[[str], None] | None = None,
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
    """
    from trajlens.classify import assign_stages
    from trajlens.estimators import AGGREGATION_MODES

    store.require_runs([run_id])
    unknown = [m for m in aggregations if m not in AGGREGATION_MODES]
    if unknown:
        raise ConfigError([f"aggregation {m!r} is not one of {', '.join(AGGREGATION_MODES)}" for m in unknown])
    runs = store.runs.filter(pl.col("run_id") == run_id).collect()
    trajectories = (store.trajectories.filter((pl.col("run_id") == run_id) & (pl.col("split") == "train"))
                    .collect().sort("step", "trajectory_id"))
    if trajectories.height == 0:
        raise ConfigError([f"run {run_id!r} has no training trajectories to attribute"])
    facts = _data_facts(store, run_id, trajectories)
    wanted = tuple(recomputations) if recomputations is not None else RECOMPUTATIONS
    own = own_recomputation(runs["estimator"][0], runs["config"][0], wanted)
    notes: list[str] = []
    usable = []
    for rec in wanted:
        reason = _unavailable(rec, facts)
        if reason:
            if recomputations is not None or rec.label == own.label:
                notes.append(f"{rec.label}: not computed ({reason})")
            continue
        usable.append(rec)
    if not usable:
        raise ConfigError([f"run {run_id!r}: no estimator can be recomputed ({'; '.join(notes) or 'no data'})"])
    if own.label is None:
        notes.append("the run's own estimator is not known from its config: no estimator is marked as the run's")
    elif own.label not in [r.label for r in usable]:
        own = RunEstimator(None, own.aggregation, own.aggregation_logged)
    if not own.aggregation_logged:
        notes.append("the run's loss aggregation is not logged; token-mean (verl's default) is taken as the run's")
    aggregation = own.aggregation if own.aggregation in aggregations else aggregations[0]
    outcome = {r.label: _recompute(trajectories, None, r) for r in usable if r.estimator not in TOKEN_ESTIMATORS}
    staged = assign_stages(trajectories.select("run_id", "step").unique(), stages).select("step", "stage", "stage_index")

    stream = getattr(store, "credit_stream", _CreditStream)(store, run_id, trajectories, tuple(usable), outcome, tuple(aggregations), facts, progress)
    target = None
    if write:
        target = store.write_derived("call_credit", run_id, stream)
    else:
        stream.consume()
    call_credit = pl.scan_parquet(target) if target is not None else pl.concat(stream.kept or [_empty_calls()]).lazy()
    class_credit = _class_credit(stream, run_id, staged)
    if write:
        store.write_derived("class_credit", run_id, class_credit)
    trajectory_classes = stream.trajectory_frame().join(staged, on="step", how="left")
    relevance = reward_relevance(trajectory_classes, sorted(stream.classes))
    summary = class_summary(class_credit, relevance)
    bias = length_bias(stream.trajectory_push_frame(), bootstrap=min(drift.bootstrap, 500), seed=drift.seed)
    channels = channel_measures(trajectories) if facts["channels"] > 1 else pl.DataFrame()
    flags = pl.DataFrame(stream.flags, schema={"step": pl.Int64, "estimator": pl.String, "all_negative": pl.Boolean,
                                               "all_positive": pl.Boolean})
    drifted = attribute_drift(class_credit, flags, own.label, aggregation, drift)
    if stream.fallback_calls:
        notes.append(f"{stream.fallback_calls} of {stream.total_calls} calls have no token arrays: their credit is the "
                     "trajectory's advantage spread over its calls by turn (fallback; token estimators skip them)")
    findings = _findings(own, aggregation, flags, bias, channels, stream)
    flagged = [f for f in findings if not f.startswith(("run's estimator", "sum-then-normalise vs GDPO"))
               and (f.startswith(("all-negative", "response length", "reward channel"))
                    or (own.label is not None and f.startswith(f"length bias under {own.label} ")))]
    flagged += [f for f in drifted.findings if drifted.frame.height]
    return AttributionResult(run_id, own, tuple(usable), tuple(aggregations), call_credit, class_credit, summary, bias,
                             channels, flags, drifted.frame, findings + drifted.findings, notes, stream.fallback_calls,
                             flagged)


def _data_facts(store: Any, run_id: str, trajectories: pl.DataFrame) -> dict[str, Any]:
    token_facts = store.sql(
        'SELECT count(*) AS rows, count(*) FILTER (WHERE "values" IS NOT NULL) AS with_values FROM tokens WHERE run_id = $run',
        {"run": run_id}).row(0, named=True)
    largest = trajectories.group_by("step", "group_id").len()["len"].max()
    channels = trajectories.select(pl.col("reward_channels").list.len().max()).item() or 0
    return {"token_rows": token_facts["rows"], "with_values": token_facts["with_values"],
            "largest_group": int(largest or 0), "without_reward": int(trajectories["reward"].null_count()),
            "channels": int(channels), "without_length": int(trajectories["model_tokens"].null_count()),
            "trajectories": trajectories.height}


def _unavailable(rec: Recomputation, facts: dict[str, Any]) -> str | None:
    if rec.needs == "values" and facts["with_values"] < facts["trajectories"]:
        return "needs critic values in the token arrays of every trajectory"
    if rec.needs == "tokens" and facts["token_rows"] < facts["trajectories"]:
        return "needs token arrays for every trajectory"
    if rec.needs in ("groups", "rewards") and facts["without_reward"]:
        return "needs a reward for every trajectory"
    if rec.needs == "groups" and facts["largest_group"] < 2:
        return "needs groups of two or more rollouts"
    if rec.needs == "channels" and facts["channels"] < 2:
        return "needs two or more reward channels"
    if rec.estimator == "gdpo_verl" and facts["without_length"] and facts["token_rows"] < facts["trajectories"]:
        return "needs a model-token count for every trajectory"
    return None


def _recompute(trajectories: pl.DataFrame, tokens: pl.DataFrame | None, rec: Recomputation) -> pl.DataFrame:
    from trajlens.estimators import recompute

    result = recompute(trajectories, tokens, rec.estimator, **rec.options)
    return result.select([c for c in ("trajectory_id", "advantage", "token_advantages") if c in result.columns])


class _CreditStream:
    """Credits the run step by step; written by ``write_derived`` through :meth:`write_parquet`."""

    def __init__(self, store, run_id, trajectories, recs, outcome, modes, facts, progress) -> None:
        self.store, self.run_id, self.trajectories = store, run_id, trajectories
        self.recs, self.outcome, self.modes, self.facts, self.progress = recs, outcome, modes, facts, progress
        self.class_rows: list[pl.DataFrame] = []
        self.trajectory_rows: list[pl.DataFrame] = []
        self.push_rows: list[pl.DataFrame] = []
        self.flags: list[dict[str, Any]] = []
        self.classes: set[str] = set()
        self.fallback_calls = 0
        self.total_calls = 0
        self.kept: list[pl.DataFrame] | None = None

    def write_parquet(self, path: Path | str) -> None:
        """Stream the ``call_credit`` rows into one Parquet file, a step at a time."""
        writer = None
        try:
            for frame in self._steps():
                table = frame.to_arrow()
                if writer is None:
                    writer = pq.ParquetWriter(str(path), table.schema, compression="zstd")
                writer.write_table(table)
            if writer is None:
                _empty_calls().write_parquet(path)
        finally:
            if writer is not None:
                writer.close()

    def consume(self) -> None:
        self.kept = list(self._steps())

    def _steps(self) -> Iterator[pl.DataFrame]:
        steps, batches = _steps_of(self.trajectories)
        block = max(1, CALLS_PER_BLOCK // max(1, int(self.trajectories["num_turns"].head(batches[0].height).sum() or 1)))
        for first in range(0, len(steps), block):
            block_steps = steps[first:first + block]
            calls_block = self._classified_calls(block_steps)
            for step, batch in zip(block_steps, batches[first:first + block]):
                calls = calls_block.filter(pl.col("step") == step)
                if calls.height == 0:
                    continue
                order = batch.select("trajectory_id").with_row_index("__b")
                calls = calls.join(order, on="trajectory_id").sort("__b", "call_index")
                tokens = self._read("tokens", [step], ["run_id", "trajectory_id", "response_mask", "values", "token_rewards"])
                advantages: list[pl.DataFrame | None] = []
                for rec in self.recs:
                    if rec.estimator in TOKEN_ESTIMATORS:
                        with_tokens = batch.join(tokens.select("trajectory_id"), on="trajectory_id", how="semi") if tokens is not None else batch.head(0)
                        advantages.append(_recompute(with_tokens, tokens, rec) if with_tokens.height else None)
                    else:
                        advantages.append(self.outcome[rec.label].join(batch.select("trajectory_id"), on="trajectory_id", how="semi"))
                credit = step_call_credit(batch, calls, tokens, advantages, self.modes)
                yield self._reduce(step, batch, calls, credit)
                if self.progress is not None:
                    self.progress(f"step {step}")

    def _read(self, table: str, steps: list[int], columns: list[str]) -> pl.DataFrame | None:
        """The rows of this run's step partitions (read by path: no scan over other runs' files)."""
        from trajlens.store.layout import step_dir

        files = [str(f) for step in steps
                 for f in sorted((self.store.path / "runs" / self.run_id / table / step_dir(step)).glob("*.parquet"))]
        if not files:
            return None
        frame = pl.read_parquet(files)
        return frame.select([c for c in columns if c in frame.columns])

    def _classified_calls(self, steps: list[int]) -> pl.DataFrame:
        from trajlens.classify import classify_calls

        calls = self._read("tool_calls", steps, ["step", "trajectory_id", "call_index", "turn", "tool_name",
                                                    "arguments", "command", "token_end", "format_error"])
        if calls is None:
            return pl.DataFrame(schema={"step": pl.Int64, "trajectory_id": pl.String})
        classified = classify_calls(calls).filter(pl.col("primary_class").is_not_null())
        return classified.select("step", "trajectory_id", "call_index", "turn", "token_end", "primary_class")

    def _reduce(self, step, batch, calls, credit) -> pl.DataFrame:
        classes = calls["primary_class"].to_numpy()
        names, class_index = np.unique(classes, return_inverse=True)
        self.classes.update(names.tolist())
        count = classes.size
        self.total_calls += count
        self.fallback_calls += int(credit.fallback.sum())
        per_class = np.bincount(class_index, minlength=names.size)
        k = names.size
        labels, modes, columns = [], [], {name: [] for name in _CLASS_SUMS}
        push_labels, push_modes, push_lengths, push_values = [], [], [], []
        length = credit.lengths.astype(float)
        for r, rec in enumerate(self.recs):
            if not credit.computed[r]:
                continue
            advantages = credit.trajectory_advantage[r]
            finite = advantages[np.isfinite(advantages)]
            self.flags.append({"step": step, "estimator": rec.label, "all_negative": bool(credit.all_negative[r]),
                               "all_positive": bool(finite.size and (finite > 0).all())})
            for m, mode in enumerate(self.modes):
                push = credit.push[r, m]
                valid = np.isfinite(push)
                if not valid.any():
                    continue
                clean = np.where(valid, push, 0.0)
                scale = np.abs(clean[valid]).mean()
                scaled = clean / scale if scale > 0 else np.zeros_like(clean)
                weights = {"calls": valid.astype(float), "push_sum": clean, "up": (valid & (push > 0)).astype(float),
                           "push_sum_scaled": scaled, "push_sumsq_scaled": scaled**2,
                           "fallback": (credit.fallback & valid).astype(float)}
                for name, w in weights.items():
                    columns[name].append(np.bincount(class_index, weights=w, minlength=k))
                columns["step_mean"].append(np.full(k, clean[valid].mean()))
                columns["step_mean_scaled"].append(np.full(k, scaled[valid].mean()))
                columns["step_calls"].append(np.full(k, valid.sum()))
                labels += [rec.label] * k
                modes += [mode] * k
                push_labels += [rec.label] * length.size
                push_modes += [mode] * length.size
                push_lengths.append(length)
                push_values.append(credit.trajectory_push[r, m] / np.maximum(length, 1.0))
        if labels:
            c = {name: np.concatenate(v) for name, v in columns.items()}
            n = c["calls"]
            with np.errstate(invalid="ignore", divide="ignore"):
                self.class_rows.append(pl.DataFrame({
                    "step": np.full(n.size, step), "primary_class": np.tile(names, n.size // k), "estimator": labels,
                    "aggregation": modes, "calls": n.astype(np.int64), "step_calls": c["step_calls"].astype(np.int64),
                    "class_share": np.tile(per_class / count, n.size // k), "credit": c["push_sum"] / n,
                    "share_pushed_up": c["up"] / n, "relative_credit": c["push_sum"] / n - c["step_mean"],
                    "relative_credit_scaled": c["push_sum_scaled"] / n - c["step_mean_scaled"],
                    "push_sum_scaled": c["push_sum_scaled"], "push_sumsq_scaled": c["push_sumsq_scaled"],
                    "step_mean_scaled": c["step_mean_scaled"], "fallback_share": c["fallback"] / n,
                }))
            self.push_rows.append(pl.DataFrame({
                "step": np.full(len(push_labels), step), "estimator": push_labels, "aggregation": push_modes,
                "length": np.concatenate(push_lengths), "push_per_token": np.concatenate(push_values),
            }))
        counts = np.zeros((batch.height, k))
        np.add.at(counts, (credit.call_trajectory, class_index), 1.0)
        self.trajectory_rows.append(pl.DataFrame({
            "step": np.full(batch.height, step), "reward": batch["reward"].cast(pl.Float64), "length": length,
            **{f"count:{n}": counts[:, i] for i, n in enumerate(names)},
        }))
        return self._call_rows(step, calls, credit)

    def _call_rows(self, step, calls, credit) -> pl.DataFrame:
        count = calls.height
        computed = [(r, rec) for r, rec in enumerate(self.recs) if credit.computed[r]]
        blocks = len(computed) * len(self.modes)
        if not blocks:
            return _empty_calls()
        push = np.concatenate([credit.push[r, m] for r, _ in computed for m in range(len(self.modes))])
        advantage = np.concatenate([credit.advantage[r] for r, _ in computed for _ in self.modes])
        start = pa.array(np.tile(credit.token_start, blocks), mask=np.tile(credit.fallback, blocks))
        end = pa.array(np.tile(credit.token_end, blocks), mask=np.tile(credit.fallback, blocks))
        labels = pa.DictionaryArray.from_arrays(
            np.repeat(np.arange(len(computed), dtype=np.int32), count * len(self.modes)), [rec.label for _, rec in computed])
        modes = pa.DictionaryArray.from_arrays(
            np.tile(np.repeat(np.arange(len(self.modes), dtype=np.int32), count), len(computed)), list(self.modes))
        table = pa.table({
            "run_id": pa.array(np.full(count * blocks, self.run_id)), "step": pa.array(np.full(count * blocks, step)),
            "trajectory_id": pa.concat_arrays([calls["trajectory_id"].to_arrow()] * blocks) if count else pa.array([], pa.string()),
            "call_index": pa.array(np.tile(calls["call_index"].to_numpy().astype(np.int32), blocks)),
            "primary_class": pa.concat_arrays([calls["primary_class"].to_arrow()] * blocks) if count else pa.array([], pa.string()),
            "estimator": labels.cast(pa.string()), "aggregation": modes.cast(pa.string()),
            "advantage": pa.array(advantage), "push": pa.array(push), "tokens": pa.array(np.tile(credit.tokens, blocks)),
            "token_start": start, "token_end": end, "fallback": pa.array(np.tile(credit.fallback, blocks)),
        })
        frame = pl.from_arrow(table)
        return frame.filter(pl.col("push").is_not_nan()).cast(CALL_CREDIT_COLUMNS)

    def trajectory_frame(self) -> pl.DataFrame:
        frame = pl.concat(self.trajectory_rows, how="diagonal_relaxed") if self.trajectory_rows else pl.DataFrame({"step": [], "reward": []})
        return frame.with_columns(pl.col("^count:.*$").fill_null(0.0))

    def trajectory_push_frame(self) -> pl.DataFrame:
        if not self.push_rows:
            return pl.DataFrame(schema={"step": pl.Int64, "estimator": pl.String, "aggregation": pl.String,
                                        "length": pl.Float64, "push_per_token": pl.Float64})
        return pl.concat(self.push_rows)


def _steps_of(trajectories: pl.DataFrame) -> tuple[list[int], list[pl.DataFrame]]:
    parts = trajectories.partition_by("step", maintain_order=True)
    return [int(p["step"][0]) for p in parts], parts


def _empty_calls() -> pl.DataFrame:
    return pl.DataFrame(schema=CALL_CREDIT_COLUMNS)


def _class_credit(stream: _CreditStream, run_id: str, staged: pl.DataFrame) -> pl.DataFrame:
    if not stream.class_rows:
        return pl.DataFrame()
    frame = pl.concat(stream.class_rows, how="vertical_relaxed").with_columns(pl.lit(run_id).alias("run_id"))
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
              stream: _CreditStream) -> list[str]:
    from trajlens.attribution.drift import _ranges

    out = []
    if own.label:
        out.append(f"run's estimator: {own.label}, aggregation {aggregation}")
    if own.label:  # counterfactual estimators' streaks are in step_flags, not findings: the run never saw them
        negative = flags.filter((pl.col("estimator") == own.label) & pl.col("all_negative"))["step"].to_list()
        if negative:
            out.append(f"all-negative batches under the run's estimator ({own.label}) at steps {_ranges(negative)}")
    out += _length_drift(stream)
    for row in bias.filter(pl.col("aggregation") == aggregation).iter_rows(named=True) if bias.height else []:
        if math.isfinite(row["elasticity_low"]) and (row["elasticity_high"] < -0.2 or row["elasticity_low"] > 0.2):
            out.append(f"length bias under {row['estimator']} / {row['aggregation']}: elasticity of push per token on "
                       f"length {row['elasticity']:.2f} [{row['elasticity_low']:.2f}, {row['elasticity_high']:.2f}]")
    if channels.height:
        misalignment = channels["rank_misalignment"].drop_nulls()
        if misalignment.len():
            out.append(f"sum-then-normalise vs GDPO rank misalignment: mean {misalignment.mean():.2f} per group")
        out += _channel_drift(channels)
    return out


def _quarters(steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the first and the last quarter of the distinct steps."""
    unique = np.unique(steps)
    cut = max(1, unique.size // 4)
    return np.isin(steps, unique[:cut]), np.isin(steps, unique[-cut:])


def _welch_p(a: np.ndarray, b: np.ndarray) -> float:
    if a.size < 2 or b.size < 2:
        return float("nan")
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    return math.erfc(abs(b.mean() - a.mean()) / se / math.sqrt(2)) if se > 0 else 0.0


def _length_drift(stream: "_CreditStream") -> list[str]:
    """Response length first quarter vs last: grew or shrank by 20% or more (p < 0.001)."""
    frame = stream.trajectory_frame()
    if "length" not in frame.columns or frame.height < 8:
        return []
    steps, length = frame["step"].to_numpy(), frame["length"].to_numpy().astype(float)
    first, last = _quarters(steps)
    a, b = length[first], length[last]
    p_value = _welch_p(a, b)
    if not a.size or not math.isfinite(p_value) or p_value >= 0.001 or abs(b.mean() / a.mean() - 1) < 0.2:
        return []
    verb = "grew" if b.mean() > a.mean() else "shrank"
    return [f"response length {verb}: {a.mean():.0f} -> {b.mean():.0f} model tokens per trajectory "
            f"(first vs last quarter of steps, p = {p_value:.1g})"]


def _channel_drift(channels: pl.DataFrame) -> list[str]:
    """A reward channel whose mean fell by half or more from the first quarter to the last (p < 0.001)."""
    out = []
    steps = channels["step"].to_numpy()
    first, last = _quarters(steps)
    for column in [c for c in channels.columns if c.startswith("mean:")]:
        values = channels[column].to_numpy().astype(float)
        a, b = values[first], values[last]
        p_value = _welch_p(a, b)
        if a.size and a.mean() > 0 and b.mean() <= 0.5 * a.mean() and math.isfinite(p_value) and p_value < 0.001:
            out.append(f"reward channel {column[5:]} collapsed: {a.mean():.2f} -> {b.mean():.2f} "
                       f"(first vs last quarter of steps, step means, p = {p_value:.1g})")
    return out

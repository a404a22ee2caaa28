"""When a check fires: its condition evaluated over one measure's per-step statistics.

Each function takes the statistics of one measure (rows of :data:`trajlens.checks.step_measures.STAT_COLUMNS`
for the steps the check applies to, in step order) and returns a :class:`Outcome`: the steps
where it fired and the evidence (value, 95% interval, threshold) for the step that shows it
best. Formulas (z = 1.959964; p-values two-sided, on Student's t):

* pooled value and interval over a window or a stage, and the stage change: the one estimate
  and test of :mod:`trajlens.intervals` (:func:`~trajlens.intervals.pooled`,
  :func:`~trajlens.intervals.stage_p_value`); proportions get a Wilson interval on the design-effect
  sample size, means ``p +- z sqrt(var)`` within the measure's support (:func:`~trajlens.checks.step_measures.measure_support`).
  Whether a stage change counts is :mod:`trajlens.run.change`'s rule, which the report's stage
  trends and attribution's drifts judge by too.
* trend: least-squares slope of the per-step values over the window,
  ``se = sqrt(sum r^2 / (k - 2) / sum (t - mean t)^2)``, ``slope / se`` read on Student's t
  with ``k - 2`` degrees of freedom (``k`` the window's values).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import polars as pl

from trajlens.checks.kinds import KINDS
from trajlens.checks.spec import Check
from trajlens.checks.step_measures import measure_support
from trajlens.classify.stages import StageSpec, assign_stages
from trajlens.intervals import SUMS, added, pooled, student_t_p_value
from trajlens.run import change
from trajlens.run.change import change_bound

@dataclass(frozen=True)
class Evidence:
    """The numbers behind a verdict, at one step."""

    step: int | None
    value: float | None
    low: float | None = None
    high: float | None = None
    threshold: str = ""
    """What makes the check fire, read after ``fires`` and ``fires_on``: ``> 0.15``, ``outside [a, b]``."""
    detail: str = ""
    fires_on: str = "when"
    """The word that joins ``fires`` to the threshold: ``when > 0.15``, ``on a significant increase``."""

    def describe(self) -> str:
        if self.value is None:
            return self.detail
        interval = f" [{_fmt(self.low)}, {_fmt(self.high)}]" if self.low is not None and self.high is not None else ""
        where = f"step {self.step}: " if self.step is not None else ""
        text = f"{where}{_fmt(self.value)}{interval}"
        if self.threshold:
            text += f", fires {self.fires_on} {self.threshold}"
        return text + (f"; {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class Outcome:
    """The verdict of one check on one concrete measure."""

    measure: str
    fired_steps: tuple[int, ...]
    evidence: Evidence
    evaluated_steps: int
    values: pl.DataFrame = field(repr=False, default_factory=pl.DataFrame)
    """Per-step value, low and high as the condition saw them (for plots)."""
    judged: bool = True
    """Whether the condition could be judged at all: a step with a value (a threshold), two
    stages with data (a stage change), a full window (a trend) or baseline (a jump). One that
    could not is no pass: its check is skipped, with ``evidence.detail`` as the reason."""


def _fmt(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.4g}"


def windowed(series: pl.DataFrame, window: int, proportion: bool) -> pl.DataFrame:
    """Each step's statistics pooled with the ``window - 1`` steps before it; a step with fewer
    before it has no value (a window of 20 steps is never judged on one)."""
    if window > 1:
        series = series.with_columns(
            [pl.col(c).cast(pl.Float64).rolling_sum(window_size=window, min_samples=window) for c in SUMS])
    return pooled(series, proportion, measure_support)


def _window_detail(check: Check, frame: pl.DataFrame) -> str:
    """The evidence's note on the window: its size, or that the run has no full one."""
    if check.window <= 1:
        return ""
    return f"window {check.window} steps" if _has_values(frame) else f"no window of {check.window} steps"


def evaluate(check: Check, measure: str, series: pl.DataFrame, proportion: bool) -> Outcome:
    """Evaluate ``check`` on one measure's statistics (already restricted to its steps), by its
    condition's entry in :data:`trajlens.checks.kinds.CONDITION_KINDS`."""
    return KINDS[check.condition].evaluator()(check, measure, series, proportion)


def _beyond(check: Check, value: pl.Expr) -> pl.Expr:
    """Whether a value lies past the threshold; a NaN (a metric a diverging run logged as NaN) lies
    past any, above or below."""
    above = value > check.above if check.above is not None else pl.lit(False)
    below = value < check.below if check.below is not None else pl.lit(False)
    return (above | below | value.is_nan()).fill_null(False)


def _worst(check: Check, frame: pl.DataFrame) -> dict:
    """The row farthest beyond (or closest to) the threshold; of rows as far, the earliest step's
    (so the evidence does not depend on how the steps were read together)."""
    distance = pl.lit(-math.inf)
    if check.above is not None:
        distance = pl.max_horizontal(distance, pl.col("value") - check.above)
    if check.below is not None:
        distance = pl.max_horizontal(distance, check.below - pl.col("value"))
    rows = frame.drop_nulls("value").with_columns(distance.alias("__d")).sort(
        "__d", "step", descending=[True, False])
    return rows.row(0, named=True) if rows.height else {}


def _evidence(row: dict, threshold: str, detail: str = "") -> Evidence:
    if not row:
        return Evidence(None, None, detail=detail or "no value")
    return Evidence(int(row["step"]), row["value"], row.get("low"), row.get("high"), threshold, detail)


def _values(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select("step", "value", "low", "high")


def threshold(check: Check, measure: str, series: pl.DataFrame, proportion: bool) -> Outcome:
    frame = windowed(series, check.window, proportion)
    if check.significant:
        above = (pl.col("low") > check.above) if check.above is not None else pl.lit(False)
        below = (pl.col("high") < check.below) if check.below is not None else pl.lit(False)
        hit = (above | below).fill_null(False)
    else:
        hit = _beyond(check, pl.col("value"))
    frame = frame.with_columns(hit.alias("fired"))
    fired = tuple(frame.filter("fired")["step"].to_list())
    sign = check.sign + (" (whole interval)" if check.significant else "")
    detail = _window_detail(check, frame)
    return Outcome(measure, fired, _evidence(_worst(check, frame), sign, detail), frame.height, _values(frame),
                   _has_values(frame))


def _has_values(frame: pl.DataFrame) -> bool:
    return frame.height > 0 and frame["value"].drop_nulls().len() > 0


def consecutive(check: Check, measure: str, series: pl.DataFrame, proportion: bool) -> Outcome:
    frame = windowed(series, check.window, proportion).with_columns(_beyond(check, pl.col("value")).alias("hit"))
    from trajlens.estimators.diagnostics import flagged_runs

    steps = frame["step"].to_list()
    # Consecutive as every surface counts it: adjacent at the run's cadence (estimators.flagged_runs).
    runs = flagged_runs(steps, frame["hit"].fill_null(False).to_list())
    position = {step: i for i, step in enumerate(steps)}
    fired = [steps[i] for first, last, length in runs if length >= (check.steps or 1)
             for i in range(position[first], position[last] + 1)]
    longest = max(runs, key=lambda run: run[2], default=None)
    detail = f"longest run {longest[2] if longest else 0} steps" + \
        (f" ({longest[0]}-{longest[1]})" if longest else "") + f", needs {check.steps}"
    row = _worst(check, frame.filter(pl.col("step").is_in(fired)) if fired else frame)
    valued = frame["value"].drop_nulls().len()
    if valued < (check.steps or 1):  # no run of that length could be: nothing was judged
        return Outcome(measure, (), Evidence(None, None, detail=f"fewer than {check.steps} steps with a value ({valued})"),
                       frame.height, _values(frame), judged=False)
    return Outcome(measure, tuple(fired), _evidence(row, check.sign, detail), frame.height, _values(frame),
                   _has_values(frame))


@lru_cache(maxsize=4)
def _stage_ranges(stages: StageSpec, steps: tuple[int, ...]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The stages ``stages`` cuts ``steps`` into, each with its steps, in order: cut by the stage
    report's own rule (:func:`~trajlens.classify.stages.assign_stages`), so a check's Q4 is the
    report's Q4. The last few are remembered: every stage check of a step cuts the same steps
    (few entries, as a long run's steps are many)."""
    staged = assign_stages(pl.DataFrame({"run_id": [""] * len(steps), "step": steps}, schema=_STEPS), stages)
    staged = staged.drop_nulls("stage_index").group_by("stage_index", "stage").agg(pl.col("step").unique().sort())
    return tuple((name, tuple(members)) for _, name, members in staged.sort("stage_index").iter_rows())


_STEPS = {"run_id": pl.String, "step": pl.Int64}


def _stage_rows(series: pl.DataFrame, steps: list[int], in_order: bool, members: tuple[int, ...]) -> pl.DataFrame:
    """The rows of ``series`` (whose steps are ``steps``, ``in_order`` or not) at the stage's
    steps ``members``, in their order. A stage is every step of a range, so in step order its
    rows are one slice."""
    if in_order:
        start = bisect.bisect_left(steps, members[0])
        return series.slice(start, bisect.bisect_right(steps, members[-1]) - start)
    return series.filter(pl.col("step").is_in(members))


def stage_change(check: Check, measure: str, series: pl.DataFrame, proportion: bool) -> Outcome:
    steps = series["step"].to_list()
    stages = [(name, members) for name, members in _stage_ranges(check.stages, tuple(steps)) if members]
    in_order = all(a <= b for a, b in zip(steps, steps[1:]))
    sums = []
    for name, members in stages:
        part = added(_stage_rows(series, steps, in_order, members), by=())
        sums.append(part.with_columns(pl.lit(name).alias("stage"), pl.lit(members[0]).alias("step"),
                                      pl.lit(measure).alias("measure")))
    values = _values(pooled(series, proportion, measure_support))
    if len(sums) < 2:
        return Outcome(measure, (), Evidence(None, None, detail=f"fewer than two stages with data ({len(sums)})"),
                       len(steps), values, judged=False)
    table = pooled(pl.concat(sums), proportion, measure_support).to_dicts()
    pairs = list(zip(range(len(table) - 1), range(1, len(table)))) if check.compare == "consecutive" \
        else [(0, len(table) - 1)]
    rule = change.ChangeRule(check.alpha, check.min_change, check.min_ratio)
    fired: list[int] = []
    best: tuple[float, Evidence] | None = None
    for a, b in pairs:
        first, second = table[a], table[b]
        if first["value"] is None or second["value"] is None:
            continue
        difference = second["value"] - first["value"]
        p_value = change.p_value(first, second, proportion)
        signed = difference if check.direction == "increase" else -difference
        detail = (f"{first['stage']} {_fmt(first['value'])} [{_fmt(first['low'])}, {_fmt(first['high'])}] -> "
                  f"{second['stage']} {_fmt(second['value'])}; p = {p_value:.2g}")
        # the sizes the rule asks for, as the change has them
        if rule.min_change > 0:
            detail += f"; change {_fmt(difference + 0.0)}"  # signed as sample and the report give it (+ 0.0: no -0)
        if rule.min_ratio > 1:
            detail += f"; ratio {_fmt(change.ratio(second['value'], first['value'], check.direction))}"
        evidence = Evidence(int(second["step"]), second["value"], second["low"], second["high"],
                            rule.describe(check.direction), detail, fires_on="on")
        hit = change.counts(rule, first["value"], second["value"], p_value, check.direction)
        if hit:
            fired += stages[b][1]
        score = signed if hit else signed - 1e9
        if best is None or score > best[0]:
            best = (score, evidence)
    evidence = best[1] if best else Evidence(None, None, detail="no stage pair with values")
    return Outcome(measure, tuple(sorted(set(fired))), evidence, len(steps), values, judged=best is not None)


def trend(check: Check, measure: str, series: pl.DataFrame, proportion: bool) -> Outcome:
    frame = pooled(series, proportion, measure_support)
    steps = np.asarray(frame["step"].to_list(), dtype=float)
    values = np.asarray(frame["value"].fill_null(float("nan")).to_list(), dtype=float)
    k = check.window
    needed = max(3, k // 2)  # values a window must hold to fit a slope with a residual
    fired: list[int] = []
    best: tuple[float, Evidence] | None = None
    for end in range(k, len(steps) + 1):
        t, y = steps[end - k:end], values[end - k:end]
        keep = ~np.isnan(y)
        t, y = t[keep], y[keep]
        if len(t) < needed:
            continue
        centred = t - t.mean()
        spread = float((centred**2).sum())
        if spread == 0:
            continue
        slope = float((centred * (y - y.mean())).sum() / spread)  # least-squares slope per step
        residual = y - y.mean() - slope * centred
        se = math.sqrt(float((residual**2).sum()) / (len(t) - 2) / spread)
        # the slope's t statistic, on Student's t with n - 2 degrees of freedom
        p_value = student_t_p_value(slope / se, len(t) - 2) if se > 0 else (0.0 if slope else 1.0)
        change = slope * (t[-1] - t[0])
        signed = change if check.direction == "increase" else -change
        hit = p_value < check.alpha and signed > 0 and signed >= check.min_change
        step = int(steps[end - 1])
        if hit:
            fired.append(step)
        evidence = Evidence(step, float(values[end - 1]), None, None,
                            f"a significant {check.direction} over {k} steps (alpha {check.alpha:g}, "
                            f"{change_bound(check.min_change, check.direction)})",
                            f"slope {slope:.3g}/step, change {change:.3g} over steps {int(t[0])}-{step}, p = {p_value:.2g}",
                            fires_on="on")
        score = signed if hit else signed - 1e9
        if best is None or score > best[0]:
            best = (score, evidence)
    evidence = best[1] if best else Evidence(None, None, detail=f"no window of {k} steps with {needed} values")
    return Outcome(measure, tuple(fired), evidence, frame.height, _values(frame), judged=best is not None)


def jump(check: Check, measure: str, series: pl.DataFrame, proportion: bool) -> Outcome:
    per_step = pooled(series, proportion, measure_support)["value"].to_list()
    frame = windowed(series, check.window, proportion)
    fired: list[int] = []
    best: tuple[float, Evidence] | None = None
    rows = frame.to_dicts()
    full_baselines = 0
    for index, row in enumerate(rows):
        previous = [v for v in per_step[max(0, index - check.baseline):index] if v is not None]
        if len(previous) < check.baseline or row["value"] is None:
            continue
        full_baselines += 1
        base = sum(previous) / len(previous)
        # A ratio to the baseline says how far a value moved only for a measure above zero: with a
        # negative baseline (a loss) a fall reads as a rise, and across zero as a drop.
        if base <= 0 or row["value"] < 0:
            continue
        ratio = row["value"] / base
        up, down = ratio >= check.factor, ratio <= 1 / check.factor
        hit = up if check.direction == "increase" else down if check.direction == "decrease" else up or down
        if hit:
            fired.append(int(row["step"]))
        # The evidence is the step that moved most the way the check looks (a step that fired first).
        rise, fall = ratio, (1 / ratio if ratio > 0 else math.inf)
        strength = rise if check.direction == "increase" else fall if check.direction == "decrease" else max(rise, fall)
        score = strength if hit else strength - 1e9
        evidence = Evidence(int(row["step"]), row["value"], row["low"], row["high"],
                            f"{_jump_bound(check)} of the previous {check.baseline} steps' mean",
                            f"ratio {ratio:.3g} to {base:.4g}", fires_on="at")
        if best is None or score > best[0]:
            best = (score, evidence)
    if best is None:
        detail = (f"fewer than {check.baseline + 1} steps" if not full_baselines
                  else "no step with a baseline above 0 and a value of 0 or more (a jump is a ratio to the baseline)")
        evidence = Evidence(None, None, detail=detail)
    else:
        evidence = best[1]
    return Outcome(measure, tuple(fired), evidence, frame.height, _values(frame), judged=best is not None)


def _jump_bound(check: Check) -> str:
    """Where a jump check fires, the way it looks: ``x2``, ``x1/2``, or ``x2 or x1/2``."""
    up, down = f"x{check.factor:g}", f"x1/{check.factor:g}"
    return up if check.direction == "increase" else down if check.direction == "decrease" else f"{up} or {down}"


__all__ = ["Evidence", "Outcome", "evaluate", "windowed"]

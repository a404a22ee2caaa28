"""The report's first screen: every run in one table, with what matters about it.

Per run: what kind of log it is, the shipped checks that fire on it, its heaviest findings
(:func:`trajlens.report.findings.ranked`) and small trends over its steps (reward, model tokens
per trajectory, and the behaviour class whose share moved most), each run linked to its
section. :func:`overview_html` is the top of ``index.html``; :func:`overview_markdown` the top
of ``README.md`` (plain text a terminal shows as it is).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import polars as pl

from trajlens.intervals import added, pooled
from trajlens.markdown import markdown_anchor, markdown_table
from trajlens.report import html

FINDINGS_SHOWN = 1
"""Findings per run on the first screen (:func:`main_finding`); the rest are in the run's section."""
TREND_WIDTH, TREND_HEIGHT = 96, 30
MIN_TREND_STEPS = 2
"""Steps a run needs for a trend line."""


class Trend(NamedTuple):
    """One small trend of a run: its value at each step, and its value over the first and over
    the last quarter of the steps (:func:`trajlens.run.quarters.quarters`, the stage table's Q1
    and Q4) pooled as the findings and the checks pool a stage: a share over all calls of the
    quarter's trajectories, a mean over its trajectories."""

    points: list[tuple[int, float]]
    first: float
    last: float


def run_trends(store: Any, run_id: str, measures: pl.DataFrame, split: str) -> tuple[dict[str, Trend], dict[str, Trend]]:
    """The run's mean reward, its mean model tokens per trajectory and the share of the behaviour
    class that moved most between the first and the last quarter of its steps; then every class's
    share, by class (:func:`lead_class_trend` draws the class the run's story is about). Reward, tokens
    and shares are the checks' ``reward``, ``mean:model_tokens`` and ``share:<class>`` (calls of the class / all calls,
    pooled over the step's trajectories, as the stage tables and the saved ``think_share_by_step``
    measure them). A run whose trajectories count no tokens shows its logged response length
    (which counts observation tokens too) under that name."""
    from trajlens.checks.step_measures import outcome_stats, trajectory_measure_stats
    from trajlens.classify.rules import BEHAVIOUR_CLASSES
    from trajlens.run.partitions import scan_run_table
    from trajlens.run.quarters import quarters

    if measures.is_empty() or measures["step"].n_unique() < MIN_TREND_STEPS:
        return {}, {}
    trends: dict[str, Trend] = {}
    # The checks' `reward` (NaN left out), summed in memory in row order: the streaming engine's
    # partial sums may round the last bit either way from one report to the next.
    rewards = (scan_run_table(store, run_id, "trajectories").filter(pl.col("split") == split)
               .select("step", "reward", "resolved").collect())
    reward_stats = outcome_stats(rewards).filter(pl.col("measure") == "reward").sort("step")
    # Every trend's quarters are those of the run's steps, as the stage table beside them cuts them,
    # whichever steps lack a value.
    run_quarters = quarters(measures["step"].to_numpy())
    if reward_stats.height >= MIN_TREND_STEPS:
        reward = pooled(reward_stats, proportion=False).select("step", pl.col("value").alias("reward"))
        trends["reward"] = _measure_trend(reward, reward_stats, "reward", run_quarters)
    names = [TOKENS_MEASURE, *(f"share:{c}" for c in BEHAVIOUR_CLASSES)]
    stats = trajectory_measure_stats(measures).filter(pl.col("measure").is_in(names))
    per_step = step_values(measures, names, stats)
    if TOKENS_MEASURE in per_step.columns and per_step[TOKENS_MEASURE].drop_nulls().len() >= MIN_TREND_STEPS:
        trends["model tokens"] = _measure_trend(per_step, stats, TOKENS_MEASURE, run_quarters)
    else:
        logged = _logged_length(store, run_id)
        if logged.height >= MIN_TREND_STEPS:
            steps, values = logged["step"].to_numpy(), logged["value"].to_numpy()
            trends[LOGGED_LENGTH] = Trend(list(logged.iter_rows()), *run_quarters.means(steps, values))
    shares = {klass: _measure_trend(per_step, stats, f"share:{klass}", run_quarters)
              for klass in BEHAVIOUR_CLASSES if f"share:{klass}" in per_step.columns}
    moved = {klass: abs(trend.last - trend.first) for klass, trend in shares.items()
             if not (math.isnan(trend.first) or math.isnan(trend.last)) and (trend.first > 0 or trend.last > 0)}
    if moved:
        klass = max(moved, key=lambda c: (moved[c], c))
        trends[f"{klass}{SHARE_TREND}"] = shares[klass]
    return trends, shares


def lead_class_trend(trends: dict[str, Trend], shares: dict[str, Trend], findings: list[Any]) -> dict[str, Trend]:
    """``trends`` drawing the share of the class the run's leading finding is about (its subject
    ``share:<class>``), in place of the class that moved most, so the line beside the story is
    the story's; as they are when the lead is about no class's share."""
    subject = getattr(next(iter(as_trained(findings)), None), "subject", None) or ""
    klass = subject.removeprefix("share:")
    if not subject.startswith("share:") or klass not in shares or moved_class(trends) == klass:
        return trends
    return {**{name: trend for name, trend in trends.items() if not name.endswith(SHARE_TREND)},
            f"{klass}{SHARE_TREND}": shares[klass]}


SHARE_TREND = " share"
"""The end of the name of the trend of a class's share (the class the run's story is about, else
the one that moved most)."""


def moved_class(trends: dict[str, Trend]) -> str | None:
    """The behaviour class whose share the trends draw (:func:`run_trends`, :func:`lead_class_trend`),
    None when they draw none."""
    return next((name.removesuffix(SHARE_TREND) for name in trends if name.endswith(SHARE_TREND)), None)


def moved_share(trends: dict[str, Trend]) -> tuple[str, bool] | None:
    """:func:`moved_class` and whether its share grew (else it shrank), None when no class moved."""
    klass = moved_class(trends)
    if klass is None:
        return None
    trend = trends[klass + SHARE_TREND]
    return klass, not trend.last < trend.first


def _measure_trend(per_step: pl.DataFrame, stats: pl.DataFrame, measure: str, split: Any) -> Trend:
    """The trend of one of the checks' measures: each step's value, and each quarter's, pooled
    over the quarter's steps (:func:`trajlens.intervals.pooled` of their summed statistics)."""
    rows = stats.filter(pl.col("measure") == measure)
    quarter_values = []
    for steps in (split.first, split.last):
        summed = added(rows.filter(pl.col("step").is_in(steps.tolist())), by=())
        value = pooled(summed, proportion=False)["value"][0] if summed["units"][0] else None
        quarter_values.append(float("nan") if value is None else float(value))
    points = per_step.select("step", measure).drop_nulls()
    return Trend(list(points.iter_rows()), *quarter_values)


TOKENS_MEASURE = "mean:model_tokens"
"""The checks' measure the length trend draws: mean model tokens per trajectory of each step."""
LOGGED_LENGTH = "response length"
"""The trend of a run whose trajectories count no tokens: the response length its trainer logged."""
LENGTH_TRENDS: tuple[str, ...] = ("model tokens", LOGGED_LENGTH)
"""The length trend, under the name of what it counts."""


def step_values(measures: pl.DataFrame, names: Sequence[str], stats: pl.DataFrame | None = None) -> pl.DataFrame:
    """``step`` and one column per measure of ``names``: each step's value of the checks' measure
    (:func:`trajlens.checks.step_measures.trajectory_measure_stats`, pooled by
    :func:`trajlens.intervals.pooled`), null where it has no denominator; a measure
    without any row has no column. ``stats``: those statistics, when computed already."""
    from trajlens.checks.step_measures import trajectory_measure_stats

    if stats is None:
        stats = trajectory_measure_stats(measures)
    stats = stats.filter(pl.col("measure").is_in(list(names)))
    steps = measures.select("step").unique().sort("step")
    if stats.is_empty():
        return steps
    # only the value is read: the interval (a proportion's or a mean's) is not drawn
    values = pooled(stats, proportion=False).pivot(on="measure", index="step", values="value")
    return steps.join(values, on="step", how="left").select("step", *(n for n in names if n in values.columns))


LENGTH_METRICS: tuple[str, ...] = ("response_length/mean", "completions/mean_length", "completion_length")
"""Logged mean response lengths (verl, TRL and older TRL), read when no trajectory counts its tokens."""


def _logged_length(store: Any, run_id: str) -> pl.DataFrame:
    metrics = store.table("step_metrics").filter(
        (pl.col("run_id") == run_id) & pl.col("name").is_in(list(LENGTH_METRICS)) & pl.col("value").is_not_null()
    ).select("step", "name", "value").collect()
    for name in LENGTH_METRICS:
        found = metrics.filter(pl.col("name") == name)
        if found.height:
            return found.select("step", "value").sort("step")
    return metrics.select("step", "value").clear()


def sparkline(name: str, trend: Trend) -> str:
    """A small inline SVG line of the trend's points (step, value), labelled, with its value over
    the first and over the last quarter of the steps on hover (:func:`trend_hover`); it carries
    no ids, so many fit on one page."""
    points = trend.points
    steps = [float(s) for s, _ in points]
    values = [float(v) for _, v in points]
    low, high = min(values), max(values)
    first, last = steps[0], steps[-1]
    span_x, span_y = (last - first) or 1.0, (high - low) or 1.0
    top = 11.0
    coords = " ".join(
        f"{(s - first) / span_x * (TREND_WIDTH - 2) + 1:.1f},"
        f"{TREND_HEIGHT - 2 - (v - low) / span_y * (TREND_HEIGHT - top - 3):.1f}"
        for s, v in zip(steps, values))
    title = trend_hover(name, trend)
    return (f'<svg class="trend" width="{TREND_WIDTH}" height="{TREND_HEIGHT}" viewBox="0 0 {TREND_WIDTH} '
            f'{TREND_HEIGHT}" role="img" aria-label="{html.escape(title)}"><title>{html.escape(title)}</title>'
            f'<text x="1" y="9" font-size="9" fill="#455a64">{html.escape(name)}</text>'
            f'<polyline points="{coords}" fill="none" stroke="#1565c0" stroke-width="1.3"/></svg>')


def trend_hover(name: str, trend: Trend) -> str:
    """A trend's hover text: its value over the first and over the last quarter of its steps,
    the comparison (and the numbers) of the report's findings."""
    return f"{name}: {_short(trend.first)} in the first quarter -> {_short(trend.last)} in the last"


def _short(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


CHECKS_SHOWN = 3
"""Firing checks named per run on the first screen (failures first); the rest are counted."""


def check_label(name: str, status: str, steps: str) -> str:
    """A firing check as the overview names it: its name, status and the steps it fires at
    (none for a run of one step)."""
    return f"{name} ({status}, steps {steps})" if steps else f"{name} ({status})"


def _checks_cell(run_id: str, failing: list[tuple[str, str, str]]) -> str:
    if not failing:
        return '<span class="note">none fire</span>'
    chips = "".join(f'<span class="chip {status}" title="{html.escape(check_label(name, status, steps))}">'
                    f'{html.escape(name)}</span>' for name, status, steps in failing[:CHECKS_SHOWN])
    more = len(failing) - CHECKS_SHOWN
    return chips + (f'<a href="#{html.escape(html.run_anchor(run_id, "checks"))}">{more} more</a>' if more > 0 else "")


MAIN_FINDING_LEAST = 40.0
"""Least weight (:func:`trajlens.report.findings.weight`, a firing check's included) of a finding
the overview leads with as the run's story; a lighter one (a grad norm at its clip, a rel_gain
that moved a little) is context, shown after "nothing notable"."""


def main_finding(report: Any) -> str:
    """The finding the overview leads with: the heaviest about the run as trained, when it weighs
    :data:`MAIN_FINDING_LEAST` or more; when every finding is about a recomputation under another
    estimator, the heaviest of those, said to be one (a control run's story is what its own
    estimator kept from happening); without a finding, "nothing notable", or "no finding beyond
    the checks that fire" when one fires."""
    from trajlens.report.findings import Finding, weight

    fired = {name: status for name, status, _ in getattr(report, "failing", ())}
    trained = as_trained(report.findings)
    if trained and (not isinstance(trained[0], Finding) or weight(trained[0], fired) >= MAIN_FINDING_LEAST):
        return _headline(trained[0])
    quiet = quiet_finding(report)
    if trained:
        return f"{quiet}; {_headline(trained[0])}"
    if report.findings:
        return f"nothing notable in the run as trained; {_headline(report.findings[0])}"
    return quiet


def as_trained(findings: list[Any]) -> list[Any]:
    """The findings about the run as it trained (not about a recomputation under another
    estimator), in their order: the first is the one a run's first screen leads with."""
    from trajlens.report.findings import RECOMPUTED

    return [f for f in findings if getattr(f, "about", None) != RECOMPUTED]


def quiet_finding(report: Any) -> str:
    """What a run without a finding is: beside a check that fires (a level held from the first
    step, which no trend explains), not one where nothing happened; the check says what."""
    return "no finding beyond the checks that fire" if getattr(report, "failing", ()) else "nothing notable"


def _headline(finding: Any) -> str:
    return str(getattr(finding, "headline", finding))


OVERVIEW_LEGEND = ("Brackets: a 95% interval. Stages cut a run's steps (by default Q1-Q4, its quarters); "
                   "'a in Q1 -> b in Q4' is over every trajectory of the first and the last stage, an 'N= sample' "
                   "over the trajectories the stage report drew from the last. rel_gain: a reward channel's mean "
                   "over groups of max - min, the signal its group advantage has.")
"""The line under the overview table that says how to read the numbers of its findings."""


def overview_html(reports: Sequence[Any]) -> str:
    """The overview table, first on ``index.html``."""
    rows = []
    for report in reports:
        run = html.escape(report.run_id)
        findings = html.escape(main_finding(report))
        more = len(report.findings) - FINDINGS_SHOWN
        if more > 0:
            findings += f' <a class="more" href="#{html.escape(html.run_anchor(report.run_id, "findings"))}">+{more} more</a>'
        trends = "".join(sparkline(name, trend) for name, trend in report.trends.items())
        rows.append(f'<tr><td class="text"><a href="#{html.escape(html.run_anchor(report.run_id))}">{run}</a></td>'
                    f'<td class="text">{html.escape(report.kind)}</td>'
                    f'<td class="text checks">{_checks_cell(report.run_id, report.failing)}</td>'
                    f'<td class="text finding">{findings}</td>'
                    f'<td class="text trends">{trends}</td></tr>')
    return (f'<section id="{html.OVERVIEW_ID}"><table class="overview"><thead><tr><th class="text">run</th>'
            '<th class="text">kind</th><th class="text">checks that fire</th><th class="text">main finding</th>'
            '<th class="text">over steps</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>"
            f'<p class="note">{html.escape(OVERVIEW_LEGEND)}</p></section>')


def overview_markdown(reports: Sequence[Any]) -> list[str]:
    """The overview as Markdown lines: a table of every run and its main finding."""
    rows = []
    for report in reports:
        named = [check_label(*check) for check in report.failing[:CHECKS_SHOWN]]
        more = len(report.failing) - CHECKS_SHOWN
        checks = ", ".join(named + ([f"{more} more"] if more > 0 else [])) or "none"
        rows.append([f"[{report.run_id}](#{markdown_anchor(report.run_id)})", report.kind, checks, main_finding(report)])
    return [*markdown_table(["run", "kind", "checks that fire", "main finding"], rows), "", OVERVIEW_LEGEND]


def overview_text(reports: Sequence[Any]) -> str:
    """The overview as plain text for a terminal: per run its kind, the checks that fire and its
    main finding, each on its own line."""
    width = max((len(r.run_id) for r in reports), default=0)
    lines = []
    for report in reports:
        checks = ", ".join(check_label(*check) for check in report.failing[:CHECKS_SHOWN])
        more = len(report.failing) - CHECKS_SHOWN
        checks = (checks + (f", {more} more" if more > 0 else "")) or "none fire"
        lines += [f"{report.run_id:<{width}}  {report.kind}",
                  f"{'':<{width}}  checks: {checks}",
                  f"{'':<{width}}  main:   {main_finding(report)}"]
    return "\n".join(lines)

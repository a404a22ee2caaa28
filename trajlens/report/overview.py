"""The report's first screen: every run in one table, with what matters about it.

Per run: what kind of log it is, the shipped checks that fire on it, its heaviest findings
(:func:`trajlens.report.findings.ranked`) and small trends over its steps (reward, model tokens
per trajectory, and the behaviour class whose share moved most), each run linked to its
section. :func:`overview_html` is the top of ``index.html``; :func:`overview_markdown` the top
of ``README.md`` (plain text a terminal shows as it is).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import polars as pl

from trajlens.report import html

FINDINGS_SHOWN = 1
"""Findings per run on the first screen (:func:`main_finding`); the rest are in the run's section."""
TREND_WIDTH, TREND_HEIGHT = 96, 30
MIN_TREND_STEPS = 2
"""Steps a run needs for a trend line."""


def run_trends(store: Any, run_id: str, measures: pl.DataFrame, split: str) -> dict[str, list[tuple[int, float]]]:
    """Per step: the run's mean reward, its mean model tokens per trajectory and the share of the
    behaviour class that moved most between the first and the last quarter of its steps
    (:func:`trajlens.run.quarters.quarters`). Tokens and shares are the checks' ``mean:model_tokens``
    and ``share:<class>`` (calls of the class / all calls, pooled over the step's trajectories, as
    the stage tables and the saved ``think_share_by_step`` measure them)."""
    from trajlens.classify.rules import BEHAVIOUR_CLASSES
    from trajlens.run.partitions import scan_run_table
    from trajlens.run.quarters import quarters

    if measures.is_empty() or measures["step"].n_unique() < MIN_TREND_STEPS:
        return {}
    trends: dict[str, list[tuple[int, float]]] = {}
    # Grouped in memory, where each step's rewards are summed in row order: the streaming
    # engine's partial sums may round the last bit either way from one report to the next.
    reward = (scan_run_table(store, run_id, "trajectories").filter(pl.col("split") == split)
              .select("step", "reward").collect()
              .group_by("step").agg(pl.col("reward").drop_nans().mean()).drop_nulls().sort("step"))
    if reward.height >= MIN_TREND_STEPS:
        trends["reward"] = list(reward.iter_rows())
    per_step = step_values(measures, [TOKENS_MEASURE, *(f"share:{c}" for c in BEHAVIOUR_CLASSES)])
    tokens = per_step.select("step", TOKENS_MEASURE).drop_nulls() if TOKENS_MEASURE in per_step.columns else None
    if tokens is not None and tokens.height >= MIN_TREND_STEPS:
        trends["model tokens"] = list(tokens.iter_rows())
    else:
        logged = _logged_length(store, run_id)
        if logged.height >= MIN_TREND_STEPS:
            trends["model tokens"] = list(logged.iter_rows())
    run_quarters = quarters(per_step["step"].to_numpy())
    moved = {}
    for klass in BEHAVIOUR_CLASSES:
        column = f"share:{klass}"
        if column not in per_step.columns:
            continue
        early, late = run_quarters.means(per_step["step"].to_numpy(), per_step[column].to_numpy())
        if not (math.isnan(early) or math.isnan(late)) and (early > 0 or late > 0):
            moved[klass] = abs(late - early)
    if moved:
        klass = max(moved, key=lambda c: (moved[c], c))
        shares = per_step.select("step", f"share:{klass}").drop_nulls()
        trends[f"{klass} share"] = list(shares.iter_rows())
    return trends


TOKENS_MEASURE = "mean:model_tokens"
"""The checks' measure the length trend draws: mean model tokens per trajectory of each step."""


def step_values(measures: pl.DataFrame, names: Sequence[str]) -> pl.DataFrame:
    """``step`` and one column per measure of ``names``: each step's value of the checks' measure
    (:func:`trajlens.checks.step_measures.trajectory_measure_stats`, pooled by
    :func:`trajlens.checks.conditions.pooled`), null where it has no denominator; a measure
    without any row has no column."""
    from trajlens.checks.conditions import pooled
    from trajlens.checks.step_measures import trajectory_measure_stats

    stats = trajectory_measure_stats(measures).filter(pl.col("measure").is_in(list(names)))
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


def sparkline(name: str, points: Sequence[tuple[int, float]]) -> str:
    """A small inline SVG line of ``points`` (step, value), labelled, with its mean over the first
    and over the last quarter of the steps on hover (:func:`trend_hover`); it carries no ids,
    so many fit on one page."""
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
    title = trend_hover(name, points)
    return (f'<svg class="trend" width="{TREND_WIDTH}" height="{TREND_HEIGHT}" viewBox="0 0 {TREND_WIDTH} '
            f'{TREND_HEIGHT}" role="img" aria-label="{html.escape(title)}"><title>{html.escape(title)}</title>'
            f'<text x="1" y="9" font-size="9" fill="#455a64">{html.escape(name)}</text>'
            f'<polyline points="{coords}" fill="none" stroke="#1565c0" stroke-width="1.3"/></svg>')


def trend_hover(name: str, points: Sequence[tuple[int, float]]) -> str:
    """A trend's hover text: its mean over the first and over the last quarter of its steps
    (:func:`trajlens.run.quarters.quarters`), the comparison the report's findings make."""
    from trajlens.run.quarters import quarters

    steps = [step for step, _ in points]
    first, last = quarters(steps).means(steps, [value for _, value in points])
    return f"{name}: {_short(first)} in the first quarter -> {_short(last)} in the last"


def _short(value: float) -> str:
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
    return chips + (f'<a href="#{html.escape(run_id)}-checks">{more} more</a>' if more > 0 else "")


def main_finding(report: Any) -> str:
    """The finding the overview leads with: the heaviest about the run as trained; when every
    finding is about a recomputation under another estimator, a sentence saying so."""
    from trajlens.report.findings import RECOMPUTED

    as_trained = [f for f in report.findings if getattr(f, "about", None) != RECOMPUTED]
    if as_trained:
        return str(as_trained[0])
    if report.findings:
        return (f"nothing notable in the run as trained; {len(report.findings)} finding(s) about recomputations "
                "under other estimators")
    return "nothing notable"


def overview_html(reports: Sequence[Any]) -> str:
    """The overview table, first on ``index.html``."""
    rows = []
    for report in reports:
        run = html.escape(report.run_id)
        findings = html.escape(main_finding(report))
        more = len(report.findings) - FINDINGS_SHOWN
        if more > 0:
            findings += f' <a class="more" href="#{run}-findings">+{more} more</a>'
        trends = "".join(sparkline(name, points) for name, points in report.trends.items())
        rows.append(f'<tr><td class="text"><a href="#{run}">{run}</a></td>'
                    f'<td class="text">{html.escape(report.kind)}</td>'
                    f'<td class="text checks">{_checks_cell(report.run_id, report.failing)}</td>'
                    f'<td class="text finding">{findings}</td>'
                    f'<td class="text trends">{trends}</td></tr>')
    return ('<section id="overview"><table class="overview"><thead><tr><th class="text">run</th>'
            '<th class="text">kind</th><th class="text">checks that fire</th><th class="text">main finding</th>'
            '<th class="text">over steps</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table></section>")


def overview_markdown(reports: Sequence[Any]) -> list[str]:
    """The overview as Markdown lines: a table of every run and its main finding."""
    lines = ["| run | kind | checks that fire | main finding |", "|---|---|---|---|"]
    for report in reports:
        named = [check_label(*check) for check in report.failing[:CHECKS_SHOWN]]
        more = len(report.failing) - CHECKS_SHOWN
        checks = ", ".join(named + ([f"{more} more"] if more > 0 else [])) or "none"
        finding = main_finding(report)
        lines.append(f"| [{report.run_id}](#{report.run_id}) | {report.kind} | {checks} | {finding} |")
    return lines


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

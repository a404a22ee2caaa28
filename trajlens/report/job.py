"""The main job: classify every run of a store, report each stage, recompute advantages.

:func:`classify_store` writes the analysis tables ``call_classes`` and ``trajectory_measures``
into the store (views beside the run tables). :func:`report_store` does that, then writes per
run a stage-sampled Markdown report with plots and the per-step advantage diagnostics of
every estimator the run's data allows, plus an index ``README.md`` of findings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NamedTuple

import polars as pl

from trajlens.estimators.spec import EstimatorChoice
from trajlens.report import plots
from trajlens.report.scalars import channel_findings, run_config_text, scalar_findings
from trajlens.store.handle import in_transaction

CALL_CLASS_COLUMNS: tuple[str, ...] = (
    "run_id", "step", "trajectory_id", "call_index", "tool_name", "primary_class", "action_classes", "paths",
    "is_edit", "is_verification",
)
# Metrics plotted per stage: the r6 collapse signal and the r7 verification shift.
STAGE_PLOT_METRICS: tuple[str, ...] = (
    "share:think", "ran_suite", "verification:test_suite", "verification:test_targeted", "verification:quick_check",
    "verification:run_script",
)


def _report_choices() -> tuple[EstimatorChoice, ...]:
    from trajlens.estimators.registry import REPORT_VARIANTS

    return tuple(variant for _, variant in REPORT_VARIANTS)


ESTIMATOR_CHOICES: tuple[EstimatorChoice, ...] = _report_choices()
"""Every recomputation the report can make, read from the estimator registry's report variants."""


@dataclass
class RunReport:
    """What the report wrote and found for one run."""

    run_id: str
    markdown: Path
    figures: list[Path] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    html: str = ""
    """The run's section of ``index.html``."""
    viewers: list[Path] = field(default_factory=list)


@in_transaction
def classify_store(store: Any, run_ids: list[str] | None = None) -> dict[str, pl.DataFrame]:
    """Classify the tool calls of each run and save ``call_classes`` and ``trajectory_measures``."""
    from trajlens.classify import classify_calls, trajectory_measures
    from trajlens.classify.stages import CLASSIFY_INPUT
    from trajlens.report._partitions import scan_run_table

    measures_by_run = {}
    for run_id in run_ids or store.run_ids():
        calls = classify_calls(scan_run_table(store, run_id, "tool_calls").select(CLASSIFY_INPUT))
        trajectories = scan_run_table(store, run_id, "trajectories").collect()
        measures = trajectory_measures(calls, trajectories)
        store.write_derived("call_classes", run_id, calls.select(CALL_CLASS_COLUMNS))
        store.write_derived("trajectory_measures", run_id, measures)
        measures_by_run[run_id] = measures
    return measures_by_run


class ReportAdvantages(NamedTuple):
    """The estimators the report recomputes on a run, their diagnostics, and what the run's
    token arrays say (:func:`report_advantages`)."""

    choices: list[EstimatorChoice]
    diagnostics: pl.DataFrame
    empty_tokens: str | None
    """A sentence when the run has token arrays but none holds a model token."""


FACT_TOKEN_COLUMNS: tuple[str, ...] = ("trajectory_id", "response_mask", "values", "log_probs")
"""Token columns read to decide which estimators a run allows, when nothing else is computed."""


def report_advantages(store: Any, run_id: str, *, compute: bool = True,
                      steps: Sequence[int] | None = None) -> ReportAdvantages:
    """Which report estimators the run's data (and logged config) allows, and, with ``compute``,
    their per-step diagnostics, in one read of the run a batch of steps at a time.

    The estimators the trajectories alone allow are recomputed while the token arrays are read
    (:func:`trajlens.report.stepwise.advantage_pass`); the token arrays' facts, gathered on the
    way, then decide which of them the report keeps, as
    :meth:`~trajlens.estimators.registry.EstimatorSpec.in_report` decides from the whole run. An
    input error of a kept estimator is raised; one of an estimator the facts rule out is not.
    ``steps`` restricts all of it to those steps.
    """
    from dataclasses import replace

    from trajlens.errors import ConfigError
    from trajlens.estimators.registry import estimator_spec, run_facts
    from trajlens.report._partitions import train_trajectories
    from trajlens.report.stepwise import advantage_pass

    try:
        trajectories = train_trajectories(store, run_id, steps)
    except ConfigError:
        return ReportAdvantages([], pl.DataFrame(), _empty_token_arrays(store, run_id))
    config_value = run_config_text(store, run_id)
    # what the token arrays will show is not known before they are read: assume the most
    optimistic = replace(run_facts(trajectories, None, config_value), token_arrays=True, critic_values=True,
                         token_counts=True, log_probs=True, sum_pi_squared=True)
    candidates = [c for c in ESTIMATOR_CHOICES if estimator_spec(c.estimator).in_report(optimistic)]
    result = advantage_pass(store, run_id, candidates if compute else [], trajectories=trajectories,
                            token_columns=FACT_TOKEN_COLUMNS)
    facts = run_facts(trajectories, result.token_rows if result.token_rows.height else None, config_value)
    choices = [c for c in candidates if estimator_spec(c.estimator).in_report(facts)]
    empty = _no_model_tokens(result.token_arrays, result.with_model_tokens, result.empty_arrays)
    if empty:
        choices = [c for c in choices if c.needs not in ("values", "channels_with_lengths")]
    if not compute:
        return ReportAdvantages(choices, pl.DataFrame(), empty)
    for choice in choices:
        if choice.label in result.errors:
            raise result.errors[choice.label]
    labels = [c.label for c in choices]
    diagnostics = result.diagnostics
    if diagnostics.height:
        diagnostics = diagnostics.filter(pl.col("estimator").is_in(labels))
    return ReportAdvantages(choices, diagnostics, empty)


def available_estimators(store: Any, run_id: str, frames: Any = None) -> list[EstimatorChoice]:
    """The report's estimator choices that a run's data (and logged config) allows.

    Each registry entry decides with :meth:`~trajlens.estimators.registry.EstimatorSpec.in_report`:
    its inputs present, and, for estimators reported only when declared, the run's config naming it.
    Without ``frames`` (a :class:`~trajlens.report.advantages.RunFrames`), the facts are read a
    batch of steps at a time (:func:`report_advantages`).
    """
    from trajlens.estimators.registry import estimator_spec, run_facts

    if frames is None:
        return report_advantages(store, run_id, compute=False).choices
    facts = run_facts(frames.trajectories, frames.tokens, run_config_text(store, run_id))
    return [choice for choice in ESTIMATOR_CHOICES if estimator_spec(choice.estimator).in_report(facts)]


def advantage_diagnostics(store: Any, run_id: str, choices: list[EstimatorChoice], frames: Any = None) -> pl.DataFrame:
    """Per-step batch diagnostics of each estimator choice, stacked with an ``estimator`` column
    (a batch of steps at a time, :func:`trajlens.report.stepwise.diagnostics_by_step`, unless
    the run's ``frames`` are given)."""
    from trajlens.report.advantages import labelled_diagnostics
    from trajlens.report.stepwise import diagnostics_by_step

    if not choices:
        return pl.DataFrame()
    if frames is None:
        return diagnostics_by_step(store, run_id, choices)
    return pl.concat([
        labelled_diagnostics(store, run_id, choice.estimator, choice.label, frames=frames, **choice.options)
        for choice in choices
    ])


@in_transaction
def report_store(
    store: Any,
    out: Path | str,
    *,
    n: int = 80,
    seed: int = 0,
    stages: Any = "quartiles",
    run_ids: list[str] | None = None,
    comparisons: list[tuple[str, str]] | None = None,
    viewers_per_run: int = 3,
    progress: Callable[[str], None] | None = None,
) -> list[RunReport]:
    """Write reports for every run (or ``run_ids``) under ``out``; returns what was written.

    Per run: ``RUN/stage_report.md`` with PNG figures, and viewer pages of a few trajectories
    (``RUN/view/*.html``). Over all runs: ``README.md`` (findings) and ``index.html`` (one
    self-contained page: every run, the ``comparisons`` given as (A, B) sides, and the runs
    side by side when there are several).
    """
    from trajlens.report.html_report import write_index

    out = Path(out)
    tick = progress or (lambda _: None)
    reports = []
    all_measures = classify_store(store, run_ids)
    for run_id, measures in all_measures.items():
        report = _report_run(store, run_id, measures, out / run_id, n=n, seed=seed, stages=stages,
                             viewers_per_run=viewers_per_run)
        reports.append(report)
        tick(run_id)
    _write_index(out, reports)
    write_index(store, out, reports, comparisons or [], stages=stages)
    return reports


def _report_run(store: Any, run_id: str, measures: pl.DataFrame, directory: Path, *, n: int, seed: int,
                stages: Any, viewers_per_run: int) -> RunReport:
    from trajlens.classify import stage_report
    from trajlens.estimators import sign_streaks
    from trajlens.report._partitions import scan_run_table
    from trajlens.report.advantages import save_advantage_batches
    from trajlens.report.html_report import RunParts, run_section
    from trajlens.report.summary import run_summary

    directory.mkdir(parents=True, exist_ok=True)
    report = RunReport(run_id, directory / "stage_report.md")
    report.findings += scalar_findings(store, run_id)
    parts = RunParts(run_id)
    if measures.height == 0:
        report.findings.append("no trajectories: training scalars only")
        report.markdown.write_text(f"# {run_id}\n\nNo trajectories: training scalars only.\n\n"
                                   + "\n".join(f"- {f}" for f in report.findings) + "\n")
        report.html = run_section(store, report, parts)
        return report
    report.findings += channel_findings(store, run_id)
    single_step = measures["step"].n_unique() == 1
    parts.summary = run_summary(store, run_id, measures)
    charts = parts.charts
    if not single_step:
        charts["class_shares_by_step"] = plots.class_shares_by_step(
            measures, f"{run_id}: behaviour classes per step", _alarms(store, run_id))
    charts["class_shares_per_trajectory"] = plots.class_shares_per_trajectory(
        measures, f"{run_id}: class shares per trajectory")
    charts["distributions"] = plots.distributions(measures, f"{run_id}: turns and length")
    run_tables = (scan_run_table(store, run_id, "trajectories"), scan_run_table(store, run_id, "tool_calls"))
    stage = stage_report(run_tables, run_id=run_id, n=n, seed=seed, stages=stages, measures=measures)
    parts.stage = stage
    store.write_derived("stage_rates", run_id, stage.rates)
    store.write_derived("stage_changes", run_id, stage.changes)
    charts["stage_rates"] = plots.stage_rates(stage.rates, list(STAGE_PLOT_METRICS),
                                              f"{run_id}: N={n} per stage (bars: sample, x: whole stage)")
    report.findings += _behaviour_findings(stage.rates)
    if single_step:
        report.findings.append("a single step: no training stages to compare (agent logs without steps)")
    sections = [stage.to_markdown(), _summary_markdown(parts.summary)]
    advantages = report_advantages(store, run_id)
    choices = advantages.choices
    if advantages.empty_tokens:
        report.findings.append(advantages.empty_tokens)
    if choices:
        diagnostics = advantages.diagnostics
        parts.diagnostics = diagnostics
        save_advantage_batches(store, run_id, diagnostics, keep_other_labels=False)
        charts["advantage_batches"] = plots.advantage_batches(diagnostics, f"{run_id}: recomputed advantages per batch")
        sections.append(_advantage_markdown(diagnostics, choices))
        report.findings += _advantage_findings(diagnostics, sign_streaks)
    for name, chart in charts.items():
        report.figures.append(chart.png(directory / f"{name}.png"))
    sections.append("## Figures\n\n" + "\n".join(f"![{f.stem}]({f.name})" for f in report.figures))
    report.markdown.write_text("\n\n".join(sections) + "\n")
    report.viewers, parts.exemplars = _viewer_pages(store, run_id, measures, stage, directory / "view",
                                                    viewers_per_run, choices)
    report.html = run_section(store, report, parts)
    return report


def _alarms(store: Any, run_id: str) -> list[plots.Alarm]:
    """The shipped checks that fire on the run (see :mod:`trajlens.checks`), at their first step."""
    from trajlens.checks.report import shipped_checks
    from trajlens.errors import TrajlensError

    try:
        results = shipped_checks(store, run_id).results
    except TrajlensError:
        return []
    return [plots.Alarm(r.name, r.check.severity, min(r.fired_steps)) for r in results
            if r.status in ("fail", "warn") and r.fired_steps]


def _empty_token_arrays(store: Any, run_id: str) -> str | None:
    """:func:`_no_model_tokens` of all the run's token arrays (for a run without training steps)."""
    facts = store.sql(
        "SELECT count(*) AS arrays, count(*) FILTER (WHERE list_bool_or(response_mask)) AS with_model_tokens, "
        "count(*) FILTER (WHERE len(response_mask) = 0) AS empty FROM tokens WHERE run_id = $run",
        {"run": run_id}).row(0, named=True)
    return _no_model_tokens(facts["arrays"], facts["with_model_tokens"], facts["empty"])


def _no_model_tokens(arrays: int, with_model_tokens: int, empty: int) -> str | None:
    """A sentence when a run has token arrays but none holds a model token."""
    if arrays == 0 or with_model_tokens > 0:
        return None
    what = "every token array is empty" if empty == arrays else "every response mask is false"
    return (f"token arrays hold no model token ({what}, {arrays} arrays): token-level estimators "
            "(GAE, token-level GDPO) left out")


def _viewer_pages(store: Any, run_id: str, measures: pl.DataFrame, stage: Any, folder: Path, count: int,
                  choices: list) -> tuple[list[Path], list[tuple[str, str, Path]]]:
    """Pages for a few exemplar trajectories: the median-length one of the first and last
    stage, and the last-stage trajectory with the highest share of the class whose share
    changed most between the first stage and the last."""
    from trajlens.report.viewer import Credit, page_name, run_credit, write_viewer

    if count <= 0:
        return [], []
    staged = stage.measures
    first, last = staged["stage_index"].min(), staged["stage_index"].max()
    picks: list[tuple[str, str]] = []

    def median_of(part: pl.DataFrame) -> str:
        part = part.sort("n_calls", "trajectory_id")
        return part["trajectory_id"][part.height // 2]

    early, late = staged.filter(pl.col("stage_index") == first), staged.filter(pl.col("stage_index") == last)
    shares = [c for c in plots.CLASS_COLOURS if f"share_{c}" in staged.columns]
    if first != last and shares:
        change = {c: abs((late[f"share_{c}"].mean() or 0) - (early[f"share_{c}"].mean() or 0)) for c in shares}
        klass = max(shares, key=lambda c: (change[c], c))
        top = late.sort(f"share_{klass}", "trajectory_id", descending=[True, False], nulls_last=True)
        picks.append((top["trajectory_id"][0], f"highest {klass} share in {late['stage'][0]}"))
    picks.append((median_of(early), f"median length in {early['stage'][0]}"))
    if first != last:
        picks.append((median_of(late), f"median length in {late['stage'][0]}"))
    seen, chosen = set(), []
    for trajectory_id, why in picks:
        if trajectory_id not in seen:
            seen.add(trajectory_id)
            chosen.append((trajectory_id, why))
    chosen = chosen[:count]
    steps = staged.filter(pl.col("trajectory_id").is_in([t for t, _ in chosen]))["step"].unique().to_list()
    credit: Credit | None = (run_credit(store, run_id, choices[0].label, steps=steps, choices=choices)
                             if choices else None)
    written = []
    step_of = dict(staged.filter(pl.col("trajectory_id").is_in([t for t, _ in chosen]))
                   .select("trajectory_id", "step").iter_rows())
    for trajectory_id, why in chosen:
        path = write_viewer(store, run_id, trajectory_id, folder / page_name(trajectory_id), credit,
                            step=step_of[trajectory_id])
        written.append((trajectory_id, why, path))
    return [p for _, _, p in written], written


def _summary_markdown(tables: list) -> str:
    lines = ["## Summary"]
    for summary in tables:
        lines += ["", f"### {summary.title}", "", summary.note, ""]
        frame = summary.frame.with_columns(pl.col(pl.Float64).round(4))
        lines.append(_markdown_table(frame) if frame.height else "(none)")
    return "\n".join(lines)


def _behaviour_findings(rates: pl.DataFrame) -> list[str]:
    findings = []
    for metric, label in (("share:think", "think share"), ("ran_suite", "runs the full suite")):
        rows = rates.filter(pl.col("metric") == metric).sort("stage_index").drop_nulls(
            ["population_value", "value", "ci_low", "ci_high"])
        if rows.height >= 2:
            first, last = rows.row(0, named=True), rows.row(-1, named=True)
            findings.append(
                f"{label}: {first['population_value']:.3f} in {first['stage']} -> {last['population_value']:.3f} "
                f"in {last['stage']} (N={last['n_sampled']} sample: {last['value']:.3f} "
                f"[{last['ci_low']:.3f}, {last['ci_high']:.3f}])"
            )
    return findings


def _advantage_findings(diagnostics: pl.DataFrame, sign_streaks) -> list[str]:
    findings = []
    for (estimator,), part in diagnostics.partition_by("estimator", as_dict=True, maintain_order=True).items():
        part = part.sort("step")
        streaks = sign_streaks(part["step"].to_list(), part["all_negative"].to_list(), part["all_positive"].to_list())
        if streaks.negative_streaks or streaks.positive_streaks:
            negative = _streak_text(streaks.negative_streaks)
            positive = _streak_text(streaks.positive_streaks)
            findings.append(f"{estimator}: all-negative batches at steps {negative}; all-positive at {positive}")
        std = part["std"]
        if std.len() > 4 and std.max() > 3 * std.median():
            peak = part.row(int(std.arg_max()), named=True)
            findings.append(f"{estimator}: advantage std peaks at {peak['std']:.2f} at step {peak['step']} "
                            f"(median {std.median():.2f})")
    return findings


MAX_LISTED_STREAKS = 20
"""Streaks of all-negative (or all-positive) batches a finding lists before counting the rest."""


def _streak_text(streaks: tuple[tuple[int, int], ...]) -> str:
    listed = ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in streaks[:MAX_LISTED_STREAKS]) or "none"
    more = len(streaks) - MAX_LISTED_STREAKS
    return listed + (f" and {more:,} more streaks" if more > 0 else "")


def _advantage_markdown(diagnostics: pl.DataFrame, choices: list[EstimatorChoice]) -> str:
    from trajlens.estimators.registry import Statistics, estimator_spec

    summary = diagnostics.group_by("estimator", maintain_order=True).agg(
        pl.len().alias("steps"),
        pl.col("mean").abs().max().round(4).alias("max_abs_batch_mean"),
        pl.col("std").median().round(4).alias("median_std"),
        pl.col("std").max().round(4).alias("max_std"),
        pl.col("all_negative").sum().alias("all_negative_batches"),
        pl.col("all_positive").sum().alias("all_positive_batches"),
    )
    over = {choice.label: estimator_spec(choice.estimator).statistics for choice in choices}
    summary = summary.with_columns(
        pl.col("estimator").replace_strict({label: s.value for label, s in over.items()}, default=None).alias("over"))
    by_tokens = [label for label, s in over.items() if s is Statistics.MODEL_TOKENS]
    by_trajectories = [label for label, s in over.items() if s is Statistics.TRAJECTORIES]
    parts = []
    if by_tokens:
        parts.append(f"over model tokens for {', '.join(by_tokens)}")
    if by_trajectories:
        parts.append(f"over trajectories for {', '.join(by_trajectories)}")
    lines = ["## Recomputed advantages", "",
             "Per-step batch statistics of the advantages each estimator would have given these "
             f"trajectories, taken as each estimator's loss sees them: {'; '.join(parts)}.", "",
             _markdown_table(summary)]
    return "\n".join(lines)


def _markdown_table(frame: pl.DataFrame) -> str:
    header = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "---|" * frame.width
    rows = ["| " + " | ".join("" if v is None else str(v) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join([header, rule, *rows])


def _write_index(out: Path, reports: list[RunReport]) -> None:
    lines = ["# trajlens report", ""]
    for report in reports:
        lines += [f"## {report.run_id}", "", f"[stage report]({report.run_id}/{report.markdown.name})", ""]
        lines += [f"- {finding}" for finding in report.findings] or ["- nothing notable"]
        lines.append("")
    (out / "README.md").write_text("\n".join(lines))

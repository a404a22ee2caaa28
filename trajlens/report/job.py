"""The main job: classify every run of a store, report each stage, recompute advantages.

:func:`classify_store` writes the analysis tables ``call_classes`` and ``trajectory_measures``
into the store (views beside the run tables). :func:`report_store` does that, then writes per
run a stage-sampled Markdown report with plots and the per-step advantage diagnostics of
every estimator the run's data allows, plus an index ``README.md`` of findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import polars as pl

from trajlens.report import plots
from trajlens.report.scalars import channel_findings, scalar_findings
from trajlens.store.handle import in_transaction

CALL_CLASS_COLUMNS: tuple[str, ...] = (
    "run_id", "step", "trajectory_id", "call_index", "tool_name", "primary_class", "action_classes", "paths",
    "is_edit", "is_verification",
)
# Metrics plotted per stage: the r6 collapse signal and the r7 verification shift.
STAGE_PLOT_METRICS: tuple[str, ...] = (
    "share:think", "ran_suite", "verification:test_suite", "verification:test_targeted", "verification:quick_check",
)


@dataclass(frozen=True)
class EstimatorChoice:
    """An estimator to recompute, with its options and when a run's data allows it."""

    label: str
    estimator: str
    options: dict[str, Any]
    needs: str
    """'values' (token arrays with critic values), 'groups' (groups of two or more, every
    trajectory rewarded), 'channels' (two or more reward channels), or 'channels_with_lengths'
    (channels, and a model-token count for every trajectory, for token-level whitening)."""


ESTIMATOR_CHOICES: tuple[EstimatorChoice, ...] = (
    EstimatorChoice("gae_raw", "gae", {"gamma": 1.0, "lam": 1.0, "whiten": False}, "values"),
    EstimatorChoice("gae_whitened", "gae", {"gamma": 1.0, "lam": 1.0, "whiten": True}, "values"),
    EstimatorChoice("grpo", "grpo", {}, "groups"),
    EstimatorChoice("dr_grpo", "dr_grpo", {}, "groups"),
    EstimatorChoice("rloo", "rloo", {}, "groups"),
    EstimatorChoice("sum_then_normalize", "sum_then_normalize", {}, "channels"),
    EstimatorChoice("gdpo_verl", "gdpo_verl", {}, "channels_with_lengths"),
)


@dataclass
class RunReport:
    run_id: str
    markdown: Path
    figures: list[Path] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)


@in_transaction
def classify_store(store: Any, run_ids: list[str] | None = None) -> dict[str, pl.DataFrame]:
    """Classify the tool calls of each run and save ``call_classes`` and ``trajectory_measures``."""
    from trajlens.classify import classify_calls, trajectory_measures

    measures_by_run = {}
    for run_id in run_ids or store.run_ids():
        calls = classify_calls(store.tool_calls.filter(pl.col("run_id") == run_id))
        trajectories = store.trajectories.filter(pl.col("run_id") == run_id).collect()
        measures = trajectory_measures(calls, trajectories)
        store.write_derived("call_classes", run_id, calls.select(CALL_CLASS_COLUMNS))
        store.write_derived("trajectory_measures", run_id, measures)
        measures_by_run[run_id] = measures
    return measures_by_run


def available_estimators(store: Any, run_id: str) -> list[EstimatorChoice]:
    """The estimator choices a run's data supports."""
    facts = store.sql(
        """
        SELECT
            (SELECT count(*) FROM tokens WHERE run_id = $run AND "values" IS NOT NULL) AS with_values,
            (SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM trajectories
                WHERE run_id = $run GROUP BY step, group_id)) AS largest_group,
            (SELECT coalesce(max(len(reward_channels)), 0) FROM trajectories WHERE run_id = $run) AS channels,
            (SELECT count(*) FILTER (WHERE reward IS NULL) FROM trajectories
                WHERE run_id = $run AND split = 'train') AS without_reward,
            (SELECT count(*) FROM trajectories t WHERE t.run_id = $run AND t.split = 'train'
                AND t.model_tokens IS NULL AND NOT EXISTS (SELECT 1 FROM tokens k
                    WHERE k.run_id = t.run_id AND k.trajectory_id = t.trajectory_id)) AS without_length
        """,
        {"run": run_id},
    ).row(0, named=True)
    allowed = {
        "values": facts["with_values"] > 0,
        "groups": facts["largest_group"] > 1 and facts["without_reward"] == 0,
        "channels": facts["channels"] > 1,
        "channels_with_lengths": facts["channels"] > 1 and facts["without_length"] == 0,
    }
    return [choice for choice in ESTIMATOR_CHOICES if allowed[choice.needs]]


def advantage_diagnostics(store: Any, run_id: str, choices: list[EstimatorChoice]) -> pl.DataFrame:
    """Per-step batch diagnostics of each estimator choice, stacked with an ``estimator`` column."""
    from trajlens.report.advantages import labelled_diagnostics, read_run

    if not choices:
        return pl.DataFrame()
    frames = read_run(store, run_id, tokens=any(c.needs in ("values", "channels_with_lengths") for c in choices))
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
    progress: Callable[[str], None] | None = None,
) -> list[RunReport]:
    """Write reports for every run (or ``run_ids``) under ``out``; returns what was written."""
    from trajlens.classify import stage_report
    from trajlens.estimators import sign_streaks
    from trajlens.report.advantages import save_advantage_batches

    out = Path(out)
    tick = progress or (lambda _: None)
    reports = []
    all_measures = classify_store(store, run_ids)
    for run_id, measures in all_measures.items():
        directory = out / run_id
        directory.mkdir(parents=True, exist_ok=True)
        report = RunReport(run_id, directory / "stage_report.md")
        report.findings += scalar_findings(store, run_id)
        if measures.height == 0:
            report.findings.append("no trajectories: training scalars only")
            report.markdown.write_text(f"# {run_id}\n\nNo trajectories: training scalars only.\n\n"
                                       + "\n".join(f"- {f}" for f in report.findings) + "\n")
            reports.append(report)
            tick(run_id)
            continue
        report.findings += channel_findings(store, run_id)
        figures = report.figures
        figures.append(plots.class_shares_by_step(measures, directory / "class_shares_by_step.png",
                                                  f"{run_id}: behaviour classes per step"))
        stage = stage_report(store, run_id=run_id, n=n, seed=seed, stages=stages)
        store.write_derived("stage_rates", run_id, stage.rates)
        store.write_derived("stage_changes", run_id, stage.changes)
        figures.append(plots.stage_rates(stage.rates, list(STAGE_PLOT_METRICS), directory / "stage_rates.png",
                                         f"{run_id}: N={n} per stage"))
        report.findings += _behaviour_findings(stage.rates)
        if measures["step"].n_unique() == 1:
            report.findings.append("a single step: no training stages to compare (agent logs without steps)")
        sections = [stage.to_markdown()]
        choices = available_estimators(store, run_id)
        if choices:
            diagnostics = advantage_diagnostics(store, run_id, choices)
            save_advantage_batches(store, run_id, diagnostics, keep_other_labels=False)
            figures.append(plots.advantage_batches(diagnostics, directory / "advantage_batches.png",
                                                   f"{run_id}: recomputed advantages per batch"))
            sections.append(_advantage_markdown(diagnostics, sign_streaks))
            report.findings += _advantage_findings(diagnostics, sign_streaks)
        sections.append("## Figures\n\n" + "\n".join(f"![{f.stem}]({f.name})" for f in figures))
        report.markdown.write_text("\n\n".join(sections) + "\n")
        reports.append(report)
        tick(run_id)
    _write_index(out, reports)
    return reports


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
            negative = ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in streaks.negative_streaks) or "none"
            positive = ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in streaks.positive_streaks) or "none"
            findings.append(f"{estimator}: all-negative batches at steps {negative}; all-positive at {positive}")
        std = part["std"]
        if std.len() > 4 and std.max() > 3 * std.median():
            peak = part.row(int(std.arg_max()), named=True)
            findings.append(f"{estimator}: advantage std peaks at {peak['std']:.2f} at step {peak['step']} "
                            f"(median {std.median():.2f})")
    return findings


def _advantage_markdown(diagnostics: pl.DataFrame, sign_streaks) -> str:
    summary = diagnostics.group_by("estimator", maintain_order=True).agg(
        pl.len().alias("steps"),
        pl.col("mean").abs().max().round(4).alias("max_abs_batch_mean"),
        pl.col("std").median().round(4).alias("median_std"),
        pl.col("std").max().round(4).alias("max_std"),
        pl.col("all_negative").sum().alias("all_negative_batches"),
        pl.col("all_positive").sum().alias("all_positive_batches"),
    )
    lines = ["## Recomputed advantages", "",
             "Per-step batch statistics of the advantages each estimator would have given these "
             "trajectories (token-level estimators over model tokens).", "",
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

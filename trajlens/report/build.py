"""The main job: classify every run of a store, report each stage, recompute advantages.

:func:`classify_store` writes the analysis tables ``call_classes``, ``trajectory_measures`` and
``unknown_tools`` into the store (views beside the run tables). :func:`report_store` does that, then writes per
run a stage-sampled Markdown report with plots and the per-step advantage diagnostics of
every estimator the run's data allows, plus an index ``README.md`` of findings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import polars as pl

from trajlens.classify.stages import outcome_rates
from trajlens.classify.tool_map import ToolMapLike
from trajlens.errors import ConfigError
from trajlens.estimators.spec import EstimatorChoice
from trajlens.estimators.trained import TrainedWith
from trajlens.markdown import markdown_table
from trajlens.report import plots
from trajlens.report.findings import (
    RECOMPUTED, Finding, advantage_findings, attribution_findings, dead_group_finding, drift_findings, outcome_finding,
    ranked, stage_findings, with_verdicts,
)
from trajlens.report.html_report import OUTCOME_BY_STAGE, OUTCOME_BY_STAGE_NOTE, Exemplar
from trajlens.report.overview import (
    LENGTH_TRENDS, Trend, check_label, main_finding, lead_class_trend, moved_share, overview_markdown, run_trends,
)
from trajlens.report.scalars import (
    CHANNELS_NOTE, CHANNELS_TITLE, SCALARS_NOTE, SCALARS_TITLE, channel_findings, run_channels, run_scalars,
    scalar_findings,
)
from trajlens.run.choices import report_advantages
from trajlens.run.splits import TRAIN_SPLIT, measured_split, run_splits
from trajlens.run.trained import run_trained_with
from trajlens.store.handle import in_transaction

STAGE_PLOT_METRICS = plots.STAGE_PLOT_METRICS


@dataclass
class RunReport:
    """What the report wrote and found for one run."""

    run_id: str
    markdown: Path
    figures: list[Path] = field(default_factory=list)
    """Every figure file written: each figure's SVG, and its PNG after it when PNGs were asked for."""
    findings: list[str] = field(default_factory=list)
    html: str = ""
    """The run's section of ``index.html``."""
    viewers: list[Path] = field(default_factory=list)
    split: str = TRAIN_SPLIT
    """The split reported: the one asked for, else the one the run has (a validation-only run)."""
    kind: str = ""
    """What the log is (:data:`RUN_KINDS`)."""
    failing: list[tuple[str, str, str]] = field(default_factory=list)
    """The shipped checks that fired: (name, status, steps)."""
    trends: dict[str, Trend] = field(default_factory=dict)
    """The overview's small trends, by name: per-step values and the first and last quarter's."""
    exemplars: list[Exemplar] = field(default_factory=list)
    """The trajectories its pages show, each with why it was picked."""

    @property
    def described(self) -> str:
        """What the run is and which trajectories it is reported on, in a sentence (a run with no
        trajectories is reported on none, whatever split was asked for)."""
        if self.kind in (RUN_KINDS["scalars"], RUN_KINDS["empty"]):
            return f"{self.kind}."
        return f"{self.kind}; trajectories of split {self.split}."


RUN_KINDS: dict[str, str] = {
    "rl_tools": "RL run with tools",
    "rl": "RL run without tools",
    "eval": "eval run (one step of agent logs)",
    "rl_one_step": "RL run of one training step",
    "validation": "validation split only",
    "scalars": "training scalars only",
    "empty": "empty (no trajectories, no training scalars)",
}
"""The kinds of log the report tells apart, as the overview names them."""


@in_transaction
def classify_store(store: Any, run_ids: list[str] | None = None, tool_map: ToolMapLike = None) -> dict[str, pl.DataFrame]:
    """Classify the tool calls of each run and save ``call_classes``, ``trajectory_measures``
    and ``unknown_tools`` (:func:`trajlens.engine.classify.classify_run`, as ``trajlens classify
    [--tool-map FILE]``): ``tool_map`` is tried before the shipped maps, and classifying again
    without it goes back to the shipped maps alone."""
    from trajlens.engine.classify import classify_run

    return {run_id: classify_run(store, run_id, tool_map).measures for run_id in chosen_runs(store, run_ids)}


def chosen_runs(store: Any, run_ids: Sequence[str] | None) -> list[str]:
    """The runs a library call works on: ``run_ids`` (each once), each checked to be a run of ``store``
    (a :class:`ConfigError` naming those that are not, before anything is written), or every
    run of the store when None or empty."""
    if isinstance(run_ids, str):
        raise TypeError(f"run_ids: expected a list of run ids, got the text {run_ids!r} (pass [{run_ids!r}])")
    if not run_ids:
        return store.run_ids()
    chosen = list(dict.fromkeys(run_ids))  # each once, in the order first given
    store.require_runs(chosen)
    return chosen


def _run_kind(store: Any, run_id: str, measures: pl.DataFrame, split: str, single_step: bool, with_tools: bool) -> str:
    """What the run is (:data:`RUN_KINDS`), from its trajectories of ``split`` (``single_step``,
    ``with_tools``); a run with training data reported on another split is what its training
    trajectories make it (the section names the split)."""
    from trajlens.run.partitions import scan_run_table

    if split != TRAIN_SPLIT:
        trained = scan_run_table(store, run_id, "trajectories").filter(pl.col("split") == TRAIN_SPLIT) \
            .select("trajectory_id", "step").collect()
        if trained.height == 0:
            return RUN_KINDS["validation"]
        single_step = trained["step"].n_unique() == 1
        calls = measures.join(trained, on="trajectory_id", how="semi")["n_calls"]
        if calls.len():
            with_tools = int(calls.sum()) > 0
    if single_step:
        return RUN_KINDS["rl_one_step" if _trained(store, run_id) else "eval"]
    return RUN_KINDS["rl_tools" if with_tools else "rl"]


def _trained(store: Any, run_id: str) -> bool:
    """Whether a trainer wrote the run: it logged step metrics or token arrays (agent logs have neither)."""
    return _has_rows(store, run_id, "step_metrics") or _has_rows(store, run_id, "tokens")


def _has_rows(store: Any, run_id: str, table: str) -> bool:
    """Whether the run's ``table`` holds a row (read from the Parquet footers)."""
    from trajlens.run.partitions import scan_run_table

    return scan_run_table(store, run_id, table).select(pl.len()).collect().item() > 0


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
    split: str = TRAIN_SPLIT,
    png: bool = False,
    attribute: bool = False,
) -> list[RunReport]:
    """Write reports for every run (or ``run_ids``) under ``out``; returns what was written.

    With ``attribute``, each run is first attributed as ``trajlens attribute`` attributes it
    (:func:`trajlens.attribution.attribute` on the report's stages, its tables saved in the store),
    so that every drift on the first screen carries its verdict (learning, an estimator artefact or
    unexplained); a run that cannot be attributed says why among its findings.

    Per run: ``RUN/stage_report.md`` with its figures as SVG files beside it (with ``png``, also
    as PNG, which the Markdown then shows: for a page that shows no SVG), and viewer pages of a few
    trajectories (``RUN/view/*.html``), on the trajectories of ``split`` (a run without that split is
    reported on the split it has, and says so). Over all runs: ``README.md`` (findings) and ``index.html`` (one
    self-contained page: every run, the ``comparisons`` given as (A, B) sides, and the runs
    side by side when there are several).
    """
    from trajlens.engine.classify import run_measures
    from trajlens.report.html_report import write_index

    out = Path(out)
    chosen = chosen_runs(store, run_ids)
    _check_report_arguments(store, out, n=n, seed=seed, stages=stages, comparisons=comparisons or [])
    tick = progress or (lambda _: None)
    reports = []
    for run_id in chosen:
        # the measures `trajlens classify` saved, else classified and saved now
        measures = run_measures(store, run_id)
        unattributed = _attribute(store, run_id, stages) if attribute else None
        report = _report_run(store, run_id, measures, out / run_id, n=n, seed=seed, stages=stages,
                             viewers_per_run=viewers_per_run, split=split, png=png, unattributed=unattributed)
        reports.append(report)
        tick(run_id)
    _write_index(out, reports)
    write_index(store, out, reports, comparisons or [], stages=stages)
    return reports


def _attribute(store: Any, run_id: str, stages: Any) -> str | None:
    """Attribute ``run_id`` and save it, as ``trajlens attribute`` does; why it could not be, or None."""
    from trajlens.attribution import attribute

    try:
        attribute(store, run_id, stages=stages)
    except ConfigError as error:
        return "; ".join(error.problems)
    return None


def _check_report_arguments(store: Any, out: Path, *, n: Any, seed: Any, stages: Any,
                            comparisons: Sequence[tuple[str, str]]) -> None:
    """A :class:`ConfigError` naming every argument of :func:`report_store` that is wrong, before
    any file is written: the sample size, seed and stages, each side of each comparison
    (:func:`trajlens.compare.parse_side`), and an ``out`` that is a file or lies among the
    store's own files (which only ingest and the analyses write)."""
    from trajlens.classify.stages import sampling_problems
    from trajlens.compare import parse_side
    from trajlens.store.handle import store_holding_problem

    problems = sampling_problems(n, seed, stages)
    if out.exists() and not out.is_dir():
        problems.append(f"out {out}: is a file; expected a folder")
    # not hidden: the command line writes a report into a hidden folder beside its --out first
    elif (holding := store_holding_problem(out, f"out {out}", hidden=False)) is not None:
        problems.append(holding)
    if not problems:
        for pair in comparisons:
            for side in pair:
                try:
                    parse_side(store, side, stages)
                except ConfigError as error:
                    problems += error.problems
    if problems:
        raise ConfigError(problems)


def _report_run(store: Any, run_id: str, measures: pl.DataFrame, directory: Path, *, n: int, seed: int,
                stages: Any, viewers_per_run: int, split: str = TRAIN_SPLIT, png: bool = False,
                unattributed: str | None = None) -> RunReport:
    from trajlens.classify import stage_report
    from trajlens.engine.classify import measures_rules
    from trajlens.run.partitions import scan_run_table
    from trajlens.run.advantages import save_advantage_batches
    from trajlens.report.html_report import RunParts, run_section
    from trajlens.report.summary import run_summary

    directory.mkdir(parents=True, exist_ok=True)
    report = RunReport(run_id, directory / "stage_report.md", split=measured_split(store, run_id, split))
    parts = RunParts(run_id)
    every_split = measures
    if report.split != split:
        report.findings.append(Finding(
            f"no {split} split: reported on its {report.split} split ({', '.join(run_splits(store, run_id))})",
            "split", "summary-outcome"))
        measures = measures.join(
            scan_run_table(store, run_id, "trajectories").filter(pl.col("split") == report.split)
            .select("trajectory_id").collect(), on="trajectory_id", how="semi")
    elif measures.height:
        measures = measures.join(
            scan_run_table(store, run_id, "trajectories").filter(pl.col("split") == split)
            .select("trajectory_id").collect(), on="trajectory_id", how="semi")
    if measures.height == 0:
        checks = _checks(store, run_id)
        parts.scalars = run_scalars(store, run_id, checks)
        report.findings += scalar_findings(store, run_id, checks, parts.scalars)
        report.failing = _failing(checks)
        has_scalars = _has_rows(store, run_id, "step_metrics")
        kind = "scalars" if has_scalars else "empty"
        report.kind = RUN_KINDS[kind]
        said = "No trajectories: training scalars only" if has_scalars else "No trajectories and no training scalars"
        report.findings.append(Finding(said[0].lower() + said[1:], "no_trajectories", "scalars" if has_scalars else None))
        report.markdown.write_text("\n\n".join([f"# {run_id}\n\n{said}.",
                                                 "\n".join(f"- {f}" for f in report.findings),
                                                 *_scalars_markdown(parts.scalars)]) + "\n")
        report.html = run_section(store, report, parts)
        return report
    single_step = measures["step"].n_unique() == 1
    with_tools = int(measures["n_calls"].sum()) > 0
    report.kind = _run_kind(store, run_id, every_split, report.split, single_step, with_tools)
    parts.summary = run_summary(store, run_id, measures, split=report.split)
    report.trends, class_trends = run_trends(store, run_id, measures, report.split)
    charts = parts.charts
    # the checks, evaluated once, take these and ``measures`` rather than computing them again
    advantages = report_advantages(store, run_id, extremes=True, logged=_logged_feeds(store, run_id)) \
        if report.split == TRAIN_SPLIT else None
    checks = _checks(store, run_id, measures, advantages) if report.split == TRAIN_SPLIT else _checks(store, run_id)
    parts.scalars = run_scalars(store, run_id, checks)
    report.findings += scalar_findings(store, run_id, checks, parts.scalars)
    parts.channels = run_channels(store, run_id, report.split)
    channels = channel_findings(store, run_id, report.split, parts.channels)  # folded into their verdicts below
    report.failing = _failing(checks)
    if single_step:  # the one step of an eval log is no point in training
        report.failing = [(name, status, "") for name, status, _ in report.failing]
    alarms = _alarms(checks)
    if not single_step and with_tools:
        charts["class_shares_by_step"] = plots.class_shares_by_step(
            measures, f"{run_id}: behaviour classes per step", alarms)
    if report.trends.keys() & {"reward", *LENGTH_TRENDS}:
        charts["reward_and_length_by_step"] = plots.reward_and_length_by_step(
            report.trends, f"{run_id}: reward and length per step")
    if parts.channels is not None:
        from trajlens.checks.step_measures import step_rel_gains

        charts["reward_channels_by_step"] = plots.reward_channels_by_step(
            parts.channels.step_means, step_rel_gains(parts.channels.gains), f"{run_id}: reward channels per step")
    if with_tools:
        charts["class_shares_per_trajectory"] = plots.class_shares_per_trajectory(
            measures, f"{run_id}: class shares per trajectory")
    if with_tools or measures["model_tokens"].drop_nulls().len():
        charts["distributions"] = plots.distributions(measures, f"{run_id}: turns and length")
    run_tables = (scan_run_table(store, run_id, "trajectories"), scan_run_table(store, run_id, "tool_calls"))
    stage = stage_report(run_tables, run_id=run_id, n=n, seed=seed, stages=stages, split=report.split,
                         measures=measures, rules_version=measures_rules(store, run_id))
    parts.stage = None if single_step else stage  # one stage: the summary says it all
    # the outcome by stage, on the stage report's stages and sample: the reward and resolved trends judge it
    outcomes = run_tables[0].filter(pl.col("split") == report.split).select("trajectory_id", "reward", "resolved").collect()
    staged_outcomes = stage.measures.join(outcomes, on="trajectory_id", how="left")
    parts.outcome = outcome_rates(staged_outcomes)
    store.write_derived("stage_rates", run_id, stage.rates)
    store.write_derived("stage_changes", run_id, stage.changes)
    if with_tools and not single_step:
        charts["stage_rates"] = plots.stage_rates(stage.rates, list(STAGE_PLOT_METRICS),
                                                  f"{run_id}: {stage.sample_size} (bars: sample, x: whole stage)")
    # a run not attributed yet still shows each class drift that attribution would judge
    verdicts = attribution_findings(store, run_id) or drift_findings(measures, _staged(measures, stages), run_id)
    trends = stage_findings(pl.concat([stage.rates, parts.outcome]), staged_outcomes)
    report.findings += with_verdicts(trends + channels, verdicts)
    if unattributed is not None:
        report.findings.append(Finding(f"not attributed: {unattributed}", "attribution_unavailable", None, RECOMPUTED))
    report.findings += dead_group_finding(parts.summary)
    if single_step:
        report.findings += outcome_finding(parts.summary)
        said = (f"the {report.split} split is at a single step: no stages to compare" if report.split != TRAIN_SPLIT
                else "a single training step: no stages to compare" if report.kind == RUN_KINDS["rl_one_step"]
                else f"one step of agent logs (step {measures['step'][0]}): no training stages to compare")
        report.findings.append(Finding(said, "single_step", "summary-outcome"))
    sections = [f"# {run_id}\n\n{report.described}",
                *([] if single_step else [stage.to_markdown(), _outcome_markdown(parts.outcome)]),
                _summary_markdown(parts.summary), *_channels_markdown(parts.channels), *_scalars_markdown(parts.scalars)]
    choices = advantages.choices if advantages is not None else []
    trained = run_trained_with(store, run_id) if choices else None
    if advantages is not None and advantages.empty_tokens:
        report.findings.append(Finding(advantages.empty_tokens, "token_arrays", "advantages"))
    if advantages is not None:
        report.findings += [Finding(note, "estimator_inputs", "advantages", RECOMPUTED) for note in advantages.notes]
    if choices:
        diagnostics = advantages.diagnostics
        parts.diagnostics = diagnostics
        save_advantage_batches(store, run_id, diagnostics, keep_other_labels=True)
        charts["advantage_batches"] = plots.advantage_batches(diagnostics, f"{run_id}: recomputed advantages per batch",
                                                              _counted_units(choices))
        sections.append(_advantage_markdown(diagnostics, choices, trained))
        own = trained.among(choices)
        report.findings += advantage_findings(diagnostics, None if own is None else own.label)
    shown = []  # the HTML page inlines the same drawing of each SVG (Chart.svg)
    for name, chart in charts.items():
        report.figures.append(chart.write_svg(directory / f"{name}.svg"))
        if png:
            report.figures.append(chart.png(directory / f"{name}.png"))
        shown.append(report.figures[-1])
    sections.append("## Figures\n\n" + "\n".join(f"![{f.stem}]({f.name})" for f in shown))
    report.markdown.write_text("\n\n".join(sections) + "\n", encoding="utf-8")
    report.findings = ranked(report.findings, {name: status for name, status, _ in report.failing})
    report.trends = lead_class_trend(report.trends, class_trends, report.findings)
    report.viewers, report.exemplars = _viewer_pages(store, run_id, measures, stage, directory / "view",
                                                    viewers_per_run, choices, trained, moved_share(report.trends))
    parts.exemplars = report.exemplars
    report.html = run_section(store, report, parts)
    return report


def _staged(measures: pl.DataFrame, stages: Any) -> pl.DataFrame:
    """Each step's ``stage_index``, as the stage report cuts the run's steps (steps outside every
    stage left out)."""
    from trajlens.classify.stages import assign_stages

    staged = assign_stages(measures.select("run_id", "step").unique(), stages)
    return staged.select("step", "stage_index").drop_nulls("stage_index")


def _checks(store: Any, run_id: str, measures: pl.DataFrame | None = None, advantages: Any = None) -> Any:
    """The shipped checks evaluated on the run (a :class:`~trajlens.checks.evaluate.RunChecks`),
    once, on the report's ``measures`` and ``advantages`` when given; None when they cannot be."""
    from trajlens.checks.report import shipped_checks
    from trajlens.errors import TrajlensError

    try:
        return shipped_checks(store, run_id, measures, advantages)
    except TrajlensError:
        return None


def _logged_feeds(store: Any, run_id: str) -> tuple[Any, ...]:
    """The shipped checks' logged-advantage measures, fed by the report's advantage pass (none
    when the run cannot be checked: the checks section then says why)."""
    from trajlens.checks.report import logged_feeds
    from trajlens.errors import TrajlensError

    try:
        return logged_feeds(store, run_id)
    except TrajlensError:
        return ()


def _failing(checks: Any) -> list[tuple[str, str, str]]:
    """The shipped checks that fire on the run: (name, fail or warn, the steps they fire at);
    failures first, each kind in the order the checks first fired, so the first screen names
    what went wrong first (sao-r6: the starved critic before the think share it led to)."""
    from trajlens.checks.output import spans

    fired = [r for r in checks.results if r.status in ("fail", "warn")] if checks is not None else []
    order = sorted(fired, key=lambda r: (r.status != "fail", min(r.fired_steps, default=math.inf)))
    return [(r.name, r.status, spans(r.fired_steps)) for r in order]


def _alarms(checks: Any) -> list[plots.Alarm]:
    """The shipped checks that fire on the run (see :mod:`trajlens.checks`), at their first step."""
    if checks is None:
        return []
    from trajlens.checks.kinds import KINDS

    return [plots.Alarm(r.name, r.check.severity, min(r.fired_steps),
                        max(r.fired_steps) if KINDS[r.check.condition].compares_stages else None)
            for r in checks.results if r.status in ("fail", "warn") and r.fired_steps]


def _viewer_pages(store: Any, run_id: str, measures: pl.DataFrame, stage: Any, folder: Path, count: int,
                  choices: list, trained: TrainedWith | None,
                  moved: tuple[str, bool] | None) -> tuple[list[Path], list[Exemplar]]:
    """Pages for at most ``count`` exemplar trajectories, in this order: the trajectory with the
    highest share of the class whose share moved most (the overview's trend,
    :func:`~trajlens.report.overview.moved_share`; of the last stage when it grew, of the first
    when it shrank, where the class still was), then the median-length one of the first and last
    stage. A run of one stage has no trend: the median, the longest and the shortest attempt of
    each outcome (of the stage when the run has no verdicts), medians first."""
    from trajlens.report.viewer import Credit, page_name, run_credit, write_viewer

    if count <= 0:
        return [], []
    staged = stage.measures
    first, last = staged["stage_index"].min(), staged["stage_index"].max()
    picks: list[tuple[str, str, str | None]] = []  # trajectory, why, the stage metric it is the extreme of

    def median_of(part: pl.DataFrame) -> str:
        part = part.sort("n_calls", "trajectory_id")
        return part["trajectory_id"][part.height // 2]

    early, late = staged.filter(pl.col("stage_index") == first), staged.filter(pl.col("stage_index") == last)
    if first != last and moved is not None and f"share_{moved[0]}" in staged.columns:
        klass, grew = moved
        where = late if grew else early
        top = where.sort(f"share_{klass}", "trajectory_id", descending=[True, False], nulls_last=True)
        picks.append((top["trajectory_id"][0], f"highest {klass} share in {where['stage'][0]}"
                                               + ("" if grew else ", before it shrank"), f"share:{klass}"))
    if first != last:
        picks.append((median_of(early), f"median tool calls in {early['stage'][0]}", None))
        picks.append((median_of(late), f"median tool calls in {late['stage'][0]}", None))
    else:
        # One stage: the median, the longest and the shortest attempt of each outcome (of the
        # stage when the run has no verdicts), medians first, so that the first pages show both.
        outcomes = _outcomes(store, run_id)
        labelled = early.with_columns(pl.col("trajectory_id").replace_strict(outcomes, default=None).alias("ok"))
        # a run of one step has no stages: its trajectories are the run's, not a quarter's
        whole = "of the run" if early["step"].n_unique() == 1 else f"in {early['stage'][0]}"
        parts = ([(labelled.filter(pl.col("ok") == ok), word) for ok, word in ((True, "resolved"), (False, "unresolved"))]
                 if outcomes else [(early, whole)])
        parts = [(part, word) for part, word in parts if part.height]
        picks += [(median_of(part), f"{word}: median tool calls" if outcomes else f"median tool calls {word}", None)
                  for part, word in parts]
        for descending, extreme in ((True, "most"), (False, "fewest")):
            picks += [(part.sort("n_calls", "trajectory_id", descending=[descending, False])["trajectory_id"][0],
                       f"{word}: {extreme} tool calls" if outcomes else f"{extreme} tool calls {word}", None)
                      for part, word in parts]
    seen, chosen = set(), []
    for trajectory_id, why, subject in picks:
        if trajectory_id not in seen:
            seen.add(trajectory_id)
            chosen.append((trajectory_id, why, subject))
    chosen = chosen[:count]
    steps = staged.filter(pl.col("trajectory_id").is_in([t for t, _, _ in chosen]))["step"].unique().to_list()
    # credit under the run's own estimator, as its findings, checks and attribution give it
    credit: Credit | None = (run_credit(store, run_id, steps=steps, choices=choices, trained=trained)
                             if choices else None)
    written = []
    step_of = dict(staged.filter(pl.col("trajectory_id").is_in([t for t, _, _ in chosen]))
                   .select("trajectory_id", "step").iter_rows())
    for trajectory_id, why, subject in chosen:
        path = write_viewer(store, run_id, trajectory_id, folder / page_name(trajectory_id), credit,
                            step=step_of[trajectory_id], back=f"../../index.html#{run_id}")
        written.append(Exemplar(trajectory_id, why, path, subject))
    return [e.path for e in written], written


def _outcomes(store: Any, run_id: str) -> dict[str, bool]:
    """Resolved or not, by trajectory id, when the run has trajectories of both outcomes."""
    from trajlens.run.partitions import scan_run_table

    rows = scan_run_table(store, run_id, "trajectories").select("trajectory_id", "resolved").drop_nulls().collect()
    return dict(rows.iter_rows()) if rows["resolved"].n_unique() == 2 else {}


def _outcome_markdown(outcome: pl.DataFrame) -> str:
    """The stage report's outcome by stage, as its rates tables show a metric (none without one)."""
    from trajlens.classify._markdown import rates_table

    if outcome.is_empty():
        return f"## {OUTCOME_BY_STAGE}\n\nNo reward or verdict logged."
    return "\n".join([f"## {OUTCOME_BY_STAGE}", "", OUTCOME_BY_STAGE_NOTE, "", *rates_table(outcome)])


def _channels_markdown(channels: Any) -> list[str]:
    """The stage report's channel table (none for a run without two channels)."""
    if channels is None:
        return []
    frame = channels.table.with_columns(pl.col(pl.Float64).round(3))
    return ["\n".join([f"## {CHANNELS_TITLE}", "", CHANNELS_NOTE, "", _markdown_table(frame)])]


def _scalars_markdown(scalars: Any) -> list[str]:
    """The stage report's table of the critic scalars its findings read (none without any)."""
    if scalars is None or scalars.table.is_empty():
        return []
    frame = scalars.table.with_columns(pl.col(pl.Float64).round(3))
    return ["\n".join([f"## {SCALARS_TITLE}", "", SCALARS_NOTE, "", _markdown_table(frame)])]


def _summary_markdown(tables: list) -> str:
    lines = ["## Summary"]
    for summary in tables:
        lines += ["", f"### {summary.title}", "", summary.note, ""]
        frame = summary.frame.with_columns(pl.col(pl.Float64).round(4))
        lines.append(_markdown_table(frame) if frame.height else "(none)")
    return "\n".join(lines)


def _trained_sentence(trained: TrainedWith, choices: list[EstimatorChoice]) -> str:
    """Which of the recomputations is the run's own, and how that is known."""
    if trained.choice is None:
        return ("Its config names no estimator, and its logged advantages name none (none logged, none that tells "
                "the estimators apart, or none that matches one): no row is the run's own.")
    own = trained.among(choices)
    name = f"`{own.label}`" if own is not None else f"`{trained.choice.label}` (not recomputed here)"
    how = (f"from its config: {trained.evidence}" if trained.source == "config"
           else f"identified from its logged advantages: {trained.evidence}")
    aggregation = (f"loss aggregation {trained.aggregation}" if trained.aggregation_logged
                   else f"loss aggregation not logged, {trained.aggregation} (verl's default) taken")
    return f"The run trained with {name} ({how}; {aggregation})."


def _counted_units(choices: list[EstimatorChoice]) -> dict[str, str]:
    """What each estimator label's batch statistics count (``model tokens``, ``trajectories``), as
    its registry entry says its loss sees the batch."""
    from trajlens.estimators.registry import estimator_spec

    return {choice.label: estimator_spec(choice.estimator).statistics.value for choice in choices}


def _advantage_markdown(diagnostics: pl.DataFrame, choices: list[EstimatorChoice], trained: TrainedWith) -> str:
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
             f"trajectories, taken as each estimator's loss sees them: {'; '.join(parts)}. "
             + _trained_sentence(trained, choices), "",
             _markdown_table(summary)]
    return "\n".join(lines)


def _markdown_table(frame: pl.DataFrame) -> str:
    rows = (["" if v is None else str(v) for v in row] for row in frame.iter_rows())
    return "\n".join(markdown_table(frame.columns, rows))


REPORT_TITLE = "# trajlens report"
"""The first line of a report's ``README.md``."""


def foreign_files(folder: Path) -> list[str]:
    """The files of an existing ``folder`` that a report written into it would replace and that
    no report wrote: a ``README.md`` not starting with :data:`REPORT_TITLE`, an ``index.html``
    that is no report index. A report written again into its folder replaces its own."""
    return [name for name, ours in _front_files(folder).items() if ours is False]


def report_front_files(folder: Path) -> list[str]:
    """The front files of a report (``README.md``, ``index.html``) that ``folder`` holds and a
    report wrote, known by their content: a report written again replaces them, also in a folder
    that keeps no list of what a report wrote there."""
    return [name for name, ours in _front_files(folder).items() if ours]


def _front_files(folder: Path) -> dict[str, bool | None]:
    """Per front file of a report (README.md, index.html): whether the one in ``folder`` is a
    report's (None: there is none)."""
    from trajlens.report.html_report import is_report_index

    ours = {"README.md": lambda text: text.startswith(REPORT_TITLE), "index.html": is_report_index}
    found: dict[str, bool | None] = {}
    for name, written_by_a_report in ours.items():
        path = folder / name
        try:
            found[name] = (written_by_a_report(path.read_bytes().decode("utf-8", "replace"))
                           if path.exists() else None)
        except OSError:  # a folder of that name, or one that cannot be read: not a report's
            found[name] = False
    return found


def _write_index(out: Path, reports: list[RunReport]) -> None:
    lines = [REPORT_TITLE, "", *overview_markdown(reports), ""]
    for report in reports:
        lines += [f"## {report.run_id}", "", report.described, "", f"[stage report]({report.run_id}/{report.markdown.name})", ""]
        lines += [f"- {finding}" for finding in report.findings] or [f"- {main_finding(report)}"]
        if report.failing:  # every one, where the overview's cell names the first few
            lines += ["", "Checks that fire:", "", *(f"- {check_label(*check)}" for check in report.failing)]
        if report.exemplars:
            lines += ["", "Trajectory pages:", "",
                      *(f"- [{e.trajectory_id}]({report.run_id}/view/{e.path.name}): {e.why}" for e in report.exemplars)]
        lines.append("")
    (out / "README.md").write_text("\n".join(lines))

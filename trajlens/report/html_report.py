"""The report as one self-contained page, ``index.html``: a section per run, then comparisons.

Each run's section holds its findings (each linked to the table, figure or trajectory that
shows it), the summary tables, the stage-sampled N=80 table with intervals and the whole stage
beside it, every figure as inline SVG with hover values, the recomputed advantages, links to
viewer pages, and the optional sections of :mod:`trajlens.report.sections`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import polars as pl

from trajlens.report import html
from trajlens.report.findings import RECOMPUTED
from trajlens.report.overview import quiet_finding
from trajlens.report.sections import run_sections

KEY_STAGE_METRICS: tuple[str, ...] = (
    "share:think", "ran_suite", "verification:test_suite", "verification:test_targeted", "verification:quick_check",
    "verification:run_script", "mean:num_turns", "mean:model_tokens", "mean:edits_per_turn", "mean:readback_share",
    "mean:think_runs",
)
"""Stage metrics shown open in a run's section; the rest sit in a collapsed table."""

OUTCOME_BY_STAGE = "Outcome by stage"
"""The title of a run's outcome by stage (:func:`~trajlens.classify.stages.outcome_rates`), in
its stage report and its section of ``index.html``."""
OUTCOME_BY_STAGE_NOTE = ("The checks' mean reward and resolved rate (the share of the trajectories with a verdict) "
                         "on the same sample of each stage as the behaviour metrics, with its 95% interval, and on "
                         "the whole stage.")


class Exemplar(NamedTuple):
    """A trajectory the run's section links to, with its viewer page."""

    trajectory_id: str
    why: str
    """Why it was picked: "highest think share in Q4", "median tool calls in Q1"."""
    path: Path
    subject: str | None = None
    """The stage metric it is the extreme of (``share:think``), so that a finding about that
    metric (:attr:`~trajlens.report.findings.Finding.subject`) links to it; None for a median."""


@dataclass
class RunParts:
    """What a run's HTML section is built from."""

    run_id: str
    summary: list = field(default_factory=list)
    charts: dict = field(default_factory=dict)
    stage: Any = None
    outcome: pl.DataFrame | None = None
    """The outcome by stage (:func:`~trajlens.classify.stages.outcome_rates`), on the stage's sample."""
    channels: Any = None
    """The run's reward channels (:func:`~trajlens.report.scalars.run_channels`), None without two."""
    scalars: Any = None
    """The run's critic scalars (:func:`~trajlens.report.scalars.run_scalars`), what its critic findings read."""
    diagnostics: pl.DataFrame | None = None
    exemplars: list[Exemplar] = field(default_factory=list)


def run_section(store: Any, report: Any, parts: RunParts) -> str:
    """The HTML section of one run."""
    run_id = parts.run_id
    out: list[str] = [f'<section class="run" id="{html.escape(html.run_anchor(run_id))}"><h2>{html.escape(run_id)}</h2>']
    out.append(f'<p class="note"><a href="{html.escape(run_id)}/stage_report.md">Markdown stage report</a></p>')
    out.append(f'<p class="note">{html.escape(report.described)}</p>')
    out.append(f'<h3 id="{html.run_anchor(run_id, "findings")}">Findings</h3>'
               + _findings(report.findings, parts, quiet_finding(report)))
    for summary in parts.summary:
        out.append(f'<h3 id="{html.run_anchor(run_id, "summary-" + summary.key)}">{html.escape(summary.title)}</h3>'
                   f'<p class="note">{html.escape(summary.note)}</p>'
                   + (html.table(summary.frame) if summary.frame.height else "<p>none</p>"))
    if parts.channels is not None:
        from trajlens.report.scalars import CHANNELS_EVIDENCE, CHANNELS_NOTE, CHANNELS_TITLE

        out.append(f'<h3 id="{html.run_anchor(run_id, CHANNELS_EVIDENCE)}">{CHANNELS_TITLE}</h3>'
                   f'<p class="note">{html.escape(CHANNELS_NOTE)}</p>' + html.table(parts.channels.table))
    if parts.stage is not None:
        out.append(_stage_tables(run_id, parts.stage, parts.outcome, _subjects(report.findings)))
    for name, chart in parts.charts.items():
        out.append(html.figure(html.run_anchor(run_id, f"figure-{name}"), chart.svg(),
                               f"{name.replace('_', ' ')}; hover a mark for its values"))
    if parts.diagnostics is not None and parts.diagnostics.height:
        summary = parts.diagnostics.group_by("estimator", maintain_order=True).agg(
            pl.len().alias("steps"), pl.col("mean").abs().max().alias("max |batch mean|"),
            pl.col("std").median().alias("median std"), pl.col("std").max().alias("max std"),
            pl.col("all_negative").sum().alias("all-negative batches"),
            pl.col("all_positive").sum().alias("all-positive batches"))
        out.append(f'<h3 id="{html.run_anchor(run_id, "advantages")}">Recomputed advantages</h3>'
                   '<p class="note">Per-step batch statistics of what each estimator would have given these '
                   'trajectories (token-level estimators over model tokens).</p>' + html.table(summary, digits=4))
    if parts.exemplars:
        items = "".join(f'<li><a href="{html.escape(run_id)}/view/{html.escape(e.path.name)}">'
                        f'{html.escape(e.trajectory_id)}</a>: {html.escape(e.why)}</li>' for e in parts.exemplars)
        out.append(f'<h3 id="{html.run_anchor(run_id, "trajectories")}">Trajectories</h3><ul>{items}</ul>')
    for section, fragment in run_sections(store, run_id):
        out.append(f'<h3 id="{html.run_anchor(run_id, section.key)}">{html.escape(section.title)}</h3>'
                   f'<div class="section-{html.escape(section.key)}">{fragment}</div>')
    from trajlens.report.scalars import SCALARS_EVIDENCE, SCALARS_NOTE, SCALARS_TITLE

    table = parts.scalars.table if parts.scalars is not None else None
    if table is not None and table.height:
        out.append(f'<h3 id="{html.run_anchor(run_id, SCALARS_EVIDENCE)}">{SCALARS_TITLE}</h3>'
                   f'<p class="note">{html.escape(SCALARS_NOTE)}</p>' + html.table(table))
    else:
        out.append(f'<span id="{html.run_anchor(run_id, SCALARS_EVIDENCE)}"></span>')
    out.append("</section>")
    return "\n".join(out)


def _findings(findings: list[str], parts: RunParts, quiet: str) -> str:
    """The findings as a list, each linked to its evidence; ``quiet`` (the overview's words) without any."""
    if not findings:
        return f"<p>{html.escape(quiet[0].upper() + quiet[1:])}.</p>"
    items = []
    for finding in findings:
        target = _evidence(finding, parts)
        links = [f'<a href="#{html.run_anchor(parts.run_id, target)}">evidence</a>'] if target else []
        # the trajectory that shows a drift at its extreme, by the metric the finding is about, however it is worded
        subject = getattr(finding, "subject", None)
        shown = next((e for e in parts.exemplars if subject is not None and e.subject == subject), None)
        if shown is not None:
            links.append(f'<a href="{html.escape(parts.run_id)}/view/{html.escape(shown.path.name)}">a trajectory: '
                         f'{html.escape(shown.why)}</a>')
        about = getattr(finding, "about", None)
        marked = ' class="recomputed" title="about a recomputation, not the run as trained"' if about == RECOMPUTED else ""
        items.append(f"<li{marked}>{html.escape(finding)}{''.join(links)}</li>")
    return f'<ul class="findings">{"".join(items)}</ul>'


def _evidence(finding: str, parts: RunParts) -> str | None:
    """The part of the run's section that shows a finding's fact: a stage trend's metric in the
    stage figure when the figure plots it (:data:`~trajlens.report.plots.STAGE_PLOT_METRICS`),
    else its rows of the stage table (:func:`stage_row_anchor`); a stage finding about no one
    metric (where verification moved) the figure, which plots the verification mix; any other
    finding the part it names."""
    from trajlens.report.plots import STAGE_PLOT_METRICS

    target = getattr(finding, "evidence", None)
    if target != "stage":
        return target
    subject = getattr(finding, "subject", None)
    plotted = "stage_rates" in parts.charts
    if plotted and (subject is None or subject in STAGE_PLOT_METRICS):
        return "figure-stage_rates"
    if subject is not None and subject in _stage_metrics(parts):
        return stage_row_anchor(subject)
    return target


def _stage_metrics(parts: RunParts) -> set[str]:
    """The metrics the run's stage tables hold (behaviour and outcome)."""
    held = set(parts.stage.rates["metric"].to_list()) if parts.stage is not None else set()
    return held | (set(parts.outcome["metric"].to_list()) if parts.outcome is not None else set())


def _subjects(findings: list[str]) -> set[str]:
    """The stage metrics the findings speak of (:attr:`~trajlens.report.findings.Finding.subject`)."""
    return {s for f in findings if (s := getattr(f, "subject", None)) is not None}


def stage_row_anchor(metric: str) -> str:
    """The part of a run's section (:func:`html.run_anchor`) at the first row of ``metric`` in
    its stage tables: where a finding about a metric the stage figure does not plot points."""
    return f"stage-{metric}"


def _stage_columns() -> list[pl.Expr]:
    """The columns of a stage table as the section shows them."""
    return [pl.col("metric"), pl.col("stage"), pl.col("value").alias("sample"), pl.col("ci_low"), pl.col("ci_high"),
            pl.col("n_sampled").alias("N sample"), pl.col("population_value").alias("whole stage"),
            pl.col("n_population").alias("N stage"), pl.col("population_in_ci").alias("whole stage in interval")]


def _stage_rows(run_id: str, rates: pl.DataFrame) -> str:
    """Stage rows as the section shows them, each metric's first row anchored (:func:`stage_row_anchor`)."""
    first = pl.col("stage_index") == pl.col("stage_index").min().over("metric")
    anchors = pl.when(first).then(pl.lit(html.run_anchor(run_id, stage_row_anchor(""))) + pl.col("metric"))
    return html.table(rates.select(*_stage_columns(), anchors.alias("anchor")), row_id="anchor")


def _stage_tables(run_id: str, stage: Any, outcome: pl.DataFrame | None = None, subjects: set[str] = frozenset()) -> str:
    """The stage section: the stages, the key metrics open (with every metric a finding speaks
    of, so that its evidence link lands on a row shown), the outcome by stage, and every row in
    a collapsed table."""
    key = stage.rates.filter(pl.col("metric").is_in([*KEY_STAGE_METRICS, *sorted(subjects)]))
    stages = html.table(stage.stages.drop("run_id"))
    text = (f'<h3 id="{html.run_anchor(run_id, "stage")}">Stages, {stage.sample_size}</h3>'
            f'<p class="note">Seed {stage.seed}; {html.escape(stage.rules_text)}. The sample value with its '
            '95% interval, and the same metric on the whole stage beside it.</p>' + stages + _stage_rows(run_id, key))
    if outcome is not None and outcome.height:
        text += (f'<h4 id="{html.run_anchor(run_id, "stage-outcome")}">{OUTCOME_BY_STAGE}</h4>'
                 f'<p class="note">{html.escape(OUTCOME_BY_STAGE_NOTE)}</p>' + _stage_rows(run_id, outcome))
    every = stage.rates.select(_stage_columns())
    return text + f"<details><summary>all {every.height} rows</summary>{html.table(every)}</details>"


def write_index(store: Any, out: Path, reports: list, comparisons: list[tuple[str, str]], *, stages: Any) -> Path:
    """Write ``out/index.html`` from the run sections and the comparisons."""
    from trajlens.compare import compare, describe
    from trajlens.report.compare_page import comparison_section

    from trajlens.report.overview import overview_html

    body = ["<h1>trajlens report</h1>",
            f'<p class="note">{len(reports)} run(s), each with its heaviest finding; each run links to its section. '
            'Figures: hover a mark for its values. Findings link to their evidence.</p>', overview_html(reports)]
    body += [report.html for report in reports]
    nav = [(f"#{html.OVERVIEW_ID}", "overview")] + [(f"#{html.run_anchor(r.run_id)}", r.run_id) for r in reports]
    compared = []
    for index, (a, b) in enumerate(comparisons):
        table = compare(store, a, b, stages=stages)
        anchor = html.comparison_anchor(str(index))
        compared.append(comparison_section(anchor, table, describe(table, 5)))
        nav.append((f"#{anchor}", f"{b} vs {a}"))
    body.append(f'<section id="{html.COMPARISONS_ID}"><h2>Comparisons</h2>' + ("".join(compared) or NO_COMPARISONS)
                + COMPARISONS_END + "</section>")
    nav.append((f"#{html.COMPARISONS_ID}", "comparisons"))
    if len(reports) > 1:
        body.append(_side_by_side(store, [(r.run_id, r.split) for r in reports]))
        nav.append((f"#{html.RUNS_ID}", "runs side by side"))
    path = out / "index.html"
    text = html.page("trajlens report", "\n".join(body), nav=nav)
    path.write_text(text.replace("</nav>", NAV_END + "</nav>", 1))
    return path


COMPARISONS_END = "<!-- comparisons end -->"
NO_COMPARISONS = ('<p class="note">None yet: <code>trajlens report STORE --out FOLDER --compare A,B</code> or '
                  '<code>trajlens compare STORE A B --report FOLDER</code> adds one here (a side is a run, '
                  '<code>RUN:STAGE</code> or <code>RUN:LABEL</code>).</p>')
"""What the comparisons section says while it holds none; the first comparison added replaces it."""
NAV_END = "<!-- nav end -->"


def is_report_index(text: str) -> bool:
    """Whether ``text`` is an ``index.html`` that trajlens report wrote (it holds the markers a
    comparison is added at)."""
    return COMPARISONS_END in text and NAV_END in text


def read_report_index(index: Path) -> str:
    """The text of a report's ``index.html``; a one-line error when it is missing, unreadable,
    not UTF-8 or not a trajlens report index (checked before a comparison's work)."""
    from trajlens.errors import ConfigError

    try:
        text = index.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError([f"--report: {index}: not UTF-8 (the byte 0x{error.object[error.start]:02x} at byte "
                           f"{error.start}); expected a trajlens report index"]) from None
    except OSError as error:
        raise ConfigError([f"--report: {index}: cannot read it ({error.strerror or error})"]) from None
    if not is_report_index(text):
        raise ConfigError([f"--report: {index} is not a trajlens report index (write it with trajlens report)"])
    return text


def add_comparison(index: Path, anchor: str, title: str, section: str) -> None:
    """Put a comparison section into an existing ``index.html`` (replacing one of the same
    anchor), with a link to it in the page's navigation; the page is replaced whole, never
    left half written."""
    text = read_report_index(index)
    start, end = f"<!-- comparison {anchor} -->", f"<!-- /comparison {anchor} -->"
    block = f"{start}{section}{end}"
    link = f'<a href="#{html.escape(anchor)}">{html.escape(title)}</a>'
    if start in text:
        text = text[:text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        text = (text.replace(NO_COMPARISONS, "", 1).replace(COMPARISONS_END, block + COMPARISONS_END, 1)
                .replace(NAV_END, link + NAV_END, 1))
    partial = index.with_name(f".{index.name}.partial")
    partial.write_text(text)
    partial.replace(index)


def _side_by_side(store: Any, runs: list[tuple[str, str]]) -> str:
    """Headline numbers of every run, as (run id, split reported), in one table with intervals,
    each on the trajectories of the split its section reports."""
    from trajlens.compare.table import estimates
    from trajlens.run.partitions import scan_run_table

    rows = []
    for run_id, split in runs:
        if "trajectory_measures" not in store.tables():
            break
        trajectories = scan_run_table(store, run_id, "trajectories").filter(pl.col("split") == split).select(
            "trajectory_id", "reward", "resolved").collect()
        measures = store.table("trajectory_measures").filter(pl.col("run_id") == run_id).collect().join(
            trajectories, on="trajectory_id", how="inner")
        if measures.is_empty():
            continue
        found = estimates(["resolved", "ran_suite", "share:think"], measures)
        rate, suite, think = found["resolved"], found["ran_suite"], found["share:think"]
        rows.append({
            "run": run_id, "split": split, "trajectories": measures.height,
            "resolved": None if rate is None else rate.value,
            "resolved 95%": None if rate is None else f"{rate.low:.2f}-{rate.high:.2f}",
            "ran suite": None if suite is None else suite.value,
            "ran suite 95%": None if suite is None else f"{suite.low:.2f}-{suite.high:.2f}",
            "think share": None if think is None else think.value,
            "turns (median)": float(measures["num_turns"].median()),
            "model tokens (median)": measures["model_tokens"].median(),
            "format errors": int(measures["n_format_errors"].sum()),
        })
    if not rows:
        return ""
    return (f'<section id="{html.RUNS_ID}"><h2>Runs side by side</h2><p class="note">Each run on the split its section reports; '
            '95% intervals as <code>trajlens check</code> and <code>trajlens compare</code> give them. '
            'Compare two of them in full with <code>trajlens compare STORE A B</code>.</p>'
            + html.table(pl.DataFrame(rows)) + "</section>")

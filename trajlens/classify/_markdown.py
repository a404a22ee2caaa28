"""Markdown rendering of a :class:`~trajlens.classify.stages.StageReport`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from trajlens.intervals import PROPORTION_TEST
from trajlens.markdown import markdown_table

if TYPE_CHECKING:
    from trajlens.classify.stages import StageReport


def _number(value: float | None, kind: str) -> str:
    if value is None:
        return "–"
    if kind == "mean":
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return f"{100 * value:.1f}%"


def _cell(row: dict[str, Any], kind: str) -> str:
    value = _number(row["value"], kind)
    low, high = _number(row["ci_low"], kind), _number(row["ci_high"], kind)
    population = _number(row["population_value"], kind)
    flag = "" if row["population_in_ci"] in (True, None) else " ⚠"
    return f"{value} [{low}, {high}] · pop {population}{flag}"


def rates_table(rates: pl.DataFrame) -> list[str]:
    """The Markdown lines of one run's rates (rows of :attr:`StageReport.rates`): metrics down,
    stages across, each cell as :func:`_cell` writes it."""
    stages = rates.select("stage", "stage_index").unique().sort("stage_index")["stage"].to_list()
    rows = []
    for (metric,), part in rates.group_by("metric", maintain_order=True):
        by_stage = {r["stage"]: r for r in part.iter_rows(named=True)}
        kind = part["kind"][0]
        rows.append([f"`{metric}`", *(_cell(by_stage[s], kind) if s in by_stage else "–" for s in stages)])
    return markdown_table(["metric", *stages], rows)


def render(report: "StageReport") -> str:
    """Stages, then one rates table per run (metrics down, stages across), then changes."""
    lines = [
        "# Stage report",
        "",
        f"{report.n} trajectories sampled per stage (seed {report.seed}, without replacement; all of a stage "
        f"when it has fewer), {report.rules_text}. Each cell is the sample value with "
        "its 95% interval, then the value on the whole stage (pop); ⚠ marks a population value outside the "
        "sample's interval.",
        "",
        "## Stages",
        "",
    ]
    stage_rows = [
        [r["run_id"], r["stage"], f"{r['first_step']}–{r['last_step']}", str(r["n_population"]), str(r["n_sampled"])]
        for r in report.stages.iter_rows(named=True)
    ]
    lines += markdown_table(["run", "stage", "steps", "trajectories", "sampled"], stage_rows)
    alone = report.stages.filter(pl.len().over("run_id") == 1)
    for r in alone.iter_rows(named=True):
        steps = f"step {r['first_step']}" if r["first_step"] == r["last_step"] else f"steps {r['first_step']}–{r['last_step']}"
        lines += ["", f"{r['run_id']} has one stage ({steps}): no change from one stage to another to test."]
    for (run_id,), rates in report.rates.group_by("run_id", maintain_order=True):
        lines += ["", f"## Rates: {run_id}", "", *rates_table(rates)]
    changes = report.changes.filter(pl.col("comparison") == "first_to_last")
    if changes.height:
        lines += [
            "",
            "## First stage to last",
            "",
            f"{PROPORTION_TEST.capitalize()} test on the N={report.n} sample of each stage (the change over its "
            "standard error, read on Student's t with Welch-Satterthwaite degrees of freedom; p-values not adjusted "
            "for the number of metrics); Cohen's h: 0.2 small, 0.5 medium, 0.8 large. t and p are – where "
            "neither stage's sample varies (all 0%, all 100%, or one value throughout): no standard error to "
            "read the change against.",
            "",
        ]
        rows = [
            [r["run_id"], f"`{r['metric']}`", f"{r['from_stage']} → {r['to_stage']}",
             f"{100 * r['difference']:+.1f} pts" if r["difference"] is not None else "–",
             "–" if r["z"] is None else f"{r['z']:.2f}", "–" if r["p_value"] is None else f"{r['p_value']:.3g}",
             "–" if r["cohens_h"] is None else f"{r['cohens_h']:+.2f}",
             f"{100 * r['population_difference']:+.1f} pts" if r["population_difference"] is not None else "–"]
            for r in changes.iter_rows(named=True)
        ]
        lines += markdown_table(["run", "metric", "stages", "change (sample)", "t", "p", "h", "change (population)"], rows)
    return "\n".join(lines) + "\n"

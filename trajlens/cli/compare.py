"""``trajlens compare``: two runs, stages or estimator labels side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from trajlens.cli._app import app
from trajlens.cli.sample import parse_stages


@app.command()
def compare(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    a: Annotated[str, typer.Argument(help="Side A: RUN, RUN:STAGE (Q1..Q4 by default) or RUN:LABEL (an estimator label).")],
    b: Annotated[str, typer.Argument(help="Side B, written as side A.")],
    stages: Annotated[str, typer.Option("--stages", help="quartiles, early_late, or NAME:FIRST-LAST,... (the stages RUN:STAGE names).")] = "quartiles",
    output: Annotated[Optional[Path], typer.Option("--out", "-o", help="Folder for comparison.csv, comparison.md and comparison.html.")] = None,
    top: Annotated[int, typer.Option("--top", help="Largest differences said in words.")] = 5,
    advantages: Annotated[bool, typer.Option("--advantages/--no-advantages", help="Compare recomputed advantage statistics of the estimators both runs allow (recomputes what is not stored yet).")] = True,
    report: Annotated[Optional[Path], typer.Option("--report", help="A folder written by trajlens report: add this comparison to its index.html.")] = None,
) -> None:
    """Compare every behaviour measure and advantage statistic present on both sides.

    Each row: the two values with 95% intervals, the difference B - A with its interval, a
    two-proportion z or Welch t test, and an effect size (Cohen's h or d), sorted by effect size.

    Example: trajlens compare store sao-r6:Q4 sao-r7:Q4 --out out/compare/r6-r7
    """
    import polars as pl

    import trajlens
    from trajlens.compare import compare as compare_sides
    from trajlens.compare import describe
    from trajlens.report.compare_page import write_comparison

    handle = trajlens.open(store)
    table = compare_sides(handle, a, b, stages=parse_stages(stages), advantages=advantages)
    for sentence in describe(table, top):
        typer.echo(f"- {sentence}")
    with pl.Config(tbl_rows=20, tbl_cols=9, float_precision=3, fmt_str_lengths=40, tbl_width_chars=200):
        typer.echo(str(table.select("measure", "a_value", "b_value", "difference", "difference_low",
                                    "difference_high", "p_value", "effect_size", "significant")))
    if output is not None:
        written = write_comparison(table, output, top=top)
        typer.echo(f"wrote {', '.join(str(p) for p in written)}")
    if report is not None:
        from trajlens.report.html import comparison_section
        from trajlens.report.html_report import add_comparison

        anchor = "comparison-" + "-".join("".join(ch if ch.isalnum() else "-" for ch in side) for side in (a, b))
        add_comparison(report / "index.html", anchor, f"{b} vs {a}", comparison_section(anchor, table, describe(table, top)))
        typer.echo(f"added the comparison to {report / 'index.html'}")

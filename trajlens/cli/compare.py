"""``trajlens compare``: two runs, stages or estimator labels side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from trajlens.cli._app import app
from trajlens.cli._options import COUNT_MAX
from trajlens.cli.sample import parse_stages
from trajlens.errors import ConfigError


@app.command()
def compare(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    a: Annotated[str, typer.Argument(help="Side A: RUN, RUN:STAGE (Q1..Q4 by default) or RUN:LABEL (an estimator label).")],
    b: Annotated[str, typer.Argument(help="Side B, written as side A.")],
    stages: Annotated[str, typer.Option("--stages", help="quartiles, early_late, or NAME:FIRST-LAST,... (the stages RUN:STAGE names).")] = "quartiles",
    output: Annotated[Optional[Path], typer.Option("--out", "-o", help="Folder for comparison.csv, comparison.md and comparison.html.")] = None,
    top: Annotated[int, typer.Option("--top", min=0, max=COUNT_MAX, help="Largest differences said in words.")] = 5,
    advantages: Annotated[bool, typer.Option("--advantages/--no-advantages", help="Compare recomputed advantage statistics of the estimators both runs allow (recomputes what is not stored yet).")] = True,
    report: Annotated[Optional[Path], typer.Option("--report", help="A folder written by trajlens report: add this comparison to its index.html.")] = None,
    rows: Annotated[int, typer.Option("--rows", min=0, max=COUNT_MAX, help="Rows of the table printed here, largest effect first (all of them go to --out).")] = 10,
) -> None:
    """Compare every behaviour measure and advantage statistic present on both sides.

    Each row: the two values with 95% intervals, the difference B - A with its interval, a
    two-proportion t (rates, shares) or Welch's t (means), read on Student's t as the
    checks test stages, with its p-value adjusted over the table's behaviour rows or over its
    advantage rows (Benjamini-Hochberg, each family apart), and an effect size (Cohen's h or d), sorted by effect size.

    Example: trajlens compare store sao-r6:Q4 sao-r7:Q4 --out out/compare/r6-r7
    """
    import os

    import polars as pl

    import trajlens
    from trajlens.cli._output import DOCUMENT_SUFFIXES, TABLE_SUFFIXES, check_folder_output, console_table, folder_output
    from trajlens.compare import adjustment_note, describe, p_text, title
    from trajlens.compare import compare as compare_sides
    from trajlens.compare.table import ADVANTAGE_PREFIX
    from trajlens.report.compare_page import comparison_section, write_comparison
    from trajlens.report.html import comparison_anchor
    from trajlens.report.html_report import add_comparison, read_report_index

    if output is not None:
        if output.suffix.lower() in {*TABLE_SUFFIXES, *DOCUMENT_SUFFIXES} and not output.is_dir():
            raise ConfigError([f"--out {output}: names a file; compare writes a folder (comparison.csv, comparison.md "
                               "and comparison.html): name the folder"])
        check_folder_output(output, store=store)
    if report is not None:
        read_report_index(report / "index.html")  # before any work
    handle = trajlens.open(store)
    table = compare_sides(handle, a, b, stages=parse_stages(stages), advantages=advantages)
    typer.echo(title(table))
    for sentence in describe(table, top):
        typer.echo(f"- {sentence}")
    typer.echo(adjustment_note(table) + ".")
    if advantages and not table["measure"].str.starts_with(ADVANTAGE_PREFIX).any():
        typer.echo("no advantage rows: no estimator can be recomputed on both sides (`trajlens advantages` says what "
                   "each one needs)")
    names = [measure if not same else f"{measure} (= {same})" if len(measure) + len(same) < 55
             else f"{measure} (= {same.count(',') + 1} more, see --out)"
             for measure, same in zip(table["measure"], table["same_as"])]
    shown = table.select(
        pl.Series("measure", names, dtype=pl.String),
        pl.col("a_value").alias("A"), pl.col("b_value").alias("B"), pl.col("difference").alias("B - A"),
        *(pl.Series(name, [p_text(p) for p in table[column]], dtype=pl.String)
          for column, name in (("p_value", "p"), ("p_adjusted", "p adjusted"))),
        pl.col("effect_size").alias("effect"),
        pl.when(pl.col("significant")).then(pl.lit("*")).otherwise(pl.lit("")).alias("significant"))
    if rows > 0:  # --rows 0: the sentences alone, no table header without rows
        typer.echo(console_table(shown, rows=rows, right=("p", "p adjusted")))
    if output is not None:
        index = os.path.relpath(report / "index.html", output) if report is not None else None
        with folder_output(output) as partial:
            written = [output / path.name for path in write_comparison(table, partial, top=top, index=index)]
        typer.echo(f"full table of {table.height} rows in {', '.join(str(p) for p in written)}")
    elif table.height > rows:
        typer.echo(f"(--out FOLDER writes all {table.height} rows)")
    if report is not None:
        anchor = comparison_anchor("-".join("".join(ch if ch.isalnum() else "-" for ch in side) for side in (a, b)))
        add_comparison(report / "index.html", anchor, f"{b} vs {a}", comparison_section(anchor, table, describe(table, top)))
        typer.echo(f"added the comparison to {report / 'index.html'}")

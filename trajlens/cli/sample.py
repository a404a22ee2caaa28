"""``trajlens sample``: the stage-sampled behaviour report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from trajlens.cli._app import app
from trajlens.cli._options import COUNT_MAX
from trajlens.cli._output import OUTPUT_FORMATS, check_output, write_output
from trajlens.cli._progress import progress_bar


def parse_stages(stages: str):
    """``--stages``: ``quartiles``, ``early_late``, or ``NAME:FIRST-LAST,...`` (inclusive step ranges)."""
    from trajlens.classify.stages import staging

    return staging(stages, "--stages")


@app.command()
def sample(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    run: Annotated[str, typer.Option("--run", "-r", help="Run id.")],
    n: Annotated[int, typer.Option("--n", min=1, max=COUNT_MAX, help="Trajectories drawn per stage (all when a stage has fewer).")] = 80,
    seed: Annotated[int, typer.Option("--seed", min=0, max=COUNT_MAX, help="Seed of the draw.")] = 0,
    stages: Annotated[str, typer.Option("--stages", help="quartiles, early_late, or NAME:FIRST-LAST,... step ranges.")] = "quartiles",
    split: Annotated[Optional[str], typer.Option("--split", help="Trajectories of this split (default: train, else the split the run has).")] = None,
    output: Annotated[Optional[Path], typer.Option(
        "--out", "-o", help="Write the report to a .md or .html file, or its rates table (sample beside population) "
        "to a .csv, .json or .parquet file, instead of printing it.")] = None,
) -> None:
    """Stage-sampled behaviour report: N trajectories per stage, Wilson intervals, population beside.

    The classes are those `trajlens classify` saved (with its --tool-map); a run never classified
    is classified now with the shipped tool maps and saved, as `trajlens classify` would. The
    rates and changes are also saved as the store tables stage_rates and stage_changes.

    Example: trajlens sample store --run sao-r7 --n 80 --stages early:1-45,late:135-180 --out r7.md
    """
    import trajlens
    from trajlens.classify import stage_report
    from trajlens.engine.classify import measures_rules, run_measures
    from trajlens.run.splits import TRAIN_SPLIT, requested_split

    if output is not None:
        check_output(output, tuple(OUTPUT_FORMATS), store=store)
    handle = trajlens.open(store)
    handle.require_runs([run])
    chosen = requested_split(handle, run, split)
    if chosen != TRAIN_SPLIT and split is None:
        typer.echo(f"run {run!r} has no {TRAIN_SPLIT} split: sampling its {chosen} split", err=True)
    with progress_bar("sampling") as tick:
        # the measures `trajlens classify` saved (its tool map), else classified and saved now, as the report does
        measures = run_measures(handle, run)
        report = stage_report(handle, run_id=run, n=n, seed=seed, stages=parse_stages(stages), split=chosen,
                              measures=measures, rules_version=measures_rules(handle, run))
        tick(run)
    handle.write_derived("stage_rates", run, report.rates)
    handle.write_derived("stage_changes", run, report.changes)
    markdown = report.to_markdown()
    if output is None:
        typer.echo(markdown)
        return
    if OUTPUT_FORMATS[output.suffix.lower()].documents:
        write_output(output, document=markdown)
    else:
        write_output(output, frame=report.rates)
    typer.echo(f"wrote {output}")

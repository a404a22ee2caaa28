"""``trajlens channels``: the watch list of a multi-reward run, per step and reward channel."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from trajlens.cli._app import app
from trajlens.cli._options import COUNT_MAX
from trajlens.cli._output import TABLE_SUFFIXES, check_output, console_table, write_output


@app.command()
def channels(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    run: Annotated[str, typer.Option("--run", "-r", help="Run id.")],
    split: Annotated[Optional[str], typer.Option("--split", help="Trajectories of this split (default: train, else the split the run has).")] = None,
    output: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write every row to this file (" + ", ".join(TABLE_SUFFIXES) + ").")] = None,
    rows: Annotated[int, typer.Option("--rows", min=1, max=COUNT_MAX, help="Rows of the table printed.")] = 12,
) -> None:
    """Watch each reward channel of a multi-reward run, step by step.

    Per channel and step: rel_gain, dynamic weight, advantage std and kurtosis, dominant count,
    and the channels that move together (collinear: at the steps where the shipped check
    reward_channels_collinear fires).

    The channel's mean and std over the step's trajectories and its rel_gain (mean over groups
    of max - min) are the checks' measures; the advantage std, excess kurtosis and dominant
    count are those of each channel's own group-normalised advantages; the weight is the one
    gdpo_dynamic (EMA of each channel's advantage std, softmax, bounds) gives it at that step.
    A saturated channel shows as its rel_gain and weight falling. The dominant count is the
    argmax of the signed advantages, so a saturated channel, whose advantages sit at 0 while
    the others' go negative, can lead more often, not less.

    Example: trajlens channels store --run multireward --out multireward-channels.csv
    """
    import trajlens
    from trajlens.checks.channels import run_channel_watch, watch_lines
    from trajlens.run.splits import TRAIN_SPLIT, requested_split

    if output is not None:
        check_output(output, TABLE_SUFFIXES, store=store)
    handle = trajlens.open(store)
    handle.require_runs([run])
    chosen = requested_split(handle, run, split)
    watch = run_channel_watch(handle, run, chosen)
    if output is not None:
        write_output(output, frame=watch.table)  # the columns, without rows, when there is nothing to watch
    if watch.table.is_empty():
        named = ", ".join(watch.channels) or "none"
        typer.echo(f"run {run}: fewer than two reward channels on split {chosen!r} (channels: {named}); nothing to watch")
        if output is not None:
            typer.echo(f"wrote {output} (no rows)")
        return
    if chosen != TRAIN_SPLIT:
        typer.echo(f"run {run}: split {chosen!r}")
    typer.echo(console_table(watch.table, rows=rows))
    for line in watch_lines(watch):
        typer.echo(line)
    if output is not None:
        typer.echo(f"wrote {output}")

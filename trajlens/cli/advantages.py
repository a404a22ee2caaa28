"""``trajlens advantages``: recomputed advantages of a run, per-step batch statistics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from trajlens.cli._app import app
from trajlens.cli._progress import progress_bar
from trajlens.errors import ConfigError


def parse_options(pairs: list[str]) -> dict:
    """``name=value`` pairs; values are read as JSON (numbers, true/false, lists), else text."""
    options, problems = {}, []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            problems.append(f"--option {pair!r}: expected NAME=VALUE, such as gamma=0.99")
            continue
        try:
            options[name] = json.loads(value)
        except json.JSONDecodeError:
            options[name] = value
    if problems:
        raise ConfigError(problems)
    return options


@app.command()
def advantages(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    run: Annotated[str, typer.Option("--run", "-r", help="Run id.")],
    estimator: Annotated[str, typer.Option("--estimator", "-e", help="gae, reinforce, grpo, dr_grpo, grpo_batch_std, rloo, gdpo_verl, gdpo_trl, sum_then_normalize, gdpo_dynamic.")],
    option: Annotated[Optional[list[str]], typer.Option("--option", help="Estimator option NAME=VALUE (gamma=1.0, lam=0.95, whiten=false, ...).")] = None,
    label: Annotated[Optional[str], typer.Option("--label", help="Name of this recomputation in the advantage_batches table (default: the estimator).")] = None,
) -> None:
    """Recompute the advantages an estimator would have given a run, and print per-step batch stats.

    Saves the per-step statistics in the store table advantage_batches (one label per choice),
    so estimators can be compared with SQL.

    Example: trajlens advantages store --run sao-r6 --estimator gae --option whiten=false --label gae_raw
    """
    import polars as pl

    import trajlens
    from trajlens.estimators import sign_streaks
    from trajlens.report.advantages import labelled_diagnostics, save_advantage_batches

    handle = trajlens.open(store)
    options = parse_options(option or [])
    with progress_bar("recomputing") as tick:
        diagnostics = labelled_diagnostics(handle, run, estimator, label or estimator, **options)
        tick(estimator)
    save_advantage_batches(handle, run, diagnostics, keep_other_labels=True)
    shown = diagnostics.sort("step")
    streaks = sign_streaks(shown["step"].to_list(), shown["all_negative"].to_list(), shown["all_positive"].to_list())
    with pl.Config(tbl_rows=12, tbl_cols=-1, float_precision=4):
        typer.echo(str(shown.drop("run_id", "estimator")))
    typer.echo(f"all-negative batches: {list(streaks.negative_steps) or 'none'}; "
               f"all-positive batches: {list(streaks.positive_steps) or 'none'}")

"""``trajlens advantages``: recomputed (or identified) advantages of a run, per-step batch statistics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from trajlens.cli._app import app
from trajlens.cli._options import EngineOption, RayAddressOption, parse_options
from trajlens.cli._progress import progress_bar
from trajlens.errors import ConfigError
from trajlens.estimators.registry import ESTIMATOR_REGISTRY

_ESTIMATOR_HELP = "One of: " + ", ".join(ESTIMATOR_REGISTRY) + " (options and references: docs/estimators.md)."
_OPTION_HELP = "Estimator option NAME=VALUE, repeatable; values read as JSON. " + "; ".join(
    f"{spec.name}: {', '.join(option.name for option in spec.options)}"
    for spec in ESTIMATOR_REGISTRY.values() if spec.options
) + "."


@app.command()
def advantages(
    store: Annotated[str, typer.Argument(help="Store directory (with --engine ray, also a URI: file://..., s3://...).")],
    run: Annotated[str, typer.Option("--run", "-r", help="Run id.")],
    estimator: Annotated[Optional[str], typer.Option("--estimator", "-e", help=_ESTIMATOR_HELP)] = None,
    option: Annotated[Optional[list[str]], typer.Option("--option", help=_OPTION_HELP)] = None,
    label: Annotated[Optional[str], typer.Option("--label", help="Name of this recomputation in the advantage_batches table (default: the estimator).")] = None,
    identify: Annotated[bool, typer.Option("--identify", help="Recompute the run's logged advantages under every estimator and convention, and name the one that produced them.")] = False,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="With --identify: write the verdict and every candidate's fit to this JSON file.")] = None,
    engine: EngineOption = "local",
    ray_address: RayAddressOption = None,
) -> None:
    """Recompute the advantages an estimator would have given a run, and print per-step batch stats.

    Saves the per-step statistics in the store table advantage_batches (one label per choice),
    so estimators can be compared with SQL. With --identify, compares the advantages the trainer
    logged with every candidate estimator and convention instead, prints each one's max and
    median absolute difference, and names the closest with a verdict.

    Example: trajlens advantages store --run sao-r6 --estimator gae --option whiten=false --label gae_raw

    Example: trajlens advantages store --run sao-r6 --estimator gae --engine ray --ray-address auto
    """
    if identify and (engine != "local" or ray_address is not None):
        raise ConfigError(["--identify runs on the local engine; drop --engine and --ray-address"])
    if identify:
        _identify(store, run, json_out)
        return
    if estimator is None:
        raise ConfigError(["--estimator is required (or pass --identify)"])
    import polars as pl

    from trajlens.engine.advantages import recompute_diagnostics_on, save_advantage_batches_on
    from trajlens.engine.session import engine_session
    from trajlens.estimators import sign_streaks

    options = parse_options(option or [])
    with engine_session(engine, ray_address, store) as session, progress_bar("recomputing") as tick:
        session.require_runs([run])
        diagnostics = recompute_diagnostics_on(session.engine, session.location, run, estimator, label or estimator,
                                               options, progress=tick)
        save_advantage_batches_on(session.store, session.location, run, diagnostics)
    shown = diagnostics.sort("step")
    streaks = sign_streaks(shown["step"].to_list(), shown["all_negative"].to_list(), shown["all_positive"].to_list())
    with pl.Config(tbl_rows=12, tbl_cols=-1, float_precision=4):
        typer.echo(str(shown.drop("run_id", "estimator")))
    typer.echo(f"all-negative batches: {list(streaks.negative_steps) or 'none'}; "
               f"all-positive batches: {list(streaks.positive_steps) or 'none'}")


def _identify(store: Path, run: str, json_out: Path | None) -> None:
    import polars as pl

    import trajlens
    from trajlens.estimators.identify import identify_advantages
    from trajlens.run.advantages import read_run

    handle = trajlens.open(store)
    frames = read_run(handle, run)
    config = handle.sql("SELECT config FROM runs WHERE run_id = $run", {"run": run})["config"][0]
    with progress_bar("identifying") as tick:
        found = identify_advantages(frames.trajectories, frames.tokens, config=config)
        tick(run)
    table = pl.DataFrame([
        {"candidate": fit.candidate.label, "max_abs_diff": f"{fit.max_abs_diff:.2e}" if fit.n else None,
         "median_abs_diff": f"{fit.median_abs_diff:.2e}" if fit.n else None, "n": fit.n, "note": fit.error or ""}
        for fit in found.candidates
    ])
    # differences span orders of magnitude (1e-8 for a match, 1e-1 for a miss): scientific notation
    with pl.Config(tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=140):
        typer.echo(str(table))
    typer.echo(("match: " if found.matched else "") + found.verdict)
    if json_out is not None:
        json_out.write_text(json.dumps(found.to_dict(), indent=2) + "\n")
        typer.echo(f"wrote {json_out}")

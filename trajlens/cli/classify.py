"""``trajlens classify``: behaviour classes of every tool call, with an optional tool map."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated, Optional

import typer

from trajlens.cli._app import app
from trajlens.cli._options import EngineOption, RayAddressOption
from trajlens.cli._progress import progress_bar


@app.command()
def classify(
    store: Annotated[str, typer.Argument(help="Store directory (with --engine ray, also a URI: file://..., s3://...).")],
    run: Annotated[Optional[list[str]], typer.Option("--run", "-r", help="Run id (repeatable; default: every run).")] = None,
    tool_map: Annotated[
        Optional[Path],
        typer.Option("--tool-map", help="TOML tool map tried before the shipped maps (see docs/classify.md)."),
    ] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Print each call with its class and the rule (and map file) that decided it.")
    ] = False,
    engine: EngineOption = "local",
    ray_address: RayAddressOption = None,
) -> None:
    """Classify every tool call and save the call_classes, trajectory_measures and unknown_tools tables.

    All three become SQL views of the store (see queries/think_share_by_step.sql and
    queries/unknown_tools.sql). Tools no map knows stay `other` and are listed at the end.

    Example: trajlens classify store --run sao-r6 --tool-map my_tools.toml --explain

    Example: trajlens classify s3://bucket/store --engine ray --ray-address auto
    """
    from trajlens.classify.tool_map import resolve_tool_map
    from trajlens.engine.classify import classify_run_on
    from trajlens.engine.session import engine_session
    from trajlens.store.database import rewriting_commands

    resolved = resolve_tool_map(tool_map)
    results = []
    with engine_session(engine, ray_address, store) as session:
        runs = list(dict.fromkeys(run or session.run_ids()))  # a run named twice is classified once
        session.require_runs(runs)
        # every run's tables are published together, or (an error, Ctrl-C) none of them
        together = session.store.transaction() if session.store is not None else contextlib.nullcontext()
        with together, progress_bar("classifying", total=len(runs)) as tick:
            for run_id in runs:
                results.append(classify_run_on(session.engine, session.location, run_id, resolved,
                                               store=session.store, explain=explain))
                tick(run_id)
    if explain:
        _print_explanation(results)
    trajectories = sum(result.measures.height for result in results)
    typer.echo(f"classified {len(results)} run(s), {trajectories} trajectories; "
               "tables call_classes, trajectory_measures and unknown_tools")
    for result in results:
        if result.dropped:
            again = " and ".join(rewriting_commands(result.dropped, store, result.run_id))
            typer.echo(f"{result.run_id}: its classes changed: dropped its analyses {', '.join(result.dropped)}; "
                       f"run {again} again")
        if result.unknown.height:
            listed = ", ".join(f"{row['tool_name']} ({row['calls']})" for row in result.unknown.head(10).iter_rows(named=True))
            more = f" and {result.unknown.height - 10} more" if result.unknown.height > 10 else ""
            typer.echo(f"{result.run_id}: {result.unknown.height} unmapped tool(s) classed other: {listed}{more}")


def _print_explanation(results) -> None:
    """The explanation of every run (:mod:`trajlens.classify.explanation`), under one header."""
    from trajlens.classify.explanation import EXPLAIN_LINES_AT_ONCE, EXPLANATION_HEADER

    typer.echo("\t".join(EXPLANATION_HEADER))
    for result in results:
        for start in range(0, result.explanation.len(), EXPLAIN_LINES_AT_ONCE):
            typer.echo("\n".join(result.explanation.slice(start, EXPLAIN_LINES_AT_ONCE).to_list()))

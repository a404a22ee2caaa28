"""``trajlens view``: one trajectory as a web page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from trajlens.cli._app import app
from trajlens.cli._output import check_output, write_text_atomically


@app.command()
def view(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    run: Annotated[str, typer.Option("--run", "-r", help="Run id.")],
    trajectory: Annotated[str, typer.Option("--trajectory", "-t", help="Trajectory id, task id, or a unique end of an id.")],
    output: Annotated[Path, typer.Option("--out", "-o", help="The .html file to write.")],
    estimator: Annotated[Optional[str], typer.Option("--estimator", "-e", help="Estimator label for the credit colours (gae_raw, grpo, ...; default: the one the run trained with, else the first the run allows).")] = None,
    credit: Annotated[bool, typer.Option("--credit/--no-credit", help="Recompute advantages to colour each call's credit.")] = True,
) -> None:
    """Write one trajectory as a page: turns, classes, observations, reward and per-call credit.

    The page also carries the other trajectories of the same group (or step) with previous/next
    navigation, and a filter by class. It needs no network and opens from disk. The classes are
    those `trajlens classify` saved (with its --tool-map); a run never classified is classified
    now with the shipped tool maps and saved, as `trajlens classify` would.

    Example: trajlens view store --run sao-r6 --trajectory s0130-t0003 --out r6-130.html
    """
    import trajlens
    from trajlens.engine.classify import run_measures
    from trajlens.errors import ConfigError
    from trajlens.report.viewer import report_link, resolve_trajectory, run_credit, viewer_page

    if estimator is not None and not credit:
        raise ConfigError(["--estimator picks the credit colours; drop it, or drop --no-credit"])
    check_output(output, (".html",), store=store)
    handle = trajlens.open(store)
    handle.require_runs([run])
    trajectory, step = resolve_trajectory(handle, run, trajectory)
    run_measures(handle, run)  # the classes `trajlens classify` saved, else classified and saved now, as the report does
    advantages = None
    if credit:
        from trajlens.run.choices import report_advantages

        # which estimators the trajectory's own step allows: read that step's token arrays, not the run's
        choices = report_advantages(handle, run, compute=False, steps=[step]).choices
        advantages = run_credit(handle, run, estimator, steps=[step], choices=choices)
    output.parent.mkdir(parents=True, exist_ok=True)
    text = viewer_page(handle, run, trajectory, advantages, back=report_link(output, run))
    write_text_atomically(output, text)
    said = f" (credit under {advantages.label})" if advantages else \
        f" (no credit: no estimator the run allows can be recomputed on its step {step})" if credit else ""
    typer.echo(f"wrote {output}{said}")

"""``trajlens verify``: check a store's files against their recorded checksums, and repair."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from trajlens.cli._app import app


@app.command()
def verify(
    store: Annotated[Path, typer.Argument(help="Store directory written by `trajlens ingest`.")],
    run: Annotated[Optional[str], typer.Option("--run", "-r", help="Check only this run and its analyses.")] = None,
    repair: Annotated[bool, typer.Option("--repair", help="Repair what the store's records allow, and say what they do not.")] = False,
) -> None:
    """Check a store's files, views, interrupted writes and runs' sources.

    Every table file is checked against the SHA-256 recorded when it was written, the views
    against the files, and each run's source for whether it still exists unchanged since the
    ingest.

    Prints one line per problem and exits 1 when there is any. A source moved or changed is a
    note, not a problem: the store is whole without it, but a damaged run can be written again
    only from its unchanged source. With --repair: finishes an
    interrupted write, writes a damaged run again from its unchanged source, removes a damaged
    analysis table's part (naming the command that computes it again) and rebuilds the views;
    what cannot be repaired is said, and the exit status is 1 while a problem remains.

    Example: trajlens verify store

    Example: trajlens verify store --run sao-r6 --repair
    """
    from trajlens.store.verify import repair_store, verify_store

    verification = verify_store(store, run)
    for finding in verification.findings:
        typer.echo(finding.line(store))
    if not repair:
        if verification.ok:
            typer.echo(f"{store}: every file matches its checksum")
            raise typer.Exit(0)
        typer.echo(f"{len(verification.problems)} problem(s); `trajlens verify {store} --repair` repairs what it can",
                   err=True)
        raise typer.Exit(1)
    if verification.ok:
        typer.echo(f"{store}: nothing to repair")
        raise typer.Exit(0)
    done = repair_store(store, run)
    for line in done.done:
        typer.echo(f"repaired: {line}")
    for line in done.cannot:
        typer.echo(f"cannot repair: {line}")
    after = verify_store(store, run)
    raise typer.Exit(0 if after.ok else 1)

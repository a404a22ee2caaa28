"""``trajlens ingest``: load logs into a store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from trajlens.cli._app import app
from trajlens.cli._output import standard_output_problem
from trajlens.cli._progress import progress_bar
from trajlens.errors import ConfigError


@app.command()
def ingest(
    sources: Annotated[list[Path], typer.Argument(help="Log files or folders: Parquet run folders, verl dumps, agent logs, metrics JSONL/CSV, TensorBoard event files.")],
    store: Annotated[Path, typer.Option("--store", "-s", help="Store directory to write (created if missing; never inside an input).")],
    lenient: Annotated[bool, typer.Option("--lenient", help="Skip bad records and list them, instead of stopping at the first.")] = False,
    run: Annotated[Optional[str], typer.Option("--run", "-r", help="Run id for a single source (default: the run id the source records, as a Parquet run folder does in its runs table; else from its file or folder name).")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Let a run replace a run of the same id that came from a different source; read every source again, even one unchanged since it was ingested.")] = False,
    limit: Annotated[Optional[list[str]], typer.Option("--limit", help="Raise or lower a reading limit, NAME=VALUE: depth, field_mb, record_mb, regex_seconds (see docs/limits.md).")] = None,
) -> None:
    """Load trajectory logs into a store (Parquet + a DuckDB database of views).

    All runs of one call are published together or not at all; on any error, or Ctrl-C, the
    store is left as it was. Ingesting an unchanged source again changes nothing and keeps its
    analyses (a run directory whose files kept their sizes and times is not read again); a
    changed one replaces its run and drops its analyses, and says so. A run id the store already
    holds for another source is refused unless --replace; when that source no longer exists (a
    moved folder), the same content from the new source is the same run, kept with its analyses.
    Input files are never modified.

    Example: trajlens ingest sample_data/sao-r6 metrics.jsonl --store store
    """
    from trajlens.ingest import Limits
    from trajlens.ingest import ingest as ingest_sources
    from trajlens.store.writer import check_run_id

    if (refused := standard_output_problem(store, "--store", "a folder")) is not None:
        raise ConfigError([refused])
    if run is not None:
        check_run_id(run, "--run")
    limits = Limits.parse(limit or [])
    with progress_bar("ingesting") as tick:
        result = ingest_sources(sources, store, strict=not lenient, run_id=run, progress=tick, replace=replace,
                                limits=limits)
    for problem in result.problems:
        typer.echo(f"{problem.kind}: {problem.message}", err=True)
    for note in result.notes:
        typer.echo(note, err=True)
    skipped = f"; skipped {len(result.skipped)} (each named above)" if result.skipped else ""
    written = [run_id for run_id in result.run_ids if run_id not in result.unchanged]
    kept = f"; {len(result.unchanged)} unchanged: {', '.join(result.unchanged)}" if result.unchanged else ""
    typer.echo(f"ingested {len(written)} run(s) into {store}: {', '.join(written) or 'none new'}{kept}{skipped}")

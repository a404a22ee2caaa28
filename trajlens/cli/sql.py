"""``trajlens sql``: run SQL, or a saved query from ``queries/``, over a store."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from trajlens.cli._app import app
from trajlens.cli._output import check_output, write_atomically
from trajlens.errors import ConfigError, InputError

WRITERS: dict[str, str] = {".csv": "write_csv", ".parquet": "write_parquet", ".json": "write_json"}
_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")


def parse_params(pairs: list[str]) -> dict[str, Any]:
    """``k=v`` pairs to bound parameters; numbers become numbers, the rest stay text."""
    params: dict[str, Any] = {}
    problems = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            problems.append(f"--param {pair!r}: expected NAME=VALUE")
            continue
        params[name] = int(value) if _INT.match(value) else float(value) if _FLOAT.match(value) else value
    if problems:
        raise ConfigError(problems)
    return params


def read_query(query: str) -> str:
    path = Path(query)
    if query.endswith(".sql"):
        if not path.is_file():
            raise InputError(query, "no such query file")
        return path.read_text()
    return query


@app.command()
def sql(
    store: Annotated[Path, typer.Argument(help="Store directory written by `trajlens ingest`.")],
    query: Annotated[str, typer.Argument(help="A SQL query, or a path to a .sql file such as queries/think_share_by_step.sql.")],
    param: Annotated[Optional[list[str]], typer.Option("--param", "-p", help="Bind a parameter: NAME=VALUE (used as $NAME in the query).")] = None,
    output: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write the result to a .csv, .parquet or .json file instead of printing it.")] = None,
    rows: Annotated[int, typer.Option("--rows", help="Rows to print.")] = 40,
) -> None:
    """Run SQL over a store's views: runs, trajectories, tool_calls, tokens, step_metrics.

    Parameters are bound by DuckDB, never pasted into the query text.

    Example: trajlens sql store queries/think_share_by_step.sql --param run_id=sao-r6
    """
    import polars as pl

    import trajlens

    if output is not None:
        check_output(output, tuple(WRITERS))
    frame = trajlens.open(store).sql(read_query(query), parse_params(param or []))
    if output is not None:
        write_atomically(output, lambda partial: getattr(frame, WRITERS[output.suffix.lower()])(partial))
        typer.echo(f"wrote {frame.height} rows to {output}")
        return
    with pl.Config(tbl_rows=rows, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=160):
        typer.echo(str(frame))


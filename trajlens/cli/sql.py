"""``trajlens sql``: run a read-only query, or a saved query, over a store."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

if TYPE_CHECKING:
    import polars as pl

from trajlens.cli._app import app
from trajlens.cli._options import COUNT_MAX, parse_params
from trajlens.cli._output import TABLE_SUFFIXES, check_output, write_table_batches
from trajlens.errors import ConfigError, InputError, QueryError

# Saved queries ship inside the package (trajlens/queries is the repository's queries/).
SAVED_QUERIES = Path(__file__).resolve().parents[1] / "queries"
MAX_QUERY_BYTES = 1 << 20
SAVED_QUERY_NAME = re.compile(r"[\w-]+")
"""A query of one such word that does not parse as SQL (as CHECKPOINT would) names a saved query."""


def saved_queries() -> dict[str, Path]:
    """Saved query name (file stem) -> file, from the installed package."""
    if not SAVED_QUERIES.is_dir():
        return {}
    return {path.stem: path for path in sorted(SAVED_QUERIES.glob("*.sql"))}


def read_query(query: str) -> str:
    """SQL text: the query itself, a ``.sql`` file, or the name of a saved query (a one-word
    query that names none is refused, listing them)."""
    saved = saved_queries()
    if query in saved:
        return saved[query].read_text(encoding="utf-8")
    if SAVED_QUERY_NAME.fullmatch(query) and not _parses(query):
        raise ConfigError([f"unknown saved query {query}; known: {', '.join(saved) or 'none'}"])
    if not query.endswith(".sql"):
        return query
    path = Path(query)
    if not path.is_file():
        if path.exists():
            raise InputError(query, expected="a query file", found="a folder" if path.is_dir() else "not a regular file")
        hint = f" (saved queries: {', '.join(saved)})" if saved else ""
        raise InputError(query, "no such query file" + hint)
    if path.stat().st_size > MAX_QUERY_BYTES:
        raise InputError(query, expected=f"a query file under {MAX_QUERY_BYTES} bytes",
                         found=f"{path.stat().st_size} bytes")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise InputError(query, expected="UTF-8 text", found=f"byte {error.start} is not UTF-8") from None


def _parses(query: str) -> bool:
    import duckdb

    try:
        duckdb.extract_statements(query)
    except duckdb.Error:
        return False
    return True


@app.command()
def sql(
    store: Annotated[Path, typer.Argument(help="Store directory written by `trajlens ingest`.")],
    query: Annotated[str, typer.Argument(help="A SELECT query, a .sql file, or a saved query's name such as think_share_by_step.")],
    param: Annotated[Optional[list[str]], typer.Option("--param", "-p", help="Bind $NAME: NAME=VALUE binds text; NAME:TYPE=VALUE with TYPE int, float, bool, json, or text (or str).")] = None,
    output: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write the result to a .csv, .json, .parquet, .md or .html file instead of printing it.")] = None,
    rows: Annotated[int, typer.Option("--rows", min=0, max=COUNT_MAX, help="Rows to print.")] = 40,
) -> None:
    """Run a read-only SQL query over a store's tables and views.

    The tables: runs, trajectories, tool_calls, tokens, step_metrics, the measured_splits view
    (each run's measured split), and the analysis tables once computed.

    A query reads the store and nothing else: only a statement that reads is accepted (SELECT,
    and DESCRIBE or EXPLAIN, which read too), and files outside the tables cannot be read or
    written. Parameters are bound by DuckDB, never pasted into the text.

    Example (a saved query over classify's tables): trajlens sql store think_share_by_step --param run_id=sao-r6

    Example: trajlens sql store 'SELECT * FROM trajectories WHERE step > $s' --param s:int=100 --out late.csv
    """
    import polars as pl

    import trajlens

    if output is not None:
        check_output(output, TABLE_SUFFIXES, store=store)
    text = read_query(query)
    params = parse_params(param or [])
    # the result a batch of rows at a time: written whole, or printed in part, never held whole
    batches = trajlens.open(store).sql_batches(text, params)
    try:
        if output is not None:
            written = write_table_batches(output, batches)
            typer.echo(f"wrote {written} rows to {output}")
            return
        head, total = _head(batches, rows)
    except QueryError as error:
        if text == query:
            raise
        raise QueryError(f"{query}: {error}") from None  # the file or saved query whose text failed
    with pl.Config(tbl_rows=rows, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=160, tbl_hide_dataframe_shape=True):
        typer.echo(f"shape: ({total}, {head.width})\n{head}")
    if total > head.height:
        typer.echo(f"the first {head.height} of {total:,} rows; --rows N prints more, --out FILE writes them all")


def _head(batches: Iterator["pl.DataFrame"], rows: int) -> tuple["pl.DataFrame", int]:
    """The first ``rows`` rows of a result given in batches, and how many rows it has."""
    import polars as pl

    kept: list[pl.DataFrame] = []
    total = 0
    for batch in batches:
        if total < rows or not kept:
            kept.append(batch.head(max(rows - total, 0)))
        total += batch.height
    return pl.concat(kept), total

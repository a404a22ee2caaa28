"""``trajlens shell``: an interactive SQL prompt on a store, with the library's own DuckDB.

It needs no DuckDB command-line tool (whose version may not read the store's database file)
and queries exactly as ``trajlens sql`` does: read-only, the store's tables and nothing else.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Callable, Iterable, Iterator, Optional

import typer

from trajlens.cli._app import app
from trajlens.cli._options import COUNT_MAX
from trajlens.errors import ConfigError, TrajlensError

PROMPT = "trajlens> "
CONTINUATION = "     ...> "
HELP = ("End each statement with ';'. Dot commands: .tables (list the tables), .schema TABLE "
        "(its columns), .help, .quit")


def statements_from_lines(lines: Iterable[str], on_dot: Callable[[str], bool]) -> Iterator[str]:
    """Group input lines into SQL statements; dot commands run as they come.

    A line ending in ';' ends the statements before it, split as DuckDB's parser splits them (a
    ';' inside a string or a comment ends nothing; several statements may share a line), unless
    a string or comment is still open. ``on_dot`` handles a dot command and returns False to
    stop (``.quit``).
    """
    buffer: list[str] = []
    for line in lines:
        if not buffer and line.strip().startswith("."):
            if not on_dot(line.strip()):
                return
            continue
        buffer.append(line)
        if line.rstrip().endswith(";"):
            statements = _statements("\n".join(buffer))
            if statements is not None:
                buffer = []
                yield from statements
    rest = "\n".join(buffer)
    if rest.strip():
        statements = _statements(rest)  # None: a string left open, for the query to name
        yield from [rest.strip()] if statements is None else statements


def _utf8_lines(lines: Iterable[str]) -> Iterator[str]:
    """``lines`` as given, refusing one that holds a byte that is not UTF-8 (read from the
    terminal or the command line as an escaped byte), as ``trajlens sql`` refuses a query file."""
    for number, line in enumerate(lines, 1):
        try:
            line.encode("utf-8")
        except UnicodeEncodeError as error:
            byte = ord(line[error.start]) & 0xFF
            raise ConfigError([f"shell: line {number}: expected UTF-8 text, found the byte 0x{byte:02x} at "
                               f"character {error.start + 1}"]) from None
        yield line


def _statements(text: str) -> list[str] | None:
    """The statements of ``text`` (comments alone are none); None while a string, a quoted name
    or a comment is still open; the whole text as one statement when it does not parse, for the
    query to say why."""
    import duckdb

    try:
        return [statement.query.strip() for statement in duckdb.extract_statements(text)]
    except duckdb.ParserException as error:
        return None if "unterminated" in str(error) else [text.strip()]


def _interactive_lines() -> Iterator[str]:
    try:
        import readline  # noqa: F401  (line editing and history where available)
    except ImportError:
        pass
    first = True
    while True:
        try:
            yield input(PROMPT if first else CONTINUATION)
        except EOFError:
            typer.echo("", err=True)
            return
        except KeyboardInterrupt:  # Ctrl-C drops the statement being typed, as other shells do
            typer.echo("", err=True)
            first = True
            continue
        first = False


@app.command()
def shell(
    store: Annotated[Path, typer.Argument(help="Store directory written by `trajlens ingest`.")],
    command: Annotated[Optional[str], typer.Option("--command", "-c", help="Run this SQL and exit.")] = None,
    rows: Annotated[int, typer.Option("--rows", min=0, max=COUNT_MAX, help="Rows to print per result.")] = 40,
) -> None:
    """An SQL prompt on a store's tables, using the DuckDB that trajlens ships with.

    Read-only, like `trajlens sql`. Statements end with ';'. Reads statements from standard
    input when it is not a terminal, and exits 1 if any of them (or a dot command) failed.

    Example: trajlens shell out/store

    Example: echo "SELECT run_id, count(*) FROM trajectories GROUP BY 1;" | trajlens shell out/store
    """
    import duckdb
    import polars as pl

    import trajlens

    handle = trajlens.open(store)
    failures = 0

    def on_dot(line: str) -> bool:
        nonlocal failures
        name, _, argument = line.partition(" ")
        if name in (".quit", ".exit"):
            return False
        if name == ".tables":
            typer.echo("  ".join(handle.queryable()))
        elif name == ".schema" and argument.strip():
            run(f"DESCRIBE {_identifier(argument.strip())}")
        elif name == ".help":
            typer.echo(HELP)
        else:
            failures += 1
            problem = ".schema needs a table name" if name == ".schema" else f"unknown dot command {name}"
            typer.echo(f"error: {problem}. {HELP}", err=True)
        return True

    def run(text: str) -> None:
        nonlocal failures
        try:
            frame = handle.sql(text)
        except TrajlensError as error:
            failures += 1
            typer.echo(f"error: {error}", err=True)
            return
        with pl.Config(tbl_rows=rows, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=160):
            typer.echo(str(frame))

    if command is not None:
        lines: Iterable[str] = command.splitlines()
    elif sys.stdin is None:
        raise ConfigError(["shell: standard input is closed; give the statements with -c SQL or on standard input"])
    elif sys.stdin.isatty():
        typer.echo(f"trajlens shell on {store} (DuckDB {duckdb.__version__}, read-only). {HELP}", err=True)
        lines = _interactive_lines()
    else:
        lines = (line.rstrip("\n") for line in sys.stdin)
    for statement in statements_from_lines(_utf8_lines(lines), on_dot):
        run(statement)
    if failures:
        raise typer.Exit(1)


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'

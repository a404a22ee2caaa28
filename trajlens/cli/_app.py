"""The typer application and the error boundary shared by every command.

Exit statuses: 0 success; 1 a user error (:class:`trajlens.errors.TrajlensError`, an
operating-system error such as a full disk or a read-only folder, a missing optional
dependency), printed as one line on stderr without a traceback; 2 a usage error; 130 an
interrupt (Ctrl-C), after which every store is as it was before the command. A command whose
1 is a result (``check``: a check failed) exits 2 on every error instead
(:data:`RESULT_COMMANDS`), so a pipeline never reads a damaged store as a failed check.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperCommand

from trajlens.cli._once import OnceOptionsCommand
from trajlens.errors import CommandImportError, MissingDependencyError, TrajlensError
from trajlens.interrupts import one_interrupt_per_ctrl_c

app = typer.Typer(
    name="trajlens",
    help="See why an RL run of a coding agent drifted: load trajectories, classify tool calls, "
    "recompute advantages, and query runs with SQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Modules that register commands on ``app`` when imported; each is named after its command(s).
COMMAND_MODULES: tuple[str, ...] = (
    "trajlens.cli.ingest",
    "trajlens.cli.sql",
    "trajlens.cli.sample",
    "trajlens.cli.synth",
    "trajlens.cli.advantages",
    "trajlens.cli.channels",
    "trajlens.cli.shell",
    "trajlens.cli.classify",
    "trajlens.cli.check",
    "trajlens.cli.attribute",
    "trajlens.cli.report",
    "trajlens.cli.compare",
    "trajlens.cli.view",
    "trajlens.cli.verify",
)

# Import names whose distribution (the name to pip install) differs.
DISTRIBUTIONS: dict[str, str] = {"yaml": "pyyaml"}
INTERRUPTED = 130


def _show_version(value: bool) -> None:
    if value:
        from trajlens import __version__

        typer.echo(f"trajlens {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[Optional[bool], typer.Option("--version", help="Print the version and exit.",
                                                    callback=_show_version, is_eager=True)] = None,
) -> None:
    """See why an RL run of a coding agent drifted: load trajectories, classify tool calls,
    recompute advantages, and query runs with SQL."""


_registered = False


def _register() -> None:
    """Import every command module; one that fails makes the CLI fail, naming it."""
    global _registered
    if _registered:
        return
    for module in COMMAND_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            missing = _missing_distribution(error)
            if missing:
                raise MissingDependencyError(missing, f"the trajlens command line ({module})") from None
            raise CommandImportError(module, error) from error
        except Exception as error:
            raise CommandImportError(module, error) from error
    for command in app.registered_commands:
        if command.help is None and command.callback is not None and command.callback.__doc__:
            command.help = flowing_help(inspect.getdoc(command.callback) or "")
        if command.cls in (None, TyperCommand):  # an option of one value given twice is refused
            command.cls = OnceOptionsCommand
    _registered = True


_LIST_ITEM = re.compile(r"^(?:[-*]|\d+\.)\s")


def flowing_help(doc: str) -> str:
    """A command's docstring as its ``--help`` shows it: each paragraph one line, which the
    terminal wraps at its width (Typer keeps a docstring's line breaks, so a paragraph wrapped
    for the source came out ragged on a narrow terminal). List items stay lines of their own."""
    paragraphs = []
    for paragraph in doc.split("\n\n"):
        lines: list[str] = []
        for line in paragraph.splitlines():
            line = line.strip()
            if lines and not _LIST_ITEM.match(line):
                lines[-1] += " " + line
            else:
                lines.append(line)
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


def _missing_distribution(error: ModuleNotFoundError) -> str | None:
    """The pip name of a missing third-party package, or None for a missing trajlens module."""
    top = (error.name or "").split(".")[0]
    if not top or top == "trajlens":
        return None
    return DISTRIBUTIONS.get(top, top)


def _command_name(argv: list[str] | None) -> str:
    args = sys.argv[1:] if argv is None else argv
    return next((arg for arg in args if not arg.startswith("-")), "trajlens")


RESULT_COMMANDS: frozenset[str] = frozenset({"check"})
"""Commands whose exit status 1 is a result, not an error: their errors exit 2."""


def _error_status(argv: list[str] | None) -> int:
    return 2 if _command_name(argv) in RESULT_COMMANDS else 1


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit status (see the module docstring)."""
    try:
        _register()
        with one_interrupt_per_ctrl_c():  # a clean-up an interrupt runs is not cut short by it
            status = app(args=argv, standalone_mode=False)
    except TrajlensError as error:
        typer.echo(f"error: {error}", err=True)
        return _error_status(argv)
    except typer.Exit as stop:
        return stop.exit_code
    except typer.Abort:
        typer.echo("aborted", err=True)
        return _error_status(argv)
    except KeyboardInterrupt:
        status = INTERRUPTED
    except ModuleNotFoundError as error:
        missing = _missing_distribution(error)
        if missing is None:
            raise
        typer.echo(f"error: {MissingDependencyError(missing, f'trajlens {_command_name(argv)}')}", err=True)
        return _error_status(argv)
    except OSError as error:
        typer.echo(f"error: {_damaged_source(argv) or _os_error_line(error)}", err=True)
        return _error_status(argv)
    except Exception as error:
        # Usage errors (a missing argument, a bad option value) come from the click that typer
        # bundles; recognise them by their interface rather than by importing click.
        if callable(getattr(error, "format_message", None)) and isinstance(getattr(error, "exit_code", None), int):
            line = _usage_line(error, argv)
            if line:  # none after the help a command line without arguments prints
                typer.echo(f"error: {line}", err=True)
            return error.exit_code
        if _query_interrupted(error):
            typer.echo("interrupted", err=True)
            return INTERRUPTED
        damaged = _damaged_source(argv)
        if damaged is None:
            raise
        typer.echo(f"error: {damaged}", err=True)
        return _error_status(argv)
    if status == INTERRUPTED:
        typer.echo("interrupted", err=True)
        return INTERRUPTED
    return status if isinstance(status, int) else 0


def _usage_line(error: Any, argv: list[str] | None) -> str:
    """A usage error (click's, through typer) in one line, with where the command's help is:
    ``Invalid value for '--n': ... (see trajlens sample --help)``; empty when it has no message.
    Click prints three lines and the usage."""
    message = " ".join(str(error.format_message()).split()).rstrip(".")
    if not message:
        return ""
    context = getattr(error, "ctx", None)
    if context is not None:
        command = f"trajlens {context.info_name}" if context.parent is not None else "trajlens"
    else:  # an option's missing value is told before the command's context exists
        name = _command_name(argv)
        command = f"trajlens {name}" if name in {c.name or c.callback.__name__ for c in app.registered_commands
                                                 if c.callback is not None} else "trajlens"
    return f"{message} (see {command} --help)"


def _query_interrupted(error: Exception) -> bool:
    """Whether ``error`` is how DuckDB ends a query that Ctrl-C interrupted: its
    ``InterruptException``, or, from a query whose result was being fetched, a ``RuntimeError``."""
    duckdb = sys.modules.get("duckdb")
    if duckdb is None:
        return False
    return isinstance(error, duckdb.InterruptException) or (
        type(error) is RuntimeError and str(error).startswith("Query interrupted"))


def _damaged_source(argv: list[str] | None) -> str | None:
    """After an unexpected error: when an argument is a store, or a run directory read in place
    (a trainer's), with a file that fails to read (cut short, deleted, not Parquet), the line
    naming that file (for a store, with ``trajlens verify``)."""
    if "trajlens.store.layout" not in sys.modules:
        return None  # no store or run directory was opened
    from pathlib import Path

    from trajlens.store.damage import first_damaged_file
    from trajlens.store.handle import is_store
    from trajlens.store.integrity import parquet_problem, run_files
    from trajlens.store.layout import is_run_dir

    for arg in sys.argv[1:] if argv is None else argv:
        path = Path(arg)
        if arg.startswith("-") or not path.is_dir():
            continue
        if is_store(path):
            damaged = first_damaged_file(path, deep=True)
            if damaged is not None:
                return str(damaged)
        elif is_run_dir(path):
            for file in run_files(path):
                reason = parquet_problem(file)
                if reason is not None:
                    return f"{file}: {reason} (a table file of the run directory {path})"
    return None


def _os_error_line(error: OSError) -> str:
    text = str(error).strip()
    reason = error.strerror or (text.splitlines()[0] if text else type(error).__name__)
    return f"{error.filename}: {reason}" if error.filename else reason


def run() -> None:
    from trajlens.cli._memory import arrow_on_malloc, keep_freed_memory

    keep_freed_memory()
    arrow_on_malloc()
    sys.exit(main())

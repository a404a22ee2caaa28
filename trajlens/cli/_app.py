"""The typer application and the error boundary shared by every command."""

from __future__ import annotations

import importlib
import sys

import typer

from trajlens.errors import TrajlensError

app = typer.Typer(
    name="trajlens",
    help="See why an RL run of a coding agent drifted: load trajectories, classify tool calls, "
    "recompute advantages, and query runs with SQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Modules that register commands on ``app`` when imported.
COMMAND_MODULES: tuple[str, ...] = (
    "trajlens.cli.ingest",
    "trajlens.cli.sql",
    "trajlens.cli.sample",
    "trajlens.cli.synth",
    "trajlens.cli.advantages",
    "trajlens.cli.report",
    "trajlens.cli.compare",
    "trajlens.cli.view",
)


def _register() -> None:
    for module in COMMAND_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name != module:
                raise


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; a :class:`TrajlensError` becomes one line on stderr and exit status 1."""
    _register()
    try:
        app(args=argv, standalone_mode=False)
    except TrajlensError as error:
        typer.echo(f"error: {error}", err=True)
        return 1
    except typer.Exit as stop:
        return stop.exit_code
    except typer.Abort:
        typer.echo("aborted", err=True)
        return 1
    except Exception as error:
        # Usage errors (a missing argument, a bad option value) come from the click that typer
        # bundles; recognise them by their interface rather than by importing click.
        if callable(getattr(error, "show", None)) and isinstance(getattr(error, "exit_code", None), int):
            error.show()
            return error.exit_code
        raise
    return 0


def run() -> None:
    sys.exit(main())

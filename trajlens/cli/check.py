"""``trajlens check``: evaluate habit regression checks on a run, after the fact or live."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from trajlens.cli._app import app
from trajlens.cli._output import distinct_outputs, output_problems, overwrites_input, write_text_atomically
from trajlens.errors import ConfigError, InputError, TrajlensError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
POLL_MAX = 86_400.0
"""The longest --poll, in seconds (a day); far longer ones overflow ``time.sleep``."""


@app.command()
def check(
    source: Annotated[Optional[Path], typer.Argument(
        help="A store (with --run), a run directory, verl dumps, a metrics JSONL/CSV file or TensorBoard event files.")] = None,
    run: Annotated[Optional[str], typer.Option("--run", "-r", help="Run id (needed for a store of several runs).")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="TOML file of checks (default: the shipped checks).")] = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", help="Write JUnit XML here (one test case per check).")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Write the results as JSON here.")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail the run too (exit 1).")] = False,
    print_defaults: Annotated[bool, typer.Option("--print-defaults", help="Print the shipped checks (TOML) and exit.")] = False,
    watch: Annotated[bool, typer.Option("--watch", help="Follow a run directory a trainer is still writing, until --until-step or --timeout (one is needed).")] = False,
    fail_fast: Annotated[bool, typer.Option("--fail-fast", help="With --watch: exit 1 at the first error-level failure.")] = False,
    until_step: Annotated[Optional[int], typer.Option("--until-step", help="With --watch: stop after this step.")] = None,
    timeout: Annotated[Optional[float], typer.Option("--timeout", help="With --watch: stop after this many seconds (once the steps complete at the last look are checked).")] = None,
    poll: Annotated[float, typer.Option("--poll", help="With --watch: seconds between looks at the directory.")] = 1.0,
    settle: Annotated[float, typer.Option("--settle", help="With --watch: seconds the newest file must stay unchanged to count as complete.")] = 5.0,
) -> None:
    """Evaluate declared checks on a run; exit 0 when all hold, 1 when one fails, 2 on a usage or input error.

    Exit 2 also when --junit or --json cannot be written (or would write over SOURCE), when
    every check is skipped (a run without steps, a metrics file without the scalars the checks
    read), and when a --watch ends before any complete step was seen: nothing was checked, so
    nothing passed.

    Prints a table (check, status, steps where it fired, evidence); --junit and --json write the
    same results for CI. On a store, the classified calls `trajlens classify` saved are read rather
    than classified again. With --watch, each new complete step is read once and checked, and a
    line is printed per step and per newly fired check.

    Example: trajlens check sample_data/sao-r6 --junit checks.xml

    Example: trajlens check runs/live --watch --fail-fast --until-step 200 --timeout 36000
    """
    from trajlens.checks.spec import DEFAULTS_FILE

    if print_defaults:
        ignored = _with_print_defaults(source=source, run=run, config=config, junit=junit, json=json_out,
                                       strict=strict, watch=watch, fail_fast=fail_fast, until_step=until_step,
                                       timeout=timeout)
        if ignored:
            typer.echo(f"error: --print-defaults prints the shipped checks and takes nothing else: "
                       f"drop {', '.join(ignored)}", err=True)
            raise typer.Exit(EXIT_USAGE)
        typer.echo(DEFAULTS_FILE.read_text(), nl=False)
        return
    try:
        code = _run(source, run, config, junit, json_out, strict, watch, fail_fast, until_step, timeout, poll, settle)
    except TrajlensError as error:
        # one line, as every command prints an error: a ConfigError joins its problems with "; "
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    raise typer.Exit(code)


def _with_print_defaults(**given: object) -> list[str]:
    """What was given beside --print-defaults (SOURCE, then the options by name), which it would ignore."""
    return [("SOURCE" if name == "source" else f"--{name.replace('_', '-')}")
            for name, value in given.items() if value not in (None, False)]


def _run(source, run, config, junit, json_out, strict, watch, fail_fast, until_step, timeout, poll, settle) -> int:
    from trajlens.checks import output
    from trajlens.checks.evaluate import check_run
    from trajlens.checks.spec import default_checks, load_checks

    problems = []
    if source is None:
        problems.append("SOURCE: expected a store, run directory, verl dumps, metrics file or TensorBoard event files, found nothing")
    for path, flag in ((junit, "--junit"), (json_out, "--json")):
        if path is not None:
            problems += output_problems(path, flag=flag, store=source)  # a store's: not into its runs' inputs
            for read in (source, config):
                problems += overwrites_input(path, read, flag=flag) if read is not None else []
    problems += distinct_outputs({"--junit": junit, "--json": json_out})
    if not watch and (fail_fast or until_step is not None or timeout is not None):
        problems.append("--fail-fast, --until-step and --timeout need --watch")
    if watch and until_step is None and timeout is None:
        problems.append("--watch needs --until-step or --timeout to end")
    problems += _watch_option_problems(until_step, timeout, poll, settle)
    if watch and source is not None:
        from trajlens.store.handle import is_store, store_holding

        if is_store(source):
            problems.append(f"--watch follows a run directory a trainer is still writing; {source} is a store, whose "
                            "runs are ingested whole: check it without --watch")
        elif (holding := store_holding(source)) is not None:
            problems.append(f"--watch follows a run directory a trainer is still writing; {source} is among the files "
                            f"of the store {holding}, whose runs are ingested whole: check the store's run without "
                            "--watch (trajlens check STORE --run RUN)")
    if problems:
        raise ConfigError(problems)
    checks = load_checks(config) if config is not None else default_checks()
    started = time.monotonic()
    if watch:
        from trajlens.checks.watch import WatchOptions, watch as follow

        options = WatchOptions(poll=poll, settle=settle, fail_fast=fail_fast, until_step=until_step,
                               timeout=timeout, strict=strict)
        ended = follow(source, checks, options, run_id=run, echo=lambda line: typer.echo(line))
        result = ended.run
        code = ended.exit_code
        if result is None:
            raise InputError(str(source), f"the watch ended ({ended.reason}) before it checked a step; "
                             "nothing was checked")
    else:
        result = check_run(source, checks, run)
        code = EXIT_FAILED if result.failed(strict) else EXIT_OK
    typer.echo(output.render_table(result))
    if not any(r.status != "skip" for r in result.results):
        # a gate that passes when nothing was checked would pass anything
        reason = "the run has no steps" if not result.steps else "every check was skipped (the table says why)"
        raise InputError(str(source), f"{reason}; nothing was checked")
    elapsed = time.monotonic() - started
    # a file that cannot be written is an error (exit 2), never a check result
    if junit is not None:
        write_text_atomically(junit, output.junit_xml(result, elapsed, strict), flag="--junit")
    if json_out is not None:
        write_text_atomically(json_out, output.to_json(result, strict), flag="--json")
    return code


def _watch_option_problems(until_step: int | None, timeout: float | None, poll: float, settle: float) -> list[str]:
    """One line per --watch option out of range: a negative step, or seconds that are negative,
    not a number or infinite (a NaN --timeout would never end the watch)."""
    problems = []
    if until_step is not None and until_step < 0:
        problems.append(f"--until-step: expected a step number, at least 0, found {until_step}")
    if timeout is not None and not (math.isfinite(timeout) and timeout >= 0):
        problems.append(f"--timeout: expected a finite number of seconds, at least 0, found {timeout:g}")
    if not (math.isfinite(poll) and 0 < poll <= POLL_MAX):
        problems.append(f"--poll: expected a number of seconds above 0 and at most {POLL_MAX:g}, found {poll:g}")
    if not (math.isfinite(settle) and settle >= 0):
        problems.append(f"--settle: expected a finite number of seconds, at least 0, found {settle:g}")
    return problems

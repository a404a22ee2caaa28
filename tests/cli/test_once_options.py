"""An option that takes one value, given twice, is refused rather than its last value kept: a CI
gate `trajlens check store --run sao-r6 --run sao-r7` checked sao-r7 alone and passed."""

from __future__ import annotations

import pytest
from cli_run import run_cli

from trajlens.cli._app import _register, app
from trajlens.cli._once import OnceOptionsCommand, repeated_option


def _params(name: str) -> list:
    import typer

    _register()
    command = typer.main.get_command(app)
    return command.commands[name].params  # type: ignore[attr-defined]


@pytest.mark.parametrize(("args", "repeated"), [
    (["store", "--run", "a", "--run", "b"], "--run"),
    (["store", "-r", "a", "--run=b"], "--run"),
    (["store", "--run=a", "-rb"], "-r"),
    (["store", "--run", "a", "--json", "x.json", "--junit", "x.xml"], None),
    (["store", "--run", "--run"], None),  # the run called "--run", once
    (["store", "--run", "a", "--", "--run"], None),  # after --, an argument
    (["store", "--strict", "--strict", "--run", "a"], None),  # a flag takes no value
], ids=["twice", "spelled-apart", "attached", "different-options", "a-value-like-an-option", "after-dashes", "flag"])
def test_a_repeated_option_of_one_value_is_found_however_it_is_spelled(args, repeated):
    assert repeated_option(_params("check"), args) == repeated


def test_options_declared_to_repeat_repeat():
    assert repeated_option(_params("report"), ["store", "--run", "a", "--run", "b", "--out", "o"]) is None
    assert repeated_option(_params("sql"), ["store", "q", "--param", "a=1", "--param", "b=2"]) is None
    assert repeated_option(_params("report"), ["store", "--out", "o", "-o", "p"]) == "-o"


def test_every_command_is_parsed_so():
    _register()
    assert {command.cls for command in app.registered_commands} == {OnceOptionsCommand}


@pytest.mark.parametrize("args", [
    ("check", "{store}", "--run", "sao-r6", "--run", "sao-r7"),
    ("attribute", "{store}", "--run", "sao-r6", "--run", "sao-r7"),
    ("advantages", "{store}", "--run", "sao-r6", "-e", "gae", "-e", "grpo"),
], ids=["check", "attribute", "advantages"])
def test_the_command_refuses_it_as_a_usage_error_before_any_work(samples_store_path, args):
    """Exit status 2, as a command line that does not parse: for check too, whose 1 is a failed check."""
    done = run_cli(*(a.format(store=samples_store_path) for a in args))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"error: Option '{args[-2]}' is given more than once; it takes one value (run the "
                           f"command once per value) (see trajlens {args[0]} --help)\n")


def test_help_is_shown_however_the_options_repeat():
    done = run_cli("check", "store", "--run", "a", "--run", "b", "--help")
    assert done.returncode == 0 and "Evaluate declared checks on a run" in done.stdout

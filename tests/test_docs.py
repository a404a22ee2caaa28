"""Documentation that must not drift: the schema doc, help text on every command and export."""

from __future__ import annotations

import inspect
from pathlib import Path

from typer.testing import CliRunner

import trajlens
from trajlens.cli._app import _register, app
from trajlens.schema import render_markdown

REPO = Path(__file__).resolve().parents[1]


def test_schema_doc_matches_the_declarations():
    doc = (REPO / "docs" / "schema.md").read_text()
    assert render_markdown().strip() in doc, "regenerate the tables with `python -m trajlens.schema`"


def _commands():
    _register()
    return sorted(command.name or command.callback.__name__ for command in app.registered_commands)


def test_every_command_has_help_with_an_example():
    names = _commands()
    assert {"ingest", "sql"} <= set(names)
    runner = CliRunner()
    for name in names:
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0, name
        assert "Example: trajlens " + name in " ".join(result.output.split()), f"`trajlens {name} --help` lacks an example"


def test_every_help_shows_whole_in_80_columns():
    """Help printed to a pipe or a log is 80 columns wide: no option's name or text may be cut
    (``--log-advantag…``, ``log-probabiliti…``)."""
    runner = CliRunner()
    for name in _commands():
        output = runner.invoke(app, [name, "--help"], env={"COLUMNS": "80"}).output
        cut = [line for line in output.splitlines() if "…" in line]
        assert not cut, f"`trajlens {name} --help`: {cut}"


def test_every_command_is_summed_up_in_one_line_of_its_docstring():
    """``trajlens --help`` lists each command by its docstring's first paragraph, line breaks kept:
    a summary that runs onto a second line breaks the list mid-sentence."""
    _register()
    for command in app.registered_commands:
        paragraph = inspect.getdoc(command.callback).split("\n\n")[0]
        assert "\n" not in paragraph and paragraph.endswith("."), \
            f"`trajlens {command.name or command.callback.__name__}`: the docstring's first paragraph, {paragraph!r}, " \
            "is not one line"


def test_help_flows_each_paragraph_so_a_narrow_terminal_wraps_it_evenly():
    from trajlens.cli._app import flowing_help

    assert flowing_help("Do a thing.\n\nFirst line of a\nlong paragraph.\n\n- one item\n- two\n  wrapped\n\nExample: trajlens x") == (
        "Do a thing.\n\nFirst line of a long paragraph.\n\n- one item\n- two wrapped\n\nExample: trajlens x")
    _register()
    for command in app.registered_commands:
        assert command.help == flowing_help(inspect.getdoc(command.callback))
    output = CliRunner().invoke(app, ["attribute", "--help"], env={"COLUMNS": "70"}).output
    assert "summary tables the report reads" in " ".join(output.split())
    # the docstring's own line ends no longer cut the text: no line of a paragraph is left short
    body = [line.strip() for line in output.split("Example:")[0].splitlines()[3:] if line.strip()]
    assert all(len(line) > 45 for line in body[:-1] if not line.endswith(".")), body


def test_every_public_name_is_documented():
    for name in dir(trajlens):
        if name.startswith("__"):
            continue
        value = getattr(trajlens, name)
        if inspect.isfunction(value) or inspect.isclass(value):
            assert inspect.getdoc(value), f"trajlens.{name} has no docstring"


def test_import_does_not_pull_torch():
    import subprocess
    import sys

    code = "import sys, trajlens; trajlens.open; trajlens.ingest; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
    code = "import sys; from trajlens import *; print('torch' in sys.modules, callable(open), callable(stage_report))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False True True"


def test_ingest_stays_a_function_after_its_subpackage_is_imported():
    import trajlens.ingest.parquet  # noqa: F401

    assert callable(trajlens.ingest) and trajlens.ingest.__module__ == "trajlens.ingest"

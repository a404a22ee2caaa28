"""The README's examples run exactly as written, on the shipped sample runs.

Every fenced ``python``, ``bash``, ``sh``, ``shell`` and ``console`` block runs, top to bottom, in
one working directory that is a copy of the checkout's tracked files, with ``trajlens`` and
``python`` on PATH. So the ``out/store`` the tour's first command ingests is the store every
later example reads, as it is for a reader who types them in order. Python blocks run each in a fresh interpreter; shell blocks run command by
command under ``bash -o pipefail``; a command that is a plain ``trajlens`` call (no pipe,
redirection, variable, substitution or glob) runs through the CLI's entry point in the test's
own process (:func:`cli_run.run_cli`), with the arguments bash would give it: a fresh
interpreter for each would cost seconds of imports a command, and a shell adds nothing to such
a command. Each command must exit 0, or with the status
``EXIT_STATUS`` documents. A command that cannot run here is in ``NOT_RUN`` with its reason, and
a file the examples name as the reader's own is made by ``READER_FILES``; any other command,
such as one a new section adds, runs and is held to the same rule.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

from cli_run import run_cli
ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

pytestmark = pytest.mark.slow

SHELL_LANGUAGES = ("bash", "sh", "shell", "console")

# Commands the tests do not run, by the start of the command (its text before any comment).
NOT_RUN: dict[str, str] = {
    "bash scripts/demo": "installs packages first (scripts/setup.sh); its trajlens commands are the tour's, run here",
    "bash scripts/test": "the test suite itself",
    "trajlens ingest logs/ --store out/store":
        "logs/ is the reader's own folder of agent logs; tests/ingest/test_formats.py ingests such a mixed folder",
    "trajlens check runs/live --watch":
        "follows a training run that is still writing; tests/checks/test_check_watch.py runs --watch against a live writer",
    "pip install 'trajlens[ray]'": "an install command",
    "python -m venv .venv": "makes the reader's own virtual environment (the suite runs in one already)",
    "pip install --index-url https://download.pytorch.org/whl/cpu torch": "an install command",
    "pip install .": "an install command; tests/cli/test_packaging.py builds the wheel and lists what it carries",
    "trajlens classify out/store --engine ray": "starts a local Ray cluster for the command (minutes on a shared machine); "
                                                "tests/engine/test_ray_cluster.py runs the Ray engine on a local cluster",
    "trajlens advantages out/store --run sao-r6 -e gae --engine ray": "as above",
    "ray start ": "starts the nodes of a Ray cluster",
    "trajlens attribute out/store --run causal-r6 --engine ray --ray-address ": "needs a running Ray cluster",
    "trajlens classify s3://": "needs a Ray cluster and an object store",
    "trajlens advantages s3://": "needs a Ray cluster and an object store",
}

# Commands the README documents as failing, with their exit status.
EXIT_STATUS: dict[str, int] = {
    "trajlens check out/store --run sao-r6": 1,
}


def _first_toml_block(markdown: Path) -> str:
    return re.search(r"```toml\n(.*?)```", markdown.read_text(), flags=re.S).group(1)


# Files the examples name as the reader's own, made in the working directory before the blocks run.
READER_FILES: dict[str, Callable[[Path], None]] = {
    # The tool map example of docs/classify.md.
    "my_tools.toml": lambda path: path.write_text(_first_toml_block(ROOT / "docs" / "classify.md")),
    # A JSONL log of OpenAI-style rollouts.
    "big.jsonl": lambda path: shutil.copy(ROOT / "tests" / "data" / "openai_chat" / "rollouts.jsonl", path),
}


@dataclass(frozen=True)
class Example:
    """One runnable example: a whole Python block, or one shell command."""

    language: str
    code: str
    line: int
    """Line of the README the block starts on."""

    @property
    def is_python(self) -> bool:
        return self.language == "python"


def readme_blocks(text: str) -> list[tuple[str, str, int]]:
    """Every fenced block as (language, body, line of the opening fence)."""
    return [(match.group(1), match.group(2), text.count("\n", 0, match.start()) + 1)
            for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)]


def shell_commands(body: str, language: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, heredocs kept whole,
    comment lines dropped; in a ``console`` block only ``$ `` lines, the rest being output."""
    lines = body.splitlines()
    if language == "console":
        lines = [line[2:] for line in lines if line.startswith("$ ")]
    commands: list[str] = []
    index = 0
    while index < len(lines):
        command = lines[index]
        index += 1
        if not command.strip() or command.lstrip().startswith("#"):
            continue
        while command.endswith("\\") and index < len(lines):
            command = command[:-1] + lines[index].lstrip()
            index += 1
        heredoc = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", command)
        if heredoc:
            while index < len(lines):
                command += "\n" + lines[index]
                index += 1
                if lines[index - 1].strip() == heredoc.group(1):
                    break
        commands.append(command)
    return commands


def readme_examples(text: str | None = None) -> list[Example]:
    examples = []
    for language, body, line in readme_blocks(README.read_text() if text is None else text):
        if language == "python":
            examples.append(Example(language, body, line))
        elif language in SHELL_LANGUAGES:
            examples.extend(Example(language, command, line) for command in shell_commands(body, language))
    return examples


def _listed(command: str, table: dict) -> str | None:
    return next((start for start in table if command.startswith(start)), None)


@dataclass(frozen=True)
class Outcome:
    example: Example
    returncode: int
    stderr: str
    seconds: float


@pytest.fixture(scope="module")
def tour(tmp_path_factory) -> tuple[Path, list[Outcome]]:
    """Run every example in README order in one working directory; return it and the outcomes."""
    work = tmp_path_factory.mktemp("readme")
    # A copy of every tracked file (links kept as links), so no example writes into the repository;
    # the package itself is imported from the repository (PYTHONPATH), as an installed one would be.
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in filter(None, tracked.stdout.split("\0")):
        if name.startswith("trajlens/") or not os.path.lexists(ROOT / name):
            continue
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, work / name, follow_symlinks=False)
    for name, make in READER_FILES.items():
        make(work / name)
    bin_dir = tmp_path_factory.mktemp("bin")
    (bin_dir / "trajlens").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m trajlens "$@"\n')
    (bin_dir / "trajlens").chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "PATH": os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]])}
    outcomes = []
    for example in readme_examples():
        if not example.is_python and _listed(example.code, NOT_RUN):
            continue
        started = time.monotonic()
        arguments = None if example.is_python else plain_trajlens_arguments(example.code)
        if arguments is not None:
            done = run_cli(*arguments, cwd=work)
        else:
            argv = [sys.executable, "-c", example.code] if example.is_python else ["bash", "-o", "pipefail", "-c", example.code]
            done = subprocess.run(argv, cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=900)
        outcomes.append(Outcome(example, done.returncode, done.stderr, time.monotonic() - started))
    return work, outcomes


SHELL_SYNTAX = re.compile(r"[|&;<>()$`*?\[\]{}~\\\n]")
"""Characters that make bash do more than split a command into words: pipes, redirections,
variables, substitutions, globs, escapes."""


def plain_trajlens_arguments(command: str) -> list[str] | None:
    """The arguments of ``command`` if it is ``trajlens`` and words alone (quoted words included),
    as bash would pass them; None for anything a shell must run."""
    unquoted = re.sub(r"'[^']*'|\"[^\"$`\\]*\"", "", command.split(" #", 1)[0])
    if SHELL_SYNTAX.search(unquoted) or "'" in unquoted or '"' in unquoted:
        return None
    words = shlex.split(command, comments=True)
    return words[1:] if words[:1] == ["trajlens"] else None


def test_examples_are_found_in_every_kind_of_block():
    text = "\n".join([
        "```bash", "trajlens a \\", "  --b   # c", "# only a comment", "", "cat <<'SQL'", "SELECT 1;", "SQL", "```",
        "```console", "$ trajlens d", "output line", "```",
        "```python", "print(1)", "```",
        "```yaml", "- run: trajlens e", "```",
    ])
    assert [(e.language, e.code) for e in readme_examples(text)] == [
        ("bash", "trajlens a --b   # c"), ("bash", "cat <<'SQL'\nSELECT 1;\nSQL"),
        ("console", "trajlens d"), ("python", "print(1)\n")]


def test_only_plain_trajlens_calls_skip_the_shell():
    assert plain_trajlens_arguments("trajlens sql s 'SELECT $s > 1' --out a.csv   # note") == \
        ["sql", "s", "SELECT $s > 1", "--out", "a.csv"]
    assert plain_trajlens_arguments('trajlens sql s "SELECT count(*) FROM t"') == ["sql", "s", "SELECT count(*) FROM t"]
    for command in ("trajlens check --print-defaults > checks.toml", "trajlens sql s q | head", 'trajlens sql s "$Q"',
                    "trajlens ingest logs/*.jsonl --store s", "trajlens a; rm -r x", "trajlens a $(pwd)",
                    "trajlens a ~/runs", "python -m trajlens a", "trajlens a 'unclosed", "A=1 trajlens a"):
        assert plain_trajlens_arguments(command) is None, command


def test_the_readme_has_a_shell_and_a_python_tour():
    examples = readme_examples()
    assert any(e.code.startswith("trajlens ingest sample_data --store out/store") for e in examples)
    assert any(e.is_python and "trajlens.ingest" in e.code for e in examples)


def test_every_command_left_out_or_expected_to_fail_is_in_the_readme():
    commands = [e.code for e in readme_examples() if not e.is_python]
    stale = [start for start in [*NOT_RUN, *EXIT_STATUS] if not any(c.startswith(start) for c in commands)]
    assert not stale, f"listed in tests/test_readme.py but no longer in the README: {stale}"


def test_every_example_runs_as_written(tour):
    _, outcomes = tour
    failures = []
    for outcome in outcomes:
        example = outcome.example
        expected = 0 if example.is_python else EXIT_STATUS.get(_listed(example.code, EXIT_STATUS) or "", 0)
        if outcome.returncode != expected:
            failures.append(f"README line {example.line} ({example.language}) exited {outcome.returncode}, "
                            f"expected {expected}:\n{example.code}\n{outcome.stderr[-1500:]}")
    assert not failures, "\n\n".join(failures)
    slowest = sorted(outcomes, key=lambda outcome: -outcome.seconds)[:8]
    print("slowest README examples:", *(f"{o.seconds:6.1f} s  {o.example.code.splitlines()[0][:90]}" for o in slowest),
          sep="\n")


def test_the_tour_leaves_what_it_says(tour):
    work, outcomes = tour
    assert len(outcomes) >= 15
    late = pl.read_parquet(work / "late.parquet")
    assert late.height > 0 and late["step"].min() >= 130
    calls = pl.read_csv(work / "calls.csv")
    assert {"sao-r6", "sao-r7"} <= set(calls["run_id"])
    assert (work / "r7.md").read_text().startswith("#")
    assert json.loads((work / "verdict.json").read_text())["best"]["max_abs_diff"] < 1e-6
    assert (work / "out" / "report" / "index.html").stat().st_size > 0

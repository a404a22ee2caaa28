"""Tool calls of a coding agent, one behaviour class at a time, with plausible observations.

Every generated call has a *known* class from the taxonomy of :mod:`trajlens.classify.rules`
(``submit``, ``test_suite``, ``test_targeted``, ``quick_check``, ``run_script``, ``edit``,
``view``, ``search``, ``think``, ``other``): the templates below are written so that the
classifier's rules put each one in the class it was generated for. The templates are the
forms seen in real agent logs: ``pytest`` and ``python -m pytest`` over the suite or a node
id, ``python -c`` and ``python - <<'EOF'`` checks, ``sed -i`` and ``cat > f <<'EOF'`` edits,
``str_replace_editor`` calls, ``cat``/``sed -n`` reads, ``grep -rn``/``find``/``ls``, think
calls (often empty) and the submission.

Choices inside a class come from one random integer per call, so a step's calls are rendered
without drawing random numbers one at a time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NamedTuple

from trajlens.synth.tasks import REPOS, Module, Repo

SUBMIT = "submit"
TEST_SUITE = "test_suite"
TEST_TARGETED = "test_targeted"
QUICK_CHECK = "quick_check"
RUN_SCRIPT = "run_script"
EDIT = "edit"
VIEW = "view"
SEARCH = "search"
THINK = "think"
OTHER = "other"

CALL_CLASSES: tuple[str, ...] = (
    SUBMIT, TEST_SUITE, TEST_TARGETED, QUICK_CHECK, RUN_SCRIPT, EDIT, VIEW, SEARCH, THINK, OTHER,
)
"""The behaviour classes, in the classifier's priority order."""

CLASS_INDEX: dict[str, int] = {name: i for i, name in enumerate(CALL_CLASSES)}


@dataclass(frozen=True)
class Harness:
    """The tools an agent scaffold offers."""

    name: str
    """Scaffold name, for the run config."""
    editor: bool
    """Whether a ``str_replace_editor`` tool exists (else edits and reads go through bash)."""
    think: bool
    """Whether a ``think`` tool exists."""
    submit_tool: bool
    """True: a ``submit`` tool ends the episode; False: ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``."""
    editor_share: float = 0.5
    """Share of edits and reads made with the editor when it exists."""


class RenderedCall(NamedTuple):
    """One tool call as the ``tool_calls`` table stores it."""

    tool_name: str
    arguments: str
    command: str | None
    observation: str
    return_code: int | None


@dataclass
class CallContext:
    """What the calls of one trajectory refer to, and the state they change."""

    repo: Repo
    module: Module
    symbol: str
    test_names: tuple[str, ...]
    script: str
    resolved: bool
    line: int
    """Line of the code the issue is about (the agent's reads, edits and tracebacks point there)."""
    fix: int
    """Which edit the agent makes (index into the edit templates)."""
    total_tests: int
    seconds: int
    habit: int
    """The agent's habitual form of a command: most calls of a class use the same template."""
    edited: bool = False
    last_edit_path: str | None = None


def context(repo_index: int, module_index: int, symbol_index: int, tests: int, resolved: bool, r: int) -> CallContext:
    """The call context of a task (indices from :class:`trajlens.synth.tasks.TaskPool`)."""
    repo = REPOS[repo_index]
    module = repo.modules[module_index]
    symbol = module.symbols[symbol_index % len(module.symbols)]
    snake = _snake(symbol)
    names = tuple(f"test_{snake}_{suffix}" for suffix in _TEST_SUFFIXES[r % 3: r % 3 + tests])
    script = _SCRIPTS[r % len(_SCRIPTS)]
    line = 40 + (r >> 4) % 400
    return CallContext(repo, module, symbol, names or (f"test_{snake}",), script, resolved, line,
                       (r >> 12) % len(_OLD_NEW), 120 + (r >> 16) % 900, 2 + (r >> 20) % 40, r >> 24)


_TEST_SUFFIXES = ("roundtrip", "empty_input", "none", "unicode", "nested", "regression", "default", "strict", "large")
_SCRIPTS = ("reproduce.py", "reproduce_issue.py", "repro.py", "test_repro.py")
_ARGS = ("'1.5'", "None", "''", "[1, 2, 3]", "{'a': 1}", "'2021-01-01T00:00:00'", "-0.0", "'x' * 3")
_OLD_NEW = (
    ("return value", "return value if value is not None else default"),
    ("if not value:", "if value is None:"),
    ("strict=False", "strict=True"),
    ("len(parts) > 1", "len(parts) >= 1"),
    ("except ValueError:", "except (ValueError, TypeError):"),
    ("self._cache = {}", "self._cache = None"),
)
_THOUGHTS = (
    "The failing test passes None through {symbol}; the early return hides it. Guard the None case and keep the default.",
    "Before editing {path} I should confirm which branch of {symbol} the reproduction hits.",
    "The traceback points at {symbol} in {path}; the fix belongs there, not in the caller.",
    "Targeted test passes now. Run the wider suite once to check nothing else depended on the old behaviour.",
    "Two options: change {symbol} or relax the test. The issue says the behaviour is wrong, so change {symbol}.",
)
_EMPTY_THOUGHTS = ("", " ", "...", "Let me think.", "Thinking.", "Hmm.")
_THINK_OBSERVATION = "Your thought has been logged."


def render(klass: str, ctx: CallContext, harness: Harness, r: int, empty_thought: bool = False) -> RenderedCall:
    """Render one call of class ``klass``; ``r`` is a non-negative random integer."""
    return _RENDERERS[klass](ctx, harness, r, empty_thought)


def readback(ctx: CallContext, harness: Harness, r: int) -> RenderedCall:
    """A read of the file the previous edit changed (a *read-back*); class ``view``."""
    path = ctx.last_edit_path or ctx.module.path
    return _view_path(path, ctx, harness, r)


def sandbox_lost(r: int) -> RenderedCall:
    """The single call of a trajectory whose sandbox vanished under it; class ``search``."""
    observation = "Error: sandbox pod not found (the runtime was deleted); the episode cannot continue."
    return RenderedCall("bash", _args(command="ls -la"), "ls -la", observation, None)


# -- renderers -------------------------------------------------------------------------------------


def _think(ctx: CallContext, harness: Harness, r: int, empty: bool) -> RenderedCall:
    if empty:
        thought = _EMPTY_THOUGHTS[r % len(_EMPTY_THOUGHTS)]
    else:
        thought = _THOUGHTS[r % len(_THOUGHTS)].format(symbol=ctx.symbol, path=ctx.module.path)
    return RenderedCall("think", json.dumps({"thought": thought}), None, _THINK_OBSERVATION, None)


def _submit(ctx: CallContext, harness: Harness, r: int, empty: bool) -> RenderedCall:
    old, new = _OLD_NEW[ctx.fix]
    line = ctx.line
    diff = (f"diff --git a/{ctx.module.path} b/{ctx.module.path}\n--- a/{ctx.module.path}\n+++ b/{ctx.module.path}\n"
            f"@@ -{line},3 +{line},3 @@\n-        {old}\n+        {new}\n")
    if harness.submit_tool:
        return RenderedCall("submit", "{}", None, diff, None)
    command = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
    return RenderedCall("bash", _args(command=command), command, "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n" + diff, 0)


_SUITE_COMMANDS = (
    "pytest -q",
    "python -m pytest tests/",
    "pytest",
    "python -m pytest -x -q",
    "cd /testbed && python -m pytest -q 2>&1 | tail -n 25",
    "pytest -q -x {testdir}",
)


def _suite(ctx: CallContext, harness: Harness, r: int, empty: bool) -> RenderedCall:
    command = _SUITE_COMMANDS[_form(ctx, r, len(_SUITE_COMMANDS))].format(testdir=ctx.module.test.rsplit("/", 1)[0] + "/")
    total = ctx.total_tests
    passing = ctx.edited and ctx.resolved
    head = f"collected {total} items\n"
    if passing:
        tail = f"==== {total} passed in {ctx.seconds}.{ctx.line % 97:02d}s ===="
        return RenderedCall("bash", _args(command=command), command, head + tail, 0)
    test = f"{ctx.module.test}::{ctx.test_names[0]}"
    tail = (f"FAILED {test} - AssertionError\n"
            f"==== 1 failed, {total - 1} passed in {ctx.seconds}.{ctx.line % 97:02d}s ====")
    return RenderedCall("bash", _args(command=command), command, head + tail, 1)


_TARGETED_COMMANDS = (
    "pytest {test}::{name} -x",
    "python -m pytest {test} -q",
    "pytest {test} -k {name}",
    "python -m pytest {test}::{name} -vv 2>&1 | tail -n 40",
    "cd /testbed && pytest -q {test}",
)


def _targeted(ctx: CallContext, harness: Harness, r: int, empty: bool) -> RenderedCall:
    name = ctx.test_names[r % len(ctx.test_names)]
    command = _TARGETED_COMMANDS[_form(ctx, r, len(_TARGETED_COMMANDS))].format(test=ctx.module.test, name=name)
    if ctx.edited and (ctx.resolved or (r >> 8) % 3):
        return RenderedCall("bash", _args(command=command), command, f"{ctx.module.test}::{name} PASSED\n1 passed in 0.{ctx.seconds + 10}s", 0)
    observation = f"{ctx.module.test}::{name} FAILED\nE       AssertionError: assert None == {_ARGS[ctx.fix]}\n1 failed in 0.{ctx.seconds + 10}s"
    return RenderedCall("bash", _args(command=command), command, observation, 1)


_QUICK_COMMANDS = (
    'python -c "from {dotted} import {symbol}; print({symbol}({arg}))"',
    "python - <<'EOF'\nfrom {dotted} import {symbol}\nresult = {symbol}({arg})\nprint(repr(result))\nEOF",
    'python3 -c "import {dotted} as m; print(m.{symbol}.__doc__)"',
    "cd /testbed && python - <<'EOF'\nfrom {dotted} import {symbol}\nfor case in ({arg}, None):\n    print(case, {symbol}(case))\nEOF",
)


def _quick(ctx: CallContext, harness: Harness, r: int, empty: bool) -> RenderedCall:
    arg = _ARGS[(r >> 8) % len(_ARGS)]
    command = _QUICK_COMMANDS[_form(ctx, r, len(_QUICK_COMMANDS))].format(dotted=ctx.module.dotted, symbol=ctx.symbol, arg=arg)
    if ctx.edited or (r >> 12) % 4:
        return RenderedCall("bash", _args(command=command), command, f"{ctx.symbol}({arg}) -> {_ARGS[ctx.fix]}", 0)
    observation = (f"Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"
                   f"  File \"/testbed/{ctx.module.path}\", line {ctx.line}, in {ctx.symbol}\nTypeError: unsupported operand")
    return RenderedCall("bash", _args(command=command), command, observation, 1)


_SCRIPT_COMMANDS = ("python {script}", "python /testbed/{script}", "cd /testbed && python {script} 2>&1 | head -n 30")


def _script(ctx: CallContext, harness: Harness, r: int, empty: bool) -> RenderedCall:
    command = _SCRIPT_COMMANDS[_form(ctx, r, len(_SCRIPT_COMMANDS))].format(script=ctx.script)
    if ctx.edited and ctx.resolved:
        return RenderedCall("bash", _args(command=command), command, "All checks passed.", 0)
    observation = f"Traceback (most recent call last):\n  File \"/testbed/{ctx.script}\", line 3, in <module>\nValueError: {ctx.symbol} rejected {_ARGS[ctx.fix]}"
    return RenderedCall("bash", _args(command=command), command, observation, 1)


def _edit(ctx: CallContext, harness: Harness, r: int, empty: bool) -> RenderedCall:
    old, new = _OLD_NEW[ctx.fix if (r >> 8) % 4 else (r >> 10) % len(_OLD_NEW)]
    path = ctx.module.path
    line = ctx.line
    ctx.edited = True
    ctx.last_edit_path = path
    if harness.editor and ((r >> 14) % 1000) / 1000 < harness.editor_share:
        arguments = json.dumps({"command": "str_replace", "path": f"/testbed/{path}", "old_str": f"        {old}", "new_str": f"        {new}"})
        observation = (f"The file /testbed/{path} has been edited. Here's the result of running `cat -n` on a snippet:\n"
                       f"  {line}\t        {new}")
        return RenderedCall("str_replace_editor", arguments, None, observation, None)
    if r % 2:
        command = f"sed -i 's/{_sed_escape(old)}/{_sed_escape(new)}/' {path}"
    else:
        command = f"sed -i '{line}s/{_sed_escape(old)}/{_sed_escape(new)}/' {path}"
    return RenderedCall("bash", _args(command=command), command, "", 0)


def create_script(ctx: CallContext, harness: Harness, r: int) -> RenderedCall:
    """The edit that writes the reproduction script a later ``run_script`` call runs."""
    body = f"from {ctx.module.dotted} import {ctx.symbol}\n\nprint({ctx.symbol}({_ARGS[ctx.fix]}))\n"
    ctx.last_edit_path = ctx.script
    if harness.editor and ((r >> 14) % 1000) / 1000 < harness.editor_share:
        arguments = json.dumps({"command": "create", "path": f"/testbed/{ctx.script}", "file_text": body})
        return RenderedCall("str_replace_editor", arguments, None, f"File created successfully at: /testbed/{ctx.script}", None)
    command = f"cat > {ctx.script} <<'EOF'\n{body}EOF"
    return RenderedCall("bash", _args(command=command), command, "", 0)


def _view(ctx: CallContext, harness: Harness, r: int, empty: bool) -> RenderedCall:
    choice = (r >> 8) % 5
    if choice < 2:
        path = ctx.module.test
    elif choice < 4:
        path = ctx.repo.modules[(r >> 11) % len(ctx.repo.modules)].path  # a neighbour (or the module itself)
    else:
        path = ctx.module.path
    return _view_path(path, ctx, harness, r)


_VIEW_COMMANDS = ("cat {path}", "sed -n '{a},{b}p' {path}", "nl -ba {path} | sed -n '{a},{b}p'", "cat -n {path}")


def _view_path(path: str, ctx: CallContext, harness: Harness, r: int) -> RenderedCall:
    a = max(1, ctx.line - 20 + 30 * ((r >> 8) % 3))
    b = a + 40
    observation = (f"{a}\tdef {_snake(ctx.symbol)}(value, default=None, strict=False):\n"
                   f"{a + 1}\t    if not value:\n{a + 2}\t        return default\n{a + 3}\t    return value")
    if harness.editor and ((r >> 14) % 1000) / 1000 < harness.editor_share:
        arguments = json.dumps({"command": "view", "path": f"/testbed/{path}", "view_range": [a, b]})
        return RenderedCall("str_replace_editor", arguments, None, observation, None)
    command = _VIEW_COMMANDS[_form(ctx, r, len(_VIEW_COMMANDS))].format(path=path, a=a, b=b)
    return RenderedCall("bash", _args(command=command), command, observation, 0)


_SEARCH_COMMANDS = (
    'grep -rn "{symbol}" {package}',
    'grep -rn "def {snake}" --include=*.py .',
    "find . -name '*.py' -path '*{stem}*'",
    "ls {package}",
    "ls -la",
    "find {package} -name 'test_*.py' | head -n 20",
)


def _search(ctx: CallContext, harness: Harness, r: int, empty: bool) -> RenderedCall:
    stem = ctx.module.path.rsplit("/", 1)[-1].removesuffix(".py")
    form = _form(ctx, r, len(_SEARCH_COMMANDS))
    command = _SEARCH_COMMANDS[form].format(
        symbol=ctx.symbol, snake=_snake(ctx.symbol), package=ctx.repo.package_dir, stem=stem)
    if command.startswith("grep"):
        observation = (f"{ctx.module.path}:{ctx.line}:def {_snake(ctx.symbol)}(value, default=None, strict=False):\n"
                       f"{ctx.module.test}:{12 + ctx.fix}:from {ctx.module.dotted} import {ctx.symbol}")
    elif command.startswith("find"):
        observation = "\n".join(f"./{m.path}" if "test_" not in command else f"./{m.test}" for m in ctx.repo.modules)
    elif command == "ls -la":
        observation = "total 96\ndrwxr-xr-x  9 root root 4096 .\n-rw-r--r--  1 root root 1862 README.md\n-rw-r--r--  1 root root 2301 pyproject.toml"
    else:
        observation = "  ".join(sorted({m.path[len(ctx.repo.package_dir) + 1:].split("/")[0] for m in ctx.repo.modules}))
    return RenderedCall("bash", _args(command=command), command, observation, 0)


_OTHER = (
    ("pip install -e . -q", "Successfully installed {name}-0.0.0.dev0"),
    ("git status", "On branch main\nChanges not staged for commit:\n\tmodified:   {path}"),
    ("git diff", "diff --git a/{path} b/{path}"),
    ("python --version", "Python 3.11.9"),
)


def _other(ctx: CallContext, harness: Harness, r: int, empty: bool) -> RenderedCall:
    command, output = _OTHER[r % len(_OTHER)]
    name = ctx.repo.slug.split("/")[1]
    return RenderedCall("bash", _args(command=command), command, output.format(name=name, path=ctx.module.path), 0)


_RENDERERS = {
    THINK: _think, SUBMIT: _submit, TEST_SUITE: _suite, TEST_TARGETED: _targeted, QUICK_CHECK: _quick,
    RUN_SCRIPT: _script, EDIT: _edit, VIEW: _view, SEARCH: _search, OTHER: _other,
}


def _form(ctx: CallContext, r: int, count: int) -> int:
    """Template index: the trajectory's habitual form three times in four, another one otherwise."""
    return (ctx.habit if r % 4 else r >> 2) % count


def _args(**values: object) -> str:
    return json.dumps(values)


def _sed_escape(text: str) -> str:
    return text.replace("/", r"\/").replace("'", "")


def _snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return "".join(out).lstrip("_")

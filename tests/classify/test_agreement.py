"""The vectorised classifier agrees with the per-row reference, label for label."""

from __future__ import annotations

import json

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajlens.classify import _vectorised, classify_calls
from trajlens.classify._synthetic import synthetic_tool_calls
from trajlens.classify.reference import classify_rows_slow, shell_action_classes

WORDS = [
    "cd /testbed", "pytest", "python -m pytest", "python3", "python", "-m", "unittest", "-c", "-k", "-x", "-q", "-i",
    "-n", "tests/", "tests/test_a.py", "a.py::test_b", "./tests/runtests.py", "bin/test", "admin_docs", "cat", "sed",
    "'1,20p'", "'s/a/b/'", "nl -ba", "head -n 5", "tail -20", "grep -rn", "'def x'", "\"a b\"", "'it''s'", "find .",
    "-name '*.py'", "xargs", "ls -la", "echo", "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "git diff", "git checkout",
    "--", "mv a b", "rm -f x", "timeout 30", "X=1", "bash -lc", "'ls; pwd'", "\"python -c 'print(1)'\"", "$(pwd)",
    "`ls`", "2>&1", "> out.txt", ">> log", "< in.txt", "2>/dev/null", "|", "&&", "||", ";", "&", "\n", "# note",
    "(", ")", "{", "}", "if", "then", "fi", "do", "done", "\\;", "<<EOF\nx = 1\nEOF\n", "<<'PY'\nimport os\nPY",
    "<<<", "'", "\"", "\\", "open f.py", "edit 1:2\nx\nend_of_edit", "str_replace_editor view /a.py", "submit",
    "python -m tox", "nox", "run_tests.sh", "ed -s f.py", "ex", "apply_patch", "$f", "--pyargs", "pkg.tests.test_x",
    "timeout -k 5 60", "-exec sed -i", "{} +", "git blame",
]


def _agree(commands: list[str]) -> None:
    frame = pl.DataFrame(
        {"tool_name": ["bash"] * len(commands), "arguments": [json.dumps({"command": c}) for c in commands],
         "command": commands},
        schema={"tool_name": pl.String, "arguments": pl.String, "command": pl.String},
    )
    result = classify_calls(frame)
    slow = classify_rows_slow(frame.iter_rows(named=True))
    fast = result["primary_class"].to_list()
    mismatches = [(c, f, s) for c, f, s in zip(commands, fast, slow) if f != s]
    assert mismatches == []
    actions = result["action_classes"].to_list()
    assert [(c, a) for c, a in zip(commands, actions) if a != shell_action_classes(c)] == []


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join), min_size=20, max_size=60))
def test_agrees_on_random_word_salad(commands):
    _agree(commands)


@settings(max_examples=10, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("ab1 -'\"\\|&;<>()$`#\n=./*:_EOF")), max_size=40),
                min_size=20, max_size=60))
def test_agrees_on_random_shell_characters(commands):
    _agree(commands)


def test_agrees_on_argv_commands():
    argv = [["bash", "-lc", "cd /r && pytest -q"], ["rg", "-n", "it's \\ \"x\"", "src"], [], ["sh", "-c"],
            ["python", "-c", "print('é')"], ["pytest", "tests/test a.py"], ["/bin/zsh", "-c", "cat f", "x"]]
    frame = pl.DataFrame(
        {"tool_name": ["shell"] * len(argv), "arguments": [json.dumps({"command": a}) for a in argv],
         "command": [None] * len(argv)},
        schema={"tool_name": pl.String, "arguments": pl.String, "command": pl.String},
    )
    fast = classify_calls(frame)["primary_class"].to_list()
    assert fast == classify_rows_slow(frame.iter_rows(named=True))
    assert fast[:2] == ["test_suite", "search"]


@pytest.mark.parametrize("as_large_log", [True, False])
def test_agrees_on_generated_tool_calls(monkeypatch, as_large_log):
    if as_large_log:  # rewrite only the rows that need it, and bisect the rules, however few the rows
        monkeypatch.setattr(_vectorised, "SELECT_ROWS_FROM", 0)
        monkeypatch.setattr(_vectorised, "BISECT_FROM", 0)
    calls = synthetic_tool_calls(3000, seed=3)
    fast = classify_calls(calls)["primary_class"].to_list()
    assert fast == classify_rows_slow(calls.iter_rows(named=True))

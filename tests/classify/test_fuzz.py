"""Property: on hostile commands the vectorised classifier and the per-row reference agree,
neither raises, and no command costs more than a bounded time.

Commands come from mutations of the hand-labelled real commands
(``tests/data/labelled_commands.jsonl``), random bytes, megabyte strings, deep quoting and
unterminated heredocs. Hypothesis runs derandomized (the same examples on every run) with a
bounded number of examples, so the test is fast and deterministic in CI.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajlens.classify import _vectorised, classify_calls
from trajlens.classify.reference import bounded_command, explain_call_slow, shell_action_classes

LABELLED = Path(__file__).resolve().parents[1] / "data" / "labelled_commands.jsonl"


def _real_commands() -> list[str]:
    commands = []
    for line in LABELLED.read_text().splitlines():
        row = json.loads(line)
        command = row.get("command")
        if command is None:
            try:
                command = json.loads(row["arguments"]).get("command")
            except (ValueError, AttributeError):
                command = None
        if isinstance(command, str) and command:
            commands.append(command)
    return commands


REAL = _real_commands()
SHELL_PIECES = [
    "'", '"', "\\", "`", "$(", ")", "(", "{", "}", "|", "||", "&", "&&", ";", ";;", "\n", "\r\n", "#", " ", "\t",
    "<<", "<<-", "<<<", "<<EOF", "<<'EOF'", '<<"PY"', "EOF", "EOF\n", ">", ">>", "2>&1", "&>", "<", "=", "-c", "-lc",
    "bash -c ", "sh -c '", "python -c ", "pytest ", "-k ", "cd /x && ", " | tail -5", "sed -i ", "cat > f <<EOF\n",
    "\x1c", "\x1f", "\xa0", "\u2028", "\u3000", "\x85", "\x00", "\x01", "\x02", "é", "ǅ", "\u0301", "²", "٣", "😀",
    "__Q__", "__HEREDOC__", "${x}", "$'a\\nb'", "::", ".py", "tests/", "*", "?", "[", "]",
]

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=60)


@st.composite
def mutated_real(draw) -> str:
    """A real command with pieces inserted, cut, repeated or spliced from another one."""
    command = draw(st.sampled_from(REAL))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(command)))
        kind = draw(st.integers(0, 4))
        if kind == 0:
            command = command[:at] + draw(st.sampled_from(SHELL_PIECES)) + command[at:]
        elif kind == 1:
            end = draw(st.integers(at, len(command)))
            command = command[:at] + command[end:]
        elif kind == 2:
            command = command[:at] + draw(st.sampled_from(REAL)) + command[at:]
        elif kind == 3:
            command = command[:at] + draw(TEXT) + command[at:]
        else:
            end = draw(st.integers(at, len(command)))
            command = command[:end] + command[at:end] + command[end:]
    return command


random_bytes = st.binary(max_size=200).map(lambda raw: raw.decode("utf-8", errors="replace"))
latin_bytes = st.binary(max_size=200).map(lambda raw: raw.decode("latin-1"))
piece_salad = st.lists(st.sampled_from(SHELL_PIECES + ["ls", "pytest", "git diff", "open f.py", "edit 1:2"]),
                       max_size=30).map("".join)


@st.composite
def deep_quoting(draw) -> str:
    """``bash -c`` inside ``bash -c`` (quotes escaped at each level), nested ``$(...)`` and quotes."""
    command = draw(st.sampled_from(REAL[:40] + ["pytest -k 'a or b'", "cat f.py", "python -c 'print(1)'"]))
    for _ in range(draw(st.integers(1, 12))):
        style = draw(st.integers(0, 3))
        if style == 0:
            command = 'bash -c "' + command.replace("\\", "\\\\").replace('"', '\\"') + '"'
        elif style == 1:
            command = "sh -lc '" + command.replace("'", "'\\''") + "'"
        elif style == 2:
            command = "echo $(" + command + ")"
        else:
            command = "`" + command + "`"
    return command


@st.composite
def unterminated_heredoc(draw) -> str:
    delimiter = draw(st.sampled_from(["EOF", "PY", "END_OF_FILE", "x", "EOF1"]))
    quote = draw(st.sampled_from(["", "'", '"']))
    head = draw(st.sampled_from(["cat > f.py ", "python3 - ", "bash ", "cat <<X\nbody\nX\ncat ", "", "cd /x && cat "]))
    body = draw(st.lists(st.sampled_from(REAL[:30] + ["", "import os", delimiter + "x", " " + delimiter, "<<EOF"]),
                         max_size=6))
    tail = draw(st.sampled_from(["", "\npytest -q", "\n" + delimiter + "2", "\n" + quote + delimiter]))
    return f"{head}<<{draw(st.sampled_from(['', '-']))}{quote}{delimiter}{quote}\n" + "\n".join(body) + tail


commands = st.one_of(mutated_real(), random_bytes, latin_bytes, piece_salad, deep_quoting(), unterminated_heredoc())


def _frame(tools: list[str], arguments: list[str | None], texts: list[str | None]) -> pl.DataFrame:
    return pl.DataFrame({"tool_name": tools, "arguments": arguments, "command": texts},
                        schema={"tool_name": pl.String, "arguments": pl.String, "command": pl.String})


@contextlib.contextmanager
def _as_large_log() -> Iterator[None]:
    """Classify as a large log is: rewriting only the rows that need it, bisecting the rules and
    cutting heredocs with one pattern per delimiter word, however few the rows."""
    saved = _vectorised.SELECT_ROWS_FROM, _vectorised.BISECT_FROM, _vectorised._COMMON_DELIMITER
    _vectorised.SELECT_ROWS_FROM = _vectorised.BISECT_FROM = 0
    _vectorised._COMMON_DELIMITER = 1
    try:
        yield
    finally:
        _vectorised.SELECT_ROWS_FROM, _vectorised.BISECT_FROM, _vectorised._COMMON_DELIMITER = saved


def _check_agreement(frame: pl.DataFrame) -> None:
    result = classify_calls(frame, explain=True)
    with _as_large_log():
        assert classify_calls(frame, explain=True).equals(result)
    for row, fast in zip(frame.iter_rows(named=True), result.iter_rows(named=True)):
        slow = explain_call_slow(row["tool_name"], row["arguments"], row["command"])
        assert (fast["primary_class"], fast["decided_by"], fast["tool_entry"]) == (
            slow.klass, slow.decided_by, slow.tool_entry), row
        if row["command"] is not None and fast["tool_entry"] is None:
            assert fast["action_classes"] == shell_action_classes(bounded_command(row["command"])), row


FUZZ = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@FUZZ
@given(st.lists(commands, min_size=1, max_size=25))
def test_agree_on_hostile_commands(texts):
    _check_agreement(_frame(["bash"] * len(texts), ["{}"] * len(texts), texts))


@FUZZ
@given(st.lists(commands, min_size=1, max_size=15))
def test_agree_on_hostile_commands_in_arguments(texts):
    arguments = [json.dumps({"command": t}) for t in texts] + [json.dumps({"cmd": ["bash", "-lc", t]}) for t in texts]
    _check_agreement(_frame(["execute_bash"] * len(arguments), arguments, [None] * len(arguments)))


tool_names = st.one_of(
    st.sampled_from(["str_replace_editor", "file_editor", "open", "browser", "browser_click", "think", "search",
                     "mcp__github__search_code", "fs__read_file", "BASH", "Str_Replace_Editor", "debug_start", "run"]),
    TEXT,
)
argument_values = st.one_of(TEXT, st.sampled_from(["view", "create", "goto('http://x')", "click('a')"]),
                            st.integers(-2**70, 2**70), st.floats(allow_nan=False, allow_infinity=False),
                            st.booleans(), st.none(), st.lists(TEXT, max_size=3))
arguments_json = st.one_of(
    st.dictionaries(st.sampled_from(["command", "cmd", "path", "code", "x"]), argument_values, max_size=4).map(json.dumps),
    TEXT,
    st.just("[1, 2"),
    st.integers(1, 5000).map(lambda depth: '{"command": ' + "[" * depth + "]" * depth + "}"),
)


@FUZZ
@given(st.lists(st.tuples(tool_names, arguments_json, st.one_of(st.none(), commands)), min_size=1, max_size=25))
def test_agree_on_hostile_tool_calls(rows):
    _check_agreement(_frame([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]))


MEGABYTE = 1 << 20
PATHOLOGICAL = [
    "'" * MEGABYTE,
    '"' * MEGABYTE,
    "a" * MEGABYTE,
    "<<EOF\n" * (MEGABYTE // 6),
    "$(" * (MEGABYTE // 2),
    "cat <<EOF\n" + "x\n" * (MEGABYTE // 2),
    ("pytest -k 'a or b' | tail -5 && " * (MEGABYTE // 32)),
    "\\" * MEGABYTE,
    " " * MEGABYTE + "pytest",
    "x=" * (MEGABYTE // 2),
    "sudo " * (MEGABYTE // 5) + "pytest",
]


def test_megabyte_commands_cost_bounded_time():
    frame = _frame(["bash"] * len(PATHOLOGICAL), ["{}"] * len(PATHOLOGICAL), PATHOLOGICAL)
    started = time.perf_counter()
    fast = classify_calls(frame)["primary_class"].to_list()
    vectorised = time.perf_counter() - started
    slowest = 0.0
    slow = []
    for text in PATHOLOGICAL:
        started = time.perf_counter()
        slow.append(explain_call_slow("bash", "{}", text).klass)
        slowest = max(slowest, time.perf_counter() - started)
    assert fast == slow
    assert vectorised < 5.0, f"vectorised batch of {len(PATHOLOGICAL)} megabyte commands took {vectorised:.1f} s"
    assert slowest < 5.0, f"the reference took {slowest:.1f} s on one megabyte command"


UNICODE_CLASS_CHARACTERS = ["\u0301", "\u0903", "²", "٣", "‿", "ǅ", "ⅷ", "\u200d", "\u00a0", "\u2028", "\x85", "é"]
"""Characters that Rust's Unicode ``\\w``/``\\s``/``\\b`` and Python's disagree on (combining
marks, other numbers, connector punctuation, joiners, non-ASCII blanks): both classifiers read
those classes as ASCII, so these must not change any label differently."""
UNICODE_SHAPES = [
    "cat <<EOF{c}\nx\nEOF{c}\npytest", "x{c}=1 pytest", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT{c}",
    "cat <<E{c}OF\nx\nE{c}OF\nls", "A{c}=1 B=2 python x.py", "pytest -k a{c} tests/test_x{c}.py", "cd /x &&{c}pytest",
    "pytest{c}-q", "timeout 3{c} pytest", "sed -i{c} s/a/b/ f",
]


def test_agree_where_unicode_classes_differ():
    texts = [shape.replace("{c}", c) for shape in UNICODE_SHAPES for c in UNICODE_CLASS_CHARACTERS]
    _check_agreement(_frame(["bash"] * len(texts), ["{}"] * len(texts), texts))

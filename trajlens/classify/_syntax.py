"""Shell-syntax patterns shared by the vectorised classifier and its per-row reference.

Each constant is one rewrite of the command text, applied in the order the engines list them.
They use only the subset of regular-expression syntax that Rust's ``regex`` (Polars) and
Python's ``re`` read the same way: no look-around, no back-references; ``\\w``, ``\\d``,
``\\s`` and ``\\b`` are ASCII in both (:func:`rust_regex` and :func:`python_regex`; a shell
splits words on ASCII blanks, and Unicode classes differ between the two engines). Replacement strings are
given once in ``${1}`` form; :func:`python_replacement` turns them into ``\\g<1>`` for ``re``.

Control characters mark what the rewrites found: ``SEGMENT`` between the actions of a chain,
``PIPE`` between the stages of a pipeline, ``AMP`` for an ``&`` that belongs to a redirection.
"""

from __future__ import annotations

import re
from functools import lru_cache

MAX_COMMAND_CHARS = 65_536
"""Characters of a command that are classified; the rest of a longer command is ignored. Real
commands, heredoc file bodies included, are far shorter; the cap bounds the cost of a
pathological one (a megabyte of quotes or nested heredoc markers) in both classifiers."""

SEPARATOR_CONTROLS = "[\x1c-\x1f]"
"""The ASCII information separators: Python's ``re`` and ``str.strip`` count them as white
space, Rust's ``regex`` does not. Both classifiers read them as spaces, in commands and in the
argument values a tool map matches."""

MAX_JSON_DEPTH = 127
"""Arguments nested deeper than this are read as no arguments at all (the limit of the JSON
reader Polars uses; the reference applies the same limit)."""

SEGMENT = "\x00"
PIPE = "\x01"
AMP = "\x02"

QUOTED_MARK = "__Q__"
SUBST_MARK = "__S__"
HEREDOC_MARK = "__HEREDOC__"
HERESTRING_MARK = "__HERESTRING__"
MARKS_PATTERN = r"__(?:Q|S|HEREDOC|HERESTRING)__"

# -- whole-command rewrites, in order ----------------------------------------------------------

SWE_AGENT_BLOCK = (r"(?s)^((?:edit|insert|append)\b[^\n]*)\n.*$", "${1}")
"""SWE-agent's multi-line ``edit 10:12 ... end_of_edit`` is one action: keep its first line."""

COMMENT_LINES = (r"(?m)^[ \t]*#[^\n]*", "")
"""Whole-line shell comments (agents narrate in them, with unbalanced apostrophes)."""

CONTINUATIONS = (r"\\\n", " ")

_SHELL_OPTIONS = r"(?:\s+(?:[-+][a-zA-Z]*[oO]\s+[a-z]\w*|--[a-z][\w-]*|-[a-zA-Z]+))*?"
"""A shell's options before ``-c``: flags, ``-o pipefail`` (``-euo pipefail``), ``-O extglob``, ``--login``."""

UNWRAP_SINGLE = (r"(^|\s)(?:\S*/)?(?:ba|z)?sh" + _SHELL_OPTIONS + r"\s+-[a-zA-Z]*c\s+'([^']*)'", "${1}${2}")
"""``bash -lc 'cmd'`` -> ``cmd``."""

UNWRAP_DOUBLE = (r"(^|\s)(?:\S*/)?(?:ba|z)?sh" + _SHELL_OPTIONS + r"\s+-[a-zA-Z]*c\s+\"((?:[^\"\\]|\\.)*)\"", "${1}${2}")
"""``bash -c "cmd"`` -> ``cmd`` (escaped quotes inside stay escaped and later hide as quotes)."""

HERESTRING = (r"<<<", f" {HERESTRING_MARK} ")

HEREDOC_DELIMITER = r"(?:^|\s)<<-?[ \t]*['\"]?([A-Za-z_]\w*)"
"""Finds the delimiter word of the first heredoc (``<<'EOF'``, ``<<-END``, ``<< PY``)."""


def heredoc_pattern(delimiter: str) -> str:
    """The pattern that splits a command around its heredoc whose delimiter is ``delimiter``.

    Groups: 1 the text before ``<<``, 2 the rest of the ``<<`` line (``> f.py``, ``| python``),
    3 the text after the terminating line (absent when the heredoc ends the command). The
    operator is the earliest: the empty text before it is tried first, so a heredoc that starts
    the command is not passed over for a later one (``<<'PY'\\n...\\nPY cd x <<'PY'...``). The
    terminating line is the earliest after the ``<<`` line: an empty body is tried first (``??``),
    so ``<<EOF\\nEOF\\npython f.py\\nEOF`` ends at its second line, as a shell ends it.
    """
    return (
        r"(?s)^(|.*?\s)<<-?[ \t]*['\"]?" + delimiter + r"['\"]?([^\n]*)\n(?:.*?\n)??[ \t]*"
        + delimiter + r"[ \t]*(?:\n(.*))?$"
    )


HEREDOC_UNTERMINATED = (r"(?s)(^|\s)<<-?[ \t]*['\"]?[A-Za-z_]\w*['\"]?([^\n]*).*$", f"${{1}} {HEREDOC_MARK} ${{2}}")
"""A heredoc whose terminator is missing (a truncated log): its body runs to the end."""

HEREDOC_PASSES = 3
"""Heredocs hidden per command; a fourth in one command is left as text."""

COMMAND_SUBSTITUTION = (r"\$\([^()]*\)|`[^`]*`", SUBST_MARK)

PLAIN_QUOTED = (r"'([\w./+:@,=~*%{}\[\]-]*)'|\"([\w./+:@,=~*%{}\[\]-]*)\"", "${1}${2}")
"""A quoted single plain word is unquoted (``"tests/x.py"`` -> ``tests/x.py``)."""

QUOTED = (r"\\.|'[^']*'|\"(?:[^\"\\]|\\.)*\"", QUOTED_MARK)
"""Every other quoted string (and backslash escape) hides behind ``__Q__``."""

TRAILING_COMMENT = (r"(^|\s)#[^\n]*", "${1}")

CHAIN_SEPARATORS = (r"&&|\|\||;;|;|\n", SEGMENT)
PIPES = (r"\|&?", PIPE)
REDIRECT_AMPERSANDS = ((r"&>", AMP + ">"), (r">&", ">" + AMP))
BACKGROUND = (r"&", SEGMENT)

# -- per-action rewrites, in order -------------------------------------------------------------

LEADING_SYNTAX = (r"^(?:\(\s*|\{\s+|!\s+|(?:then|do|else|elif|if|while|until)\s+)+", "")
TRAILING_SYNTAX = (r"(?:\s*\)|\s+\})+$", "")

FD_DUPLICATION = (r"\d*[<>]&\d*-?", "")
DEVICE_REDIRECT = (r"(?:\d|&)?>>?\|?\s*/dev/(?:null|stdout|stderr|tty)\b", "")
FILE_REDIRECT = r"(?:\d|&)?>>?\|?\s*[^\s<>|&;]+"
"""An output redirection into a file; after the two rewrites above, every ``>`` left is one."""
FILE_REDIRECT_TARGET = (r"^(?:\d|&)?>>?\|?\s*", "")
INPUT_REDIRECT = (r"\d*<\s*[^\s<>]+", "")

GENERIC_BIN = (r"^(?:/usr)?(?:/local)?/s?bin/", "")
VENV_BIN = (
    r"^\S*/bin/((?:python|pypy)[\d.]*|ipython3?|pip[\d.]*|pytest|py\.test|tox|nox|coverage)(\s|$)",
    "${1}${2}",
)
XARGS = r"^xargs(?:\s+-[IdLnPsE]\s*\S+|\s+-\S+)*\s+"
INTERPRETER = (
    r"^(?:(?:python|pypy)[\d.]*|ipython3?)(?:\s+(?:-[WX]\s*\S+|-[bBdEiIOqsSuvR]+))*(\s|$)",
    "python${1}",
)
COVERAGE_RUN = (r"^(?:(?:python|pypy)[\d.]*\s+-m\s+)?coverage\s+run(?:\s+--[\w-]+(?:=\S+)?)*\s+", "python ")
PYTEST_ALIAS = (r"^py\.test(\s|$)", "pytest${1}")
WHITESPACE = (r"\s+", " ")
WRAPPER_PASSES = 3

ASSIGNMENT_ONLY = r"^[A-Za-z_]\w*=\S*$"

# -- argv arrays -------------------------------------------------------------------------------

_JSON_STRING = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u(?:[0-9a-cA-CefEF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))*"'
ARGV_STRINGS = r"^\[\s*(?:" + _JSON_STRING + r"\s*(?:,\s*" + _JSON_STRING + r"\s*)*)?\]$"
"""A JSON array of strings: a command logged as argv (``["bash", "-lc", "pytest -q"]``). Only
valid JSON strings count, and none with a ``\\uD800``-``\\uDFFF`` escape (a surrogate, which
Arrow strings cannot hold): such an array is classified as the text it is."""
ARGV_SHELL = r"^(?:\S*/)?(?:ba|z)?sh$"
ARGV_SCRIPT_FLAG = r"^-[a-zA-Z]*c$"
"""``[shell, -c/-lc, script]`` is the script itself."""
ARGV_PLAIN_WORD = r"^[\w./+:@,=%-]+$"
"""An argv word that needs no quoting when the words are joined into one command line."""

# -- paths -------------------------------------------------------------------------------------

PATH_HEAD = (r"^(?:python -m \S+|python -c|git \S+|str_replace_editor \S+|\S+)", "")
PATTERN_FIRST_HEADS = r"^(?:grep|egrep|fgrep|rg|ag|ack|sed|awk|gawk|jq|perl)(?:\s|$)"
"""Commands whose first positional word is a pattern or script, not a file."""
PATTERN_OPTION_VALUES = (r"\s-[ABCm]\s+\d+|\s-[nc]\s+[+-]?\d+|\s-[Fv]\s+\S+", "")
FIRST_POSITIONAL = (r"^((?:\s+-\S+)*)\s+[^\s-]\S*", "${1}")
FIND_EXPRESSION = (r"\s[-(!].*$", "")
"""``find DIR -name x ...``: only the starting points before the expression are paths."""
NO_PATH_HEADS = r"^(?:edit|insert|append|goto|scroll_up|scroll_down|submit)(?:\s|$)"
"""SWE-agent commands whose words are text or line numbers, never paths."""
NODE_ID = (r"::\S*", "")
MARKS = (r"\S*" + MARKS_PATTERN + r"\S*", "")
"""A word holding a marker is no path: part of it is hidden (``\"$D\"/d.py``, ``$(pwd)/x.py``)."""
PATH_LIKE = r"^[\w.~/][\w.~/+@%,=-]*$"
"""A word that may be a path; an option (``-x``, ``--flag=v``) is not one, as it starts with ``-``."""
NOT_A_PATH = r"^(?:\.{1,2}/?|/|[\d.,:]+[a-z]?|[\w-]+)$"
"""Dot directories, numbers and ranges, and bare words (no ``/`` or ``.``) are not paths, but for
:data:`FILE_NAMES`."""
FILE_NAMES: tuple[str, ...] = (
    "Makefile", "makefile", "GNUmakefile", "Dockerfile", "Containerfile", "Jenkinsfile", "Vagrantfile",
    "Gemfile", "Rakefile", "Procfile", "Pipfile", "Justfile", "justfile", "LICENSE", "README", "CHANGELOG",
    "AUTHORS", "NOTICE", "CODEOWNERS",
)
"""Bare words that name files by convention (``cat Makefile``, ``sed -i ... Dockerfile``): paths."""
LEADING_DOT_SLASH = (r"^(?:\./)+", "")

COPY_HEADS: tuple[str, ...] = ("cp", "install", "ln")
"""Commands that read every file they name but the last, and write the last: an edit of that one."""

PATH_CLASSES: tuple[str, ...] = ("edit", "view", "search", "run_script", "test_suite", "test_targeted")
"""Actions whose arguments are read as paths (an ``other`` action's words are not)."""

SWE_AGENT_FILE_OPENERS: frozenset[str] = frozenset({"open", "create"})
SWE_AGENT_CURRENT_FILE_USERS: frozenset[str] = frozenset(
    {"edit", "insert", "append", "goto", "scroll_up", "scroll_down"}
)
"""SWE-agent commands that act on the file last opened when they name none."""


def python_replacement(replacement: str) -> str:
    """``${1}`` -> ``\\g<1>``: the same replacement for ``re.sub``."""
    return re.sub(r"\$\{(\d+)\}", r"\\g<\1>", replacement)


_ASCII_SETS = {"w": "0-9A-Za-z_", "d": "0-9", "s": "\\t\\n\\x0B\\x0C\\r "}


@lru_cache(maxsize=4096)
def rust_regex(pattern: str) -> str:
    """``pattern`` for Polars (Rust ``regex``), read as Python's ``re`` reads it with
    ``re.ASCII``: ``\\w``, ``\\d``, ``\\s`` and ``\\b`` (and their negations) become their ASCII
    forms, which Rust would otherwise read as Unicode classes (combining marks are word
    characters to Rust, not to Python). Raises ValueError for a negated class escape inside
    brackets (``[^\\S]``), which has no ASCII spelling here."""
    out: list[str] = []
    i, class_start = 0, -1
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            escape = pattern[i + 1]
            lower = escape.lower()
            if lower in _ASCII_SETS:
                negated = escape != lower
                if class_start >= 0:
                    if negated:
                        raise ValueError(f"\\{escape} inside [...] is not supported: {pattern!r}")
                    out.append(_ASCII_SETS[lower])
                else:
                    out.append(f"[{'^' if negated else ''}{_ASCII_SETS[lower]}]")
            elif escape in "bB" and class_start < 0:
                out.append(f"(?-u:\\{escape})")
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if class_start < 0 and char == "[":
            class_start = i
            out.append(char)
            i += 1
            # `]` first in a set (after an optional `^`) is a literal
            if pattern[i:i + 1] == "^":
                out.append("^")
                i += 1
            if pattern[i:i + 1] == "]":
                out.append("\\]")
                i += 1
            continue
        if class_start >= 0 and char == "]":
            class_start = -1
        out.append(char)
        i += 1
    return "".join(out)


def python_regex(pattern: str) -> "re.Pattern[str]":
    """``pattern`` compiled for Python's ``re`` with ``re.ASCII`` (see :func:`rust_regex`)."""
    return re.compile(pattern, re.ASCII)

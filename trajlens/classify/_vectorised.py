"""The vectorised shell classifier: whole columns of commands in, actions and classes out.

Every step is a Polars expression over a column: regex rewrites, splits and explodes into one
row per pipeline stage, and the first rule of :data:`~trajlens.classify.rules.SHELL_RULES` each
stage matches, found by bisecting the alternation of the rules (:func:`with_first_rule`). No
Python code runs per row. Rewrites that only some rows need (wrappers, redirections, quotes,
comments) run on those rows alone and are put back in place: every step keeps row order. Each
distinct stage text is normalised and classified once. The one step that regular expressions without back-references cannot
do in a single pass, cutting out a heredoc whose terminator repeats its delimiter, is done per
delimiter word: rows are grouped by the word, and each group is cut with one pattern.

:func:`trajlens.classify.reference.classify_command_slow` is the per-row reference this module
must agree with; both read their patterns from :mod:`trajlens.classify._syntax`.
"""

from __future__ import annotations

import re._constants as _re_constants  # Python's own regex parser: what a rule's match must start with
import re._parser as _re_parser
from collections.abc import Sequence
from functools import lru_cache, reduce
from typing import Any, Callable

import polars as pl

from trajlens.classify import _syntax as sx
from trajlens.classify.rules import (
    NO_RULE,
    NOT_ACTIONS,
    PIPE_FILTERS,
    PRIORITY,
    REDIRECT_RULE,
    SHELL_RULES,
    WRAPPER_PATTERN,
    Rule,
)


_EDIT_PRIORITY = PRIORITY["edit"]


def _sub(expr: pl.Expr, rewrite: tuple[str, str], *, all_matches: bool = True) -> pl.Expr:
    pattern, replacement = rewrite
    pattern = sx.rust_regex(pattern)
    return expr.str.replace_all(pattern, replacement) if all_matches else expr.str.replace(pattern, replacement)


def _chain(expr: pl.Expr, *rewrites: tuple[str, str]) -> pl.Expr:
    return reduce(lambda e, r: _sub(e, r), rewrites, expr)


def normalise_commands(frame: pl.DataFrame, column: str = "text") -> pl.DataFrame:
    """Rewrite whole commands: SWE-agent blocks, comments, ``bash -c`` wrappers, heredocs,
    quotes and separators. Returns ``column`` with chain separators and pipes as markers.

    A rewrite that can only change a text containing some literal (a comment needs ``#``) runs
    on the rows that contain it, found with one cheap search.
    """
    frame = _rewrite_rows(frame, column, "\r\n", lambda t: t.str.replace_all("\r\n", "\n", literal=True))
    frame = frame.with_columns(pl.col(column).str.strip_chars())
    frame = _rewrite_rows(frame, column, "\n", lambda t: _sub(t, sx.SWE_AGENT_BLOCK, all_matches=False))
    frame = _rewrite_rows(frame, column, "#", lambda t: _sub(t, sx.COMMENT_LINES))
    frame = _rewrite_rows(frame, column, r"\\\n", lambda t: _sub(t, sx.CONTINUATIONS))
    # Both unwrappings need `sh` followed by blanks and an option.
    frame = _rewrite_rows(frame, column, r"sh\s+-", lambda t: _sub(_sub(t, sx.UNWRAP_SINGLE), sx.UNWRAP_DOUBLE))
    frame = _rewrite_rows(frame, column, "<<<", lambda t: _sub(t, sx.HERESTRING))
    frame = _hide_heredocs(frame, column)
    frame = _rewrite_rows(frame, column, r"\$\(|`", lambda t: _sub(t, sx.COMMAND_SUBSTITUTION))
    frame = _rewrite_rows(frame, column, r"[\\'\"]", lambda t: _chain(t, sx.PLAIN_QUOTED, sx.QUOTED))
    frame = _rewrite_rows(frame, column, "#", lambda t: _sub(t, sx.TRAILING_COMMENT))
    frame = frame.with_columns(_chain(pl.col(column), sx.CHAIN_SEPARATORS, sx.PIPES))
    # A text may hold the AMP marker itself; it becomes `&` as the marked ones do.
    return _rewrite_rows(
        frame, column, f"[&{sx.AMP}]",
        lambda t: _chain(t, *sx.REDIRECT_AMPERSANDS, sx.BACKGROUND).str.replace_all(sx.AMP, "&", literal=True),
    )


SELECT_ROWS_FROM = 5_000
"""Rows from which :func:`_rewrite_rows` picks out the rows a rewrite can change; on fewer, the
search and the putting back cost more than rewriting every row."""


def _rewrite_rows(frame: pl.DataFrame, column: str, needs: str, rewrite: Callable[[pl.Expr], pl.Expr]) -> pl.DataFrame:
    """``rewrite`` applied to ``column`` on the rows where the pattern ``needs`` is found (the
    caller's guarantee is that ``rewrite`` leaves every other text unchanged): :func:`_where` on
    that column alone, or every row of a small frame."""
    if frame.height < SELECT_ROWS_FROM:
        return frame.with_columns(rewrite(pl.col(column)))
    text = frame.select(column)
    found = pl.col(column).str.contains(sx.rust_regex(needs))
    rewritten = _where(text, found, lambda rows: rows.with_columns(rewrite(pl.col(column))), (column,))
    return frame.with_columns(rewritten.get_column(column))


def _hide_heredocs(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """Replace each heredoc (operator and body) by the heredoc marker, up to HEREDOC_PASSES.

    The pattern that finds a heredoc's end depends on its delimiter word, so rows are grouped
    by delimiter and each group is matched with one pattern; the rare delimiters left over
    (fewer than ``_COMMON_DELIMITER`` rows each) are matched with a pattern built per row.
    Only the rows with a heredoc are rewritten; they are put back in place.
    """
    text = frame.get_column(column)
    has = text.str.contains(sx.rust_regex(sx.HEREDOC_DELIMITER))
    todo = pl.DataFrame([text.filter(has), pl.Series("__order", range(frame.height), dtype=pl.UInt32).filter(has)])
    if todo.height == 0:
        return frame
    done = []
    for _ in range(sx.HEREDOC_PASSES):
        if todo.height == 0:
            break
        todo = todo.with_columns(pl.col(column).str.extract(sx.rust_regex(sx.HEREDOC_DELIMITER), 1).alias("__delimiter"))
        counts = todo.group_by("__delimiter").len()
        common = counts.filter(pl.col("len") >= _COMMON_DELIMITER)["__delimiter"].to_list()
        parts = [_cut_heredoc(todo.filter(pl.col("__delimiter") == d), column, d) for d in common]
        parts.append(_cut_heredoc(todo.filter(~pl.col("__delimiter").is_in(common)), column, None))
        todo = pl.concat(parts).drop("__delimiter")
        again = pl.col(column).str.contains(sx.rust_regex(sx.HEREDOC_DELIMITER))
        done.append(todo.filter(~again))
        todo = todo.filter(again)
    rewritten = pl.concat([*done, todo])
    return frame.with_columns(text.scatter(rewritten["__order"], rewritten[column]))


_COMMON_DELIMITER = 8


def _cut_heredoc(rows: pl.DataFrame, column: str, delimiter: str | None) -> pl.DataFrame:
    """Cut the first heredoc of each row: all rows share ``delimiter``, or (None) each row's
    ``__delimiter`` column gives its own."""
    text = pl.col(column)
    if delimiter is not None:
        groups = text.str.extract_groups(sx.rust_regex(sx.heredoc_pattern(delimiter)))
        before, line_rest, after = (groups.struct.field(name) for name in ("1", "2", "3"))
    else:
        start, middle, end = sx.rust_regex(sx.heredoc_pattern("\x00")).split("\x00")
        word = pl.col("__delimiter")
        per_row = pl.concat_str([pl.lit(start), word, pl.lit(middle), word, pl.lit(end)])
        before, line_rest, after = (text.str.extract(per_row, group) for group in (1, 2, 3))
    terminated = pl.concat_str([before, pl.lit(f" {sx.HEREDOC_MARK} "), line_rest, pl.lit("\n"), after.fill_null("")])
    rows = rows.with_columns(terminated.alias("__terminated"))
    # A heredoc without its terminator (rare) runs to the end: cut on those rows alone.
    unterminated = pl.col("__terminated").is_null()
    rows = _where(rows, unterminated, lambda t: t.with_columns(_sub(text, sx.HEREDOC_UNTERMINATED, all_matches=False)), (column,))
    return rows.with_columns(pl.coalesce("__terminated", column).alias(column)).drop("__terminated")


def split_actions(frame: pl.DataFrame, column: str = "text") -> pl.DataFrame:
    """One row per pipeline stage, in command order, as ``action``; ``piped`` says whether the
    stage reads an earlier one's output (``a | b``: ``b``).

    A pipe marker becomes a chain separator followed by the pipe marker, so one split cuts
    both, and a stage that starts with the pipe marker is piped.
    """
    stages = pl.col(column).str.replace_all(sx.PIPE, sx.SEGMENT + sx.PIPE, literal=True).str.split(sx.SEGMENT)
    frame = frame.with_columns(stages.alias("action")).drop(column).explode("action")
    return frame.with_columns(
        pl.col("action").str.strip_prefix(sx.PIPE), pl.col("action").str.starts_with(sx.PIPE).alias("piped")
    )


def _where(
    frame: pl.DataFrame, mask: pl.Expr, transform: Callable[[pl.DataFrame], pl.DataFrame], changes: Sequence[str] = (),
    **defaults: pl.Expr,
) -> pl.DataFrame:
    """Apply ``transform`` only to the rows where ``mask`` holds; the others get ``defaults``
    for the columns ``transform`` adds and keep their values of the columns it ``changes``.

    Expensive rewrites that only a few rows need (wrappers, redirections, grep patterns) run on those
    rows alone; the results are put back in place, so row order is kept.
    """
    selected = frame.select(mask.fill_null(False)).to_series()
    done = transform(frame.filter(selected))
    positions = selected.arg_true()
    columns: list[pl.Series | pl.Expr] = []
    for name in (*changes, *defaults):
        values = done.get_column(name)
        if name in changes:
            others = frame.get_column(name)
        elif values.dtype.is_nested():
            # Lists cannot be scattered: the rows of `done` are gathered to their places.
            position = (selected.cast(pl.UInt32).cum_sum() - 1).zip_with(selected, pl.Series([None], dtype=pl.UInt32))
            columns.append(pl.when(selected).then(values.gather(position)).otherwise(defaults[name]).alias(name))
            continue
        else:
            others = frame.select(pl.repeat(defaults[name], frame.height).alias(name)).to_series()
        columns.append(others.cast(values.dtype).scatter(positions, values))
    return frame.with_columns(columns)


_WRAPPED = "|".join(
    f"(?:{p})" for p in (sx.GENERIC_BIN[0], sx.VENV_BIN[0], WRAPPER_PATTERN, sx.XARGS, sx.COVERAGE_RUN[0])
)


def normalise_actions(frame: pl.DataFrame) -> pl.DataFrame:
    """Normalise each stage's text (see the module docstring of :mod:`trajlens.classify.rules`).

    Adds ``writes`` (file targets of output redirections), ``via_xargs`` and ``head``.
    """
    action = _chain(pl.col("action").str.strip_chars(), sx.LEADING_SYNTAX, sx.TRAILING_SYNTAX)
    frame = frame.with_columns(action.alias("action"))
    frame = _where(
        frame, pl.col("action").str.contains("[<>]"), _redirections, ("action",),
        writes=pl.lit([], dtype=pl.List(pl.String)),
    )
    frame = _where(
        frame, pl.col("action").str.contains(sx.rust_regex(_WRAPPED)), _unwrap, ("action",), via_xargs=pl.lit(False)
    )
    frame = _rewrite_rows(frame, "action", r"^(?:python|pypy|ipython)", lambda t: _sub(t, sx.INTERPRETER))
    frame = _rewrite_rows(frame, "action", r"^py\.test", lambda t: _sub(t, sx.PYTEST_ALIAS))
    # Runs of blanks become one space: only texts with two blanks in a row, or another blank
    # than a space, change.
    frame = _rewrite_rows(frame, "action", r"\s\s|[\t\n\x0B\x0C\r]", lambda t: _sub(t, sx.WHITESPACE))
    return frame.with_columns(pl.col("action").str.strip_chars()).with_columns(
        pl.col("action").str.extract(sx.rust_regex(r"^(\S+)"), 1).alias("head")
    )


def _redirections(frame: pl.DataFrame) -> pl.DataFrame:
    """Record the files output redirections write, then remove every redirection."""
    action = _chain(pl.col("action"), sx.FD_DUPLICATION, sx.DEVICE_REDIRECT)
    frame = frame.with_columns(action.alias("action"))
    writes = pl.col("action").str.extract_all(sx.rust_regex(sx.FILE_REDIRECT)).list.eval(_sub(pl.element(), sx.FILE_REDIRECT_TARGET))
    action = _sub(pl.col("action").str.replace_all(sx.rust_regex(sx.FILE_REDIRECT), ""), sx.INPUT_REDIRECT).str.strip_chars()
    # `(cd x && pytest a.py) 2>&1`: the subshell's `)` is last only once the redirection is gone.
    return frame.with_columns(writes.alias("writes"), _sub(action, sx.TRAILING_SYNTAX).alias("action"))


def _strip_wrappers(action: pl.Expr) -> pl.Expr:
    for _ in range(sx.WRAPPER_PASSES):
        action = _chain(action, sx.GENERIC_BIN, sx.VENV_BIN).str.replace(sx.rust_regex(WRAPPER_PATTERN), "")
    return action


def _unwrap(frame: pl.DataFrame) -> pl.DataFrame:
    """Drop wrappers and assignments in front of the command, and an ``xargs`` prefix."""
    frame = frame.with_columns(_strip_wrappers(pl.col("action")).alias("action"))
    frame = frame.with_columns(
        pl.col("action").str.contains(sx.rust_regex(sx.XARGS)).alias("via_xargs"),
        pl.col("action").str.replace(sx.rust_regex(sx.XARGS), "").alias("action"),
    )
    return frame.with_columns(_sub(_strip_wrappers(pl.col("action")), sx.COVERAGE_RUN).alias("action"))


def first_rule(rules: tuple[Rule, ...] = SHELL_RULES, indices: Sequence[int] | None = None) -> pl.Expr:
    """Index of the first rule whose pattern matches the action; null where none does.

    All patterns (of the rules at ``indices``, every rule without) are searched at once (each a
    column of booleans), then the smallest matching index is taken across them: the same answer
    as trying the rules in order.
    """
    stripped: dict[str, pl.Expr] = {}
    hits = []
    for index in range(len(rules)) if indices is None else indices:
        rule = rules[index]
        text = pl.col("action")
        if rule.strip is not None:
            text = stripped.setdefault(rule.strip, pl.col("action").str.replace_all(sx.rust_regex(rule.strip), " "))
        hits.append(pl.when(text.str.contains(sx.rust_regex(rule.pattern))).then(pl.lit(index, dtype=pl.Int16)))
    return pl.min_horizontal(hits) if hits else pl.lit(None, dtype=pl.Int16)


def leading_chars(pattern: str) -> frozenset[str] | None:
    """The characters a text must start with for ``pattern`` (a Python ``re`` pattern) to match
    it; None when that cannot be told (not anchored at ``^``, flags, classes such as ``\\S``)."""
    import re

    try:
        parsed = _re_parser.parse(pattern)
    except re.error:
        return None
    if parsed.state.flags & (re.IGNORECASE | re.MULTILINE):
        return None
    items = list(parsed)
    if not items or items[0] != (_re_constants.AT, _re_constants.AT_BEGINNING):
        return None
    return _first_chars(items[1:])


def _first_chars(items: list[Any]) -> frozenset[str] | None:
    """The characters the first item of a parsed pattern consumes, when it must consume one."""
    c = _re_constants
    if not items:
        return None
    op, value = items[0]
    if op is c.LITERAL:
        return frozenset(chr(value))
    if op is c.IN:
        chars: set[str] = set()
        for member, argument in value:
            if member is c.LITERAL:
                chars.add(chr(argument))
            elif member is c.RANGE and argument[1] - argument[0] < 128:
                chars.update(chr(code) for code in range(argument[0], argument[1] + 1))
            else:
                return None
        return frozenset(chars)
    if op is c.BRANCH:
        found: set[str] = set()
        for branch in value[1]:
            first = _first_chars(list(branch))
            if first is None:
                return None
            found |= first
        return frozenset(found)
    if op is c.SUBPATTERN:
        _, add_flags, del_flags, inner = value
        return None if add_flags or del_flags else _first_chars(list(inner))
    if op in (c.MAX_REPEAT, c.MIN_REPEAT) and value[0] >= 1:
        return _first_chars(list(value[2]))
    return None


@lru_cache(maxsize=16)
def _rule_subsets(rules: tuple[Rule, ...]) -> tuple[frozenset[str] | None, ...]:
    """Per rule, the first characters of the actions it can match (None: any action). A rule's
    ``strip`` replaces what it matches by a space, so the text it searches starts with the
    action's first character or a space: a rule whose match cannot start with a space keeps its set."""
    subsets = []
    for rule in rules:
        chars = leading_chars(rule.pattern)
        subsets.append(None if chars is None or rule.strip is not None and " " in chars else chars)
    return tuple(subsets)


BISECT_FROM = 5_000
"""Actions from which :func:`with_first_rule` bisects the rules rather than searching each
(measured: bisecting is two to three times slower on 10 to 1,000 actions, faster from about 10,000)."""


def with_first_rule(frame: pl.DataFrame, rules: tuple[Rule, ...] = SHELL_RULES, column: str = "__rule") -> pl.DataFrame:
    """``frame`` with ``column``: :func:`first_rule` of each action, found by bisection.

    A text matches one of several patterns exactly when it matches their alternation, and one
    alternation is a single pass of the regex engine whatever the number of patterns. So the
    actions that match any rule are found in one pass, then split, pass by pass, between the
    first half of the rules they may match and the second, until one rule is left: about
    log2(rules) passes per action instead of one per rule. Rules that search a ``strip``-ped
    text are bisected on that text, computed only for the actions whose first character such a
    rule can match (:func:`leading_chars`); the smallest index found wins. Row order is kept.
    Below :data:`BISECT_FROM` actions, every rule is searched at once (:func:`first_rule`): one
    pass over a few texts costs less than the bisection's many.
    """
    if frame.height < BISECT_FROM:
        return frame.with_columns(first_rule(rules).alias(column))
    actions = frame.get_column("action")
    every = pl.Series("__position", range(frame.height), dtype=pl.UInt32)
    leading = _rule_subsets(rules)
    by_text: dict[str | None, list[int]] = {}
    for index, rule in enumerate(rules):
        by_text.setdefault(rule.strip, []).append(index)
    found: list[pl.Series] = []
    for strip, indices in by_text.items():
        texts, positions = actions, every
        if strip is not None:
            chars = [leading[i] for i in indices]
            if all(c is not None for c in chars):
                can = actions.str.slice(0, 1).is_in(sorted(frozenset().union(*chars)))  # type: ignore[arg-type]
                texts, positions = actions.filter(can), every.filter(can)
            texts = texts.str.replace_all(sx.rust_regex(strip), " ")
        rule_of, at = _bisect(texts, positions, rules, indices)
        found.append(scatter(frame.height, at, rule_of.alias(column)))
    if not found:
        return frame.with_columns(pl.lit(None, dtype=pl.Int16).alias(column))
    return frame.with_columns(pl.min_horizontal(found).alias(column))


def _alternation(rules: tuple[Rule, ...], indices: Sequence[int]) -> str:
    return "|".join(f"(?:{sx.rust_regex(rules[i].pattern)})" for i in indices)


def _bisect(
    texts: pl.Series, positions: pl.Series, rules: tuple[Rule, ...], indices: list[int]
) -> tuple[pl.Series, pl.Series]:
    """The first of the rules at ``indices`` (ascending) that each text matches, and the
    positions of the texts that match one; see :func:`with_first_rule`."""
    matched = texts.str.contains(_alternation(rules, indices)).fill_null(False)
    todo = [(texts.filter(matched), positions.filter(matched), indices)]
    rule_of: list[pl.Series] = []
    at: list[pl.Series] = []
    while todo:
        part, where, chosen = todo.pop()
        if part.len() == 0:
            continue
        if len(chosen) == 1:
            rule_of.append(pl.Series([], dtype=pl.Int16).extend_constant(chosen[0], part.len()))
            at.append(where)
            continue
        half = len(chosen) // 2
        first = part.str.contains(_alternation(rules, chosen[:half])).fill_null(False)
        todo.append((part.filter(first), where.filter(first), chosen[:half]))
        todo.append((part.filter(~first), where.filter(~first), chosen[half:]))
    if not at:
        return pl.Series([], dtype=pl.Int16), pl.Series([], dtype=pl.UInt32)
    return pl.concat(rule_of), pl.concat(at)


def classify_actions(frame: pl.DataFrame, rules: tuple[Rule, ...] = SHELL_RULES) -> pl.DataFrame:
    """Give each stage its class (``klass``), the class its command alone has (``rule_class``,
    before a redirection makes it an edit) and the name of the rule that decided (``rule``:
    :data:`REDIRECT_RULE` or :data:`NO_RULE` when no shell rule did); stages that are not
    actions are dropped."""
    return _with_classes(frame.filter(~(_never_an_action() | _filters_a_pipe())), rules)


def _never_an_action() -> pl.Expr:
    """Stages that are not actions wherever they stand (``cd x``, ``export X=1``, ``A=b``)."""
    head = pl.col("head")
    return head.is_null() | head.is_in(sorted(NOT_ACTIONS)) | pl.col("action").str.contains(sx.rust_regex(sx.ASSIGNMENT_ONLY))


def _filters_a_pipe() -> pl.Expr:
    """A later pipeline stage that only filters its input (``| tail -20``)."""
    writes_file = pl.col("writes").list.len() > 0
    return pl.col("piped") & ~pl.col("via_xargs") & pl.col("head").is_in(sorted(PIPE_FILTERS)) & ~writes_file


def _with_classes(frame: pl.DataFrame, rules: tuple[Rule, ...]) -> pl.DataFrame:
    """``rule_class``, ``klass`` and ``rule`` of each action (see :func:`classify_actions`)."""
    writes_file = pl.col("writes").list.len() > 0
    classes = {index: rule.klass for index, rule in enumerate(rules)}
    names = {index: rule.name for index, rule in enumerate(rules)}
    frame = with_first_rule(frame, rules)
    rule_class = pl.col("__rule").replace_strict(classes, default="other", return_dtype=pl.String)
    frame = frame.with_columns(rule_class.alias("rule_class"))
    priority = pl.col("rule_class").replace_strict(PRIORITY, return_dtype=pl.Int8)
    # An action that writes a file through a redirection is at least an edit.
    redirected = writes_file & (priority > _EDIT_PRIORITY)
    klass = pl.when(redirected).then(pl.lit("edit")).otherwise(pl.col("rule_class"))
    rule = (
        pl.when(redirected).then(pl.lit(REDIRECT_RULE))
        .otherwise(pl.col("__rule").replace_strict(names, default=NO_RULE, return_dtype=pl.String))
    )
    return frame.with_columns(klass.alias("klass"), rule.alias("rule")).drop("__rule")


def action_paths(frame: pl.DataFrame) -> pl.DataFrame:
    """The file paths each action names (its positional words that look like paths), plus the
    files its redirections write (``paths``); and the files it changes (``edited``): an edit's
    paths, but a copy's destination alone (``cp a b`` reads ``a``), and any action's writes."""
    # Words are paths only for actions whose own command takes files (not for `git diff > f`,
    # whose class comes from the redirection) and never for SWE-agent's text-taking commands.
    takes_files = pl.col("rule_class").is_in(list(sx.PATH_CLASSES)) & ~pl.col("action").str.contains(sx.rust_regex(sx.NO_PATH_HEADS))
    # An action that neither takes files nor writes one gets no paths: its candidate words are
    # none and its writes are none. Nine stages in ten take files, so no row is set aside.
    return _with_paths(frame, takes_files)


_NO_WORDS = pl.lit([], dtype=pl.List(pl.String))


def _rewrite_words(rewrite: tuple[str, str]) -> Callable[[pl.DataFrame], pl.DataFrame]:
    return lambda rows: rows.with_columns(_sub(pl.col("__words"), rewrite, all_matches=False))


def _with_paths(rows: pl.DataFrame, takes_files: pl.Expr) -> pl.DataFrame:
    words = _sub(_sub(pl.col("action"), sx.PATH_HEAD, all_matches=False), sx.PATTERN_OPTION_VALUES)
    rows = rows.with_columns(words.alias("__words"))
    # The first positional word of grep/sed/... is a pattern; find's expression names no files.
    pattern_first = pl.col("action").str.contains(sx.rust_regex(sx.PATTERN_FIRST_HEADS))
    for applies, rewrite in ((pattern_first, sx.FIRST_POSITIONAL), (~pattern_first & (pl.col("head") == "find"), sx.FIND_EXPRESSION)):
        rows = _where(rows, applies, _rewrite_words(rewrite), ("__words",))
    # Options (words that start with `-`) are no paths as they stand (sx.PATH_LIKE), so only
    # node ids are cut from the words, and words holding a marker dropped, on the rows that hold them.
    rows = _rewrite_rows(rows, "__words", "::", lambda t: _sub(t, sx.NODE_ID))
    rows = _rewrite_rows(rows, "__words", "__", lambda t: _sub(t, sx.MARKS))
    # Actions are normalised to single spaces (sx.WHITESPACE), so their words are split on
    # spaces; the empty words a cut leaves are no paths.
    path_like = pl.element().str.contains(sx.rust_regex(sx.PATH_LIKE)) & (
        ~pl.element().str.contains(sx.rust_regex(sx.NOT_A_PATH)) | pl.element().is_in(list(sx.FILE_NAMES)))
    candidates = pl.when(takes_files).then(pl.col("__words")).str.split(" ").list.filter(path_like)
    rows = rows.with_columns(candidates.fill_null(_NO_WORDS).alias("paths"))
    copied = pl.col("head").is_in(list(sx.COPY_HEADS))
    rows = rows.with_columns(
        pl.when(pl.col("klass") != "edit").then(_NO_WORDS)
        .when(copied).then(pl.col("paths").list.slice(-1, 1)).otherwise(pl.col("paths")).alias("edited"))
    # Few actions write files: their writes follow their words.
    rows = _where(
        rows, pl.col("writes").list.len() > 0,
        lambda written: written.with_columns(
            pl.concat_list(name, pl.col("writes").list.filter(path_like)).alias(f"__all_{name}") for name in ("paths", "edited")),
        __all_paths=pl.lit(None, dtype=pl.List(pl.String)), __all_edited=pl.lit(None, dtype=pl.List(pl.String)),
    )
    undotted = pl.element().str.replace(sx.rust_regex(sx.LEADING_DOT_SLASH[0]), sx.LEADING_DOT_SLASH[1])
    return rows.with_columns(
        pl.coalesce(f"__all_{name}", name).list.eval(undotted).alias(name) for name in ("paths", "edited")
    ).drop("__words", "__all_paths", "__all_edited")


def distinct_codes(values: pl.Series, key: pl.Series | None = None) -> tuple[pl.Series, pl.Series]:
    """Number the distinct values of a column: ``(codes, firsts)``, where ``codes[i]`` is the
    number of ``values[i]`` and ``firsts[k]`` the position of the first value numbered ``k``
    (so ``values.gather(firsts.gather(codes))`` equals ``values``); numbers follow first
    appearance.

    Values are grouped by ``key`` (default: their 64-bit hash), far cheaper to group than text;
    the grouping is then checked against the values themselves, and where two values share a
    key they are grouped by value instead.
    """
    codes, firsts = _group_codes(values.hash() if key is None else key)
    if values.gather(firsts.gather(codes)).eq_missing(values).all():
        return codes, firsts
    return _group_codes(values)


def _group_codes(key: pl.Series) -> tuple[pl.Series, pl.Series]:
    position = pl.Series("__position", range(key.len()), dtype=pl.UInt32)
    groups = pl.DataFrame([key.alias("__key"), position]).group_by("__key", maintain_order=True).agg("__position")
    numbered = groups.select("__position", pl.int_range(pl.len(), dtype=pl.UInt32).alias("__code")).explode("__position")
    codes = scatter(key.len(), numbered["__position"], numbered["__code"])
    return codes, groups.get_column("__position").list.first()


def scatter(height: int, positions: pl.Series, values: pl.Series) -> pl.Series:
    """A column of ``height`` nulls with ``values`` at ``positions``."""
    return pl.Series(values.name, [], dtype=values.dtype).extend_constant(None, height).scatter(positions, values)


def classify_shell(texts: pl.DataFrame, column: str = "text", key: str = "text_id", *, actions: bool = False) -> pl.DataFrame:
    """Classify a frame of shell commands (``key``, ``column``).

    Returns one row per input row with ``action_classes`` (list, in command order), ``priority``
    (of the primary class; null when the command has no action), ``rule`` (the rule of the
    first action with the primary class; null when there is no action), ``paths`` and
    ``edited_paths`` (the files its actions change: :func:`action_paths`); with
    ``actions``, also ``actions`` and ``action_rules``: each action's normalised text (the text the
    rules read) and the rule that gave it its class, beside its class.

    Every step keeps row order, so the actions of a command stay together and in order, and
    the per-command results are one pass over those runs.
    """
    frame = normalise_commands(texts.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("__text"), column), column)
    frame = split_actions(frame, column).select("__text", "piped", pl.col("action").alias("__raw"))
    # Stages repeat across commands (`cd /testbed`, `python -c __Q__`): each distinct one is
    # normalised, classified and read for paths once, then given to each stage it stands for.
    codes, firsts = distinct_codes(frame.get_column("__raw"))
    distinct = pl.DataFrame([frame.get_column("__raw").gather(firsts).alias("action")]).with_row_index("__code")
    distinct = normalise_actions(distinct).filter(~_never_an_action())
    distinct = action_paths(_with_classes(distinct, SHELL_RULES))
    # Each stage's row of `distinct`: null where its text is not an action.
    row = scatter(firsts.len(), distinct["__code"], pl.Series(range(distinct.height), dtype=pl.UInt32)).gather(codes)
    keep = row.is_not_null()
    row = row.drop_nulls()
    texts_of = ["action"] if actions else []
    frame = frame.select("__text", "piped").filter(keep)
    frame = frame.with_columns(
        distinct.get_column(name).gather(row)
        for name in ("head", "via_xargs", "writes", "klass", "rule", "paths", "edited", *texts_of)
    ).filter(~_filters_a_pipe())
    # the actions' texts and rules, in command order, beside their classes (deciding_actions)
    per_action = [pl.col("action").alias("actions"), pl.col("rule").alias("action_rules")] if actions else []
    priority = pl.col("klass").replace_strict(PRIORITY, return_dtype=pl.Int8)
    grouped = frame.with_columns(priority.alias("priority")).group_by("__text", maintain_order=True).agg(
        pl.col("klass").alias("action_classes"),
        pl.col("priority").min(),
        pl.col("rule").get(pl.col("priority").arg_min()),
        pl.col("paths").list.explode(keep_nulls=False, empty_as_null=False).unique(maintain_order=True),
        pl.col("edited").list.explode(keep_nulls=False, empty_as_null=False).unique(maintain_order=True),
        *per_action,
    )
    # Commands without an action have no group: their row of `grouped` is null.
    row = scatter(texts.height, grouped["__text"], pl.Series(range(grouped.height), dtype=pl.UInt32))
    empty = pl.lit([], dtype=pl.List(pl.String))
    return texts.select(key).with_columns(
        grouped.get_column("action_classes").gather(row).fill_null(empty),
        grouped.get_column("priority").gather(row),
        grouped.get_column("rule").gather(row),
        grouped.get_column("paths").gather(row).fill_null(empty),
        grouped.get_column("edited").gather(row).fill_null(empty).alias("edited_paths"),
        *(grouped.get_column(name).gather(row).fill_null(empty) for name in ("actions", "action_rules") if actions),
    )

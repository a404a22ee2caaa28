"""Classify a table of tool calls: :func:`classify_calls`.

A tool map (:mod:`trajlens.classify.tool_map`) decides by tool name and arguments when it can
(think, submit, SWE-agent's commands, file editors, search, browsers, MCP tools); calls of
shell tools, and calls of unmapped tools that carry a shell command, go through the vectorised
shell classifier in :mod:`trajlens.classify._vectorised`. Each distinct command text is classified
once and its results placed on each of its calls, so a log that repeats ``ls`` or ``git diff``
pays for it once. Tool names are matched once per distinct name; only the calls of tools with
argument-dependent entries (file editors) have their arguments read.

Calls the harness rejected (``format_error``) get a null ``primary_class`` and no actions: they
were never executed, so they stay out of every behaviour count and share.

A command longer than :data:`~trajlens.classify._syntax.MAX_COMMAND_CHARS` characters is
classified on its first that many characters, so one pathological command costs no more than
a long real one.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import polars as pl

from trajlens.classify import _syntax as sx
from trajlens.classify._vectorised import classify_shell, distinct_codes, scatter
from trajlens.classify.rules import (
    BEHAVIOUR_CLASSES,
    PATH_ARGUMENT_KEYS,
    SHELL_ARGUMENT_KEYS,
    SHELL_RULES_SOURCE,
    VERIFICATION_CLASSES,
)
from trajlens.classify.tool_map import SHELL, ToolEntry, ToolMapLike, resolve_tool_map
from trajlens.errors import FrameError
from trajlens.frames import as_frame

REQUIRED_COLUMNS: tuple[str, ...] = ("tool_name", "arguments", "command")
"""Columns :func:`classify_calls` needs; ``format_error`` and the trajectory keys are optional."""

ADDED_COLUMNS: tuple[str, ...] = ("primary_class", "action_classes", "paths", "edited_paths", "is_edit", "is_verification")
"""Columns :func:`classify_calls` adds."""
CALL_CLASS_COLUMNS: tuple[str, ...] = ("run_id", "step", "trajectory_id", "call_index", "tool_name", *ADDED_COLUMNS)
"""Columns of the saved ``call_classes`` table."""

EXPLAIN_COLUMNS: tuple[str, ...] = ("tool_entry", "decided_by", "rule_source")
"""Columns ``classify_calls(..., explain=True)`` adds as well:

``tool_entry``
    Id of the tool-map entry the call matched (null when none did).
``decided_by``
    What decided the primary class: ``tool map: <entry id>``, ``shell rule <name>`` (the rule
    of the first action with the primary class; ``redirect-to-file`` when an output
    redirection made it an edit, ``no-rule`` when no rule matched), ``shell: no action``
    (``cd /x``), ``shell tool without a command``, ``unmapped tool`` or ``format error``.
``rule_source``
    The tool-map file of the entry, or ``trajlens/classify/rules.py`` for shell rules.
"""

UNMAPPED = "unmapped tool"

_TRAJECTORY_KEYS = ("run_id", "trajectory_id", "call_index")


def classify_calls(tool_calls: Any, tool_map: ToolMapLike = None, *, explain: bool = False) -> pl.DataFrame:
    """Classify every tool call of a ``tool_calls`` table.

    ``tool_calls`` is a Polars DataFrame or LazyFrame (or an Arrow table) with at least the
    columns ``tool_name``, ``arguments`` (JSON text) and ``command`` (nullable shell command).
    ``tool_map`` is a tool-map file (tried before the shipped maps), a
    :class:`~trajlens.classify.tool_map.ToolMap`, or None for the shipped maps alone.
    Returns the same rows, in the same order, with six columns added:

    ``primary_class``
        The call's highest-priority behaviour class (:data:`BEHAVIOUR_CLASSES`); null for
        calls with ``format_error`` set.
    ``action_classes``
        One class per action of the call, in command order (``cd x && pytest`` gives
        ``["test_suite"]``: ``cd`` is not an action).
    ``paths``
        Files the call names (edited, viewed, searched or run), as written in the command.
    ``edited_paths``
        Files the call changes: its edits' paths (of ``cp a b`` only ``b``, which it writes) and
        the files its redirections write; none for a call that edits nothing.
    ``is_edit``, ``is_verification``
        Whether any action edits, or runs code to check the work (:data:`VERIFICATION_CLASSES`).

    With ``explain=True``, also the :data:`EXPLAIN_COLUMNS` saying which rule decided.
    """
    entries = resolve_tool_map(tool_map).entries
    frame = as_frame(tool_calls, "tool_calls")
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise FrameError("tool_calls", "classify_calls", missing[0])
    if "format_error" in frame.columns and frame.schema["format_error"] not in (pl.Boolean, pl.Null):
        raise TypeError(f"classify_calls: the tool_calls frame's column 'format_error' must hold booleans, "
                        f"found {frame.schema['format_error']}")
    clashing = [c for c in (*ADDED_COLUMNS, *EXPLAIN_COLUMNS) if c in frame.columns]
    if clashing:
        frame = frame.drop(clashing)
    work = frame.select(
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("__row"),
        pl.col("tool_name").cast(pl.String).fill_null("").str.to_lowercase().alias("__tool"),
        pl.col("arguments").cast(pl.String).alias("__arguments"),
        _bounded_text(pl.col("command").cast(pl.String)).alias("__text"),
        (pl.col("format_error").fill_null(False) if "format_error" in frame.columns else pl.lit(False)).alias("__rejected"),
        *[pl.col(k) for k in _TRAJECTORY_KEYS if k in frame.columns],
    )
    work = _match_tool_map(work, entries)
    klass = pl.col("__entry").replace_strict({i: e.klass for i, e in enumerate(entries)}, default=None,
                                             return_dtype=pl.String)
    work = work.with_columns(
        pl.when(klass != SHELL).then(klass).alias("__tool_class"),
        (klass == SHELL).fill_null(False).alias("__shell_tool"),
    )
    work = _fill_text_from_arguments(work)
    work = _fixed_class_paths(work)
    work, shell = _join_shell_results(work)
    work = _assemble(work, shell, entries, explain)
    if all(k in work.columns for k in _TRAJECTORY_KEYS):
        work = _swe_agent_current_file(work)
    explained = [pl.col(f"__{name}").alias(name) for name in EXPLAIN_COLUMNS] if explain else []
    result = work.select(
        pl.col("__primary").alias("primary_class"),
        pl.col("__actions").alias("action_classes"),
        pl.col("__paths").alias("paths"),
        pl.when(pl.col("__is_edit")).then(pl.col("__edited")).otherwise(_NO_PATHS).alias("edited_paths"),
        pl.col("__is_edit").alias("is_edit"),
        pl.col("__is_verification").alias("is_verification"),
        *explained,
    )
    return pl.concat([frame, result], how="horizontal")


HIDDEN_TEXT = sx.MARKS_PATTERN
"""The pattern of the markers that stand, in an action's normalised text, for text the rules do
not read: a quoted string, a command substitution, a heredoc or a here-string."""


def deciding_actions(commands: pl.Series, classes: pl.Series) -> pl.DataFrame:
    """For each shell command and the primary class its call was given, the command's first
    action of that class: the action that gave the call its class (``python -m pytest tests/a.py``
    of ``cd /repo && timeout 60 python3 -m pytest tests/a.py | tail``). Columns ``action``, its
    normalised text as the rules read it (wrappers and redirections gone, quoted text and
    heredocs standing as :data:`HIDDEN_TEXT` markers), and ``rule``, the rule that gave it its
    class (``redirect-to-file`` when an output redirection made it an edit). Null where no
    action of the command has the class (a tool map decided, or there is no command). Each
    distinct command is split and classified once, as :func:`classify_calls` does."""
    texts = commands.cast(pl.String).to_frame("text").select(_bounded_text(pl.col("text")))["text"]
    rows = pl.DataFrame({"text": texts, "class": classes.cast(pl.String)}).with_row_index("__row")
    given = rows.filter(pl.col("text").is_not_null() & pl.col("class").is_not_null())
    none = pl.Series([], dtype=pl.String).extend_constant(None, commands.len())
    found = pl.DataFrame({"action": none, "rule": none})
    if given.height == 0:
        return found
    codes, firsts = distinct_codes(given["text"])
    distinct = given.select(pl.col("text").gather(firsts)).with_row_index("text_id")
    shell = classify_shell(distinct, actions=True).select("action_classes", "actions", "action_rules")
    per_action = given.select("__row", "class", *(shell.get_column(c).gather(codes) for c in shell.columns)).explode(
        "action_classes", "actions", "action_rules")
    first = (per_action.filter(pl.col("action_classes") == pl.col("class"))
             .group_by("__row", maintain_order=True).agg(pl.col("actions").first(), pl.col("action_rules").first()))
    return found.with_columns(found["action"].scatter(first["__row"], first["actions"]),
                              found["rule"].scatter(first["__row"], first["action_rules"]))


def _bounded_text(command: pl.Expr) -> pl.Expr:
    """The part of a command that is classified (see the module docstring). Only a text with
    more bytes than the bound, or with a separator control, can change: the others are kept as
    they are rather than copied."""
    changes = (command.str.len_bytes() > sx.MAX_COMMAND_CHARS) | command.str.contains(sx.SEPARATOR_CONTROLS)
    bounded = command.str.slice(0, sx.MAX_COMMAND_CHARS).str.replace_all(sx.SEPARATOR_CONTROLS, " ")
    return pl.when(changes).then(bounded).otherwise(command)


def _name_condition(entry: ToolEntry) -> pl.Expr:
    tool = pl.col("__tool")
    return tool.is_in(list(entry.names)) if entry.names else tool.str.contains(sx.rust_regex(entry.pattern))


def _argument_value(key: str) -> pl.Expr:
    """The value of a top-level key of the JSON arguments, as tool-map argument patterns see it."""
    return pl.col("__arguments").str.json_path_match(f"$.{key}").str.replace_all(sx.SEPARATOR_CONTROLS, " ")


def _argument_column(key: str) -> str:
    return f"__argument {key}"


def _entry_condition(entry: ToolEntry) -> pl.Expr:
    """Whether a call matches ``entry``; reads the :func:`_argument_column` of each of its
    argument keys, which the caller adds."""
    condition = _name_condition(entry)
    for key, pattern in entry.arguments:
        condition = condition & pl.col(_argument_column(key)).str.contains(sx.rust_regex(pattern)).fill_null(False)
    if entry.command is not None:
        condition = condition & pl.col("__text").str.contains(sx.rust_regex(entry.command)).fill_null(False)
    return condition


def _first(conditions: list[tuple[int, pl.Expr]]) -> pl.Expr:
    if not conditions:
        return pl.lit(None, dtype=pl.Int32)
    return pl.min_horizontal([pl.when(c).then(pl.lit(i, dtype=pl.Int32)) for i, c in conditions])


def _match_tool_map(work: pl.DataFrame, entries: tuple[ToolEntry, ...]) -> pl.DataFrame:
    """Add ``__entry``: the index of the first tool-map entry each call matches (null: none).

    Names are matched once per distinct tool name. A tool whose first matching entry by name
    needs its arguments or command checked has all its calls matched row by row.
    """
    names = work.select(pl.col("__tool").unique()).with_columns(
        _first([(i, _name_condition(e)) for i, e in enumerate(entries) if not e.arguments and e.command is None])
        .alias("__plain"),
        _first([(i, _name_condition(e)) for i, e in enumerate(entries) if e.arguments or e.command is not None])
        .alias("__guarded"),
    )
    work = work.join(names, on="__tool", how="left", maintain_order="left")
    per_row = pl.col("__guarded").is_not_null() & (pl.col("__plain").is_null() | (pl.col("__guarded") < pl.col("__plain")))
    rows = work.filter(per_row & ~pl.col("__rejected"))
    if rows.height:
        # Only the guarded entries whose names match one of these tools can decide, else the
        # tool's first plain entry does; each argument key is read from the JSON once.
        tools = rows.select(pl.col("__tool").unique())
        guarded = [
            i for i, e in enumerate(entries)
            if (e.arguments or e.command is not None) and tools.select(_name_condition(e).any()).item()
        ]
        keys = sorted({key for i in guarded for key, _ in entries[i].arguments})
        rows = rows.with_columns(_argument_value(key).alias(_argument_column(key)) for key in keys)
        first = pl.min_horizontal(_first([(i, _entry_condition(entries[i])) for i in guarded]), pl.col("__plain"))
        matched = rows.select("__row", first.alias("__matched"))
        work = work.with_columns(scatter(work.height, matched["__row"], matched["__matched"]))
    else:
        work = work.with_columns(pl.lit(None, dtype=pl.Int32).alias("__matched"))
    entry = pl.when(pl.col("__rejected")).then(None).when(per_row).then(pl.col("__matched")).otherwise(pl.col("__plain"))
    return work.with_columns(entry.cast(pl.Int32).alias("__entry")).drop("__plain", "__guarded", "__matched")


def _json_field(keys: tuple[str, ...]) -> pl.Expr:
    arguments = pl.col("__arguments")
    return pl.coalesce([arguments.str.json_path_match(f"$.{key}") for key in keys])


def _fill_text_from_arguments(work: pl.DataFrame) -> pl.DataFrame:
    """Shell tools (and unmapped tools) logged without a ``command`` column: read it from the
    arguments JSON."""
    need = pl.col("__text").is_null() & pl.col("__tool_class").is_null() & ~pl.col("__rejected")
    rows = work.filter(need)
    if rows.height == 0:
        return work
    filled = rows.select("__row", _json_field(SHELL_ARGUMENT_KEYS).alias("__json_text"))
    argv = pl.col("__json_text").str.contains(sx.rust_regex(sx.ARGV_STRINGS)).fill_null(False)
    if filled.select(argv.any()).item():
        filled = pl.concat([filled.filter(~argv), _argv_commands(filled.filter(argv))])
    return work.join(filled, on="__row", how="left", maintain_order="left").with_columns(
        pl.coalesce("__text", _bounded_text(pl.col("__json_text"))).alias("__text")
    ).drop("__json_text")


def _argv_commands(rows: pl.DataFrame) -> pl.DataFrame:
    """Commands logged as argv arrays become one command line (as
    :func:`trajlens.classify.reference.argv_command` builds it)."""
    words = pl.col("__json_text").str.json_decode(pl.List(pl.String))
    plain = pl.element().str.contains(sx.rust_regex(sx.ARGV_PLAIN_WORD))
    has_apostrophe = pl.element().str.contains("'", literal=True)
    escaped = pl.element().str.replace_all("\\", "\\\\", literal=True).str.replace_all('"', '\\"', literal=True)
    quoted = (
        pl.when(plain).then(pl.element())
        .when(~has_apostrophe).then(pl.concat_str([pl.lit("'"), pl.element(), pl.lit("'")]))
        .otherwise(pl.concat_str([pl.lit('"'), escaped, pl.lit('"')]))
    )
    script = (
        (words.list.len() == 3)
        & words.list.get(0, null_on_oob=True).str.contains(sx.rust_regex(sx.ARGV_SHELL))
        & words.list.get(1, null_on_oob=True).str.contains(sx.rust_regex(sx.ARGV_SCRIPT_FLAG))
    )
    joined = words.list.eval(quoted).list.join(" ")
    text = pl.when(script).then(words.list.get(2, null_on_oob=True)).otherwise(joined)
    return rows.with_columns(text.alias("__json_text"))


def _fixed_class_paths(work: pl.DataFrame) -> pl.DataFrame:
    """The file a call of a fixed-class tool names in its JSON arguments (the first of
    ``PATH_ARGUMENT_KEYS`` it has). Each key is read only from the arguments that may hold it
    and hold none of the keys before it."""
    rows = work.select("__row", "__arguments", "__tool_class").filter(
        pl.col("__tool_class").is_not_null() & _may_hold(*PATH_ARGUMENT_KEYS)
    ).drop("__tool_class")
    found = []
    for key in PATH_ARGUMENT_KEYS:
        value = rows.filter(_may_hold(key)).select("__row", pl.col("__arguments").str.json_path_match(f"$.{key}"))
        value = value.filter(pl.col("__arguments").is_not_null() & (pl.col("__arguments") != ""))  # "" names no file
        found.append(value)
        rows = rows.join(value, on="__row", how="anti")
    paths = pl.concat(found)
    return work.with_columns(scatter(work.height, paths["__row"], paths["__arguments"].alias("__json_path")))


def _may_hold(*keys: str) -> pl.Expr:
    """False where the JSON arguments cannot hold any of ``keys``: they contain neither a quoted
    key nor a ``\\u`` escape that could spell one."""
    quoted = "|".join(re.escape(f'"{key}"') for key in keys)
    return pl.col("__arguments").str.contains(f"{quoted}|\\\\u").fill_null(False)


class ShellResults(NamedTuple):
    """The calls with ``__shell``, each call's row of ``results`` (null for calls without a
    text and for rejected calls, whose classes come from their rejection), and the results of
    :func:`~trajlens.classify._vectorised.classify_shell`, one row per distinct text."""

    work: pl.DataFrame
    results: pl.DataFrame


def _join_shell_results(work: pl.DataFrame) -> ShellResults:
    """Classify each distinct command text once."""
    calls = work.select("__row", "__text").filter(pl.col("__text").is_not_null() & ~work.get_column("__rejected"))
    codes, firsts = distinct_codes(calls.get_column("__text"))
    texts = pl.DataFrame([calls.get_column("__text").gather(firsts).alias("text")]).with_row_index("text_id")
    return ShellResults(work.with_columns(scatter(work.height, calls["__row"], codes.alias("__shell"))), classify_shell(texts))


_NO_PATHS = pl.lit([], dtype=pl.List(pl.String))

_REJECTED, _NO_CLASS = "rejected", "no class"
_FIXED_OUTCOMES: dict[str, tuple[str | None, tuple[str, ...]]] = {
    **{klass: (klass, (klass,)) for klass in BEHAVIOUR_CLASSES},
    _REJECTED: (None, ()),
    _NO_CLASS: ("other", ("other",)),  # neither a tool-map class nor a command
}
"""(primary class, action classes) of the calls whose classes do not come from a command: of a
tool-map class, rejected, or neither. They follow the distinct commands' results in
:func:`_assemble`'s table of outcomes, in this order."""
_FIXED_ROW = {name: row for row, name in enumerate(_FIXED_OUTCOMES)}


def _assemble(work: pl.DataFrame, shell: pl.DataFrame, entries: tuple[ToolEntry, ...], explain: bool) -> pl.DataFrame:
    """Decide each call's classes from (in order) rejection, tool-map class, shell command;
    paths from the JSON arguments of fixed-class tools, else from the command.

    Each call gets its row in a table of outcomes: the results of the distinct commands, then
    the :data:`_FIXED_OUTCOMES`; classes and paths are gathered from it, one pass each.
    """
    distinct = shell.height
    fixed = pl.DataFrame(
        {"primary": [p for p, _ in _FIXED_OUTCOMES.values()], "actions": [list(a) for _, a in _FIXED_OUTCOMES.values()]},
        schema={"primary": pl.String, "actions": pl.List(pl.String)},
    )
    shell_primary = pl.col("priority").replace_strict(dict(enumerate(BEHAVIOUR_CLASSES)), default="other", return_dtype=pl.String)
    # One chunk each: a gather from several chunks takes a far slower path.
    outcomes = pl.concat([shell.select(shell_primary.alias("primary"), pl.col("action_classes").alias("actions")), fixed], rechunk=True)
    outcomes = outcomes.with_columns(
        pl.col("actions").list.contains("edit").alias("is_edit"),
        pl.col("actions").list.eval(pl.element().is_in(list(VERIFICATION_CLASSES))).list.any().alias("is_verification"),
    )
    rejected = pl.col("__rejected")
    tool_class = pl.col("__tool_class")
    fixed_row = {name: distinct + row for name, row in _FIXED_ROW.items()}
    outcome = (
        pl.when(rejected).then(pl.lit(fixed_row[_REJECTED], dtype=pl.UInt32))
        .when(tool_class.is_not_null()).then(tool_class.replace_strict(fixed_row, return_dtype=pl.UInt32))
        .otherwise(pl.col("__shell").fill_null(fixed_row[_NO_CLASS]))
    )
    row = work.select(outcome).to_series()
    # Paths: the JSON path of a fixed-class call (a row each, after the commands' paths and an
    # empty list), else its command's (rejected calls have none: no `__shell`).
    named = work.select("__row", "__json_path").filter(pl.col("__json_path").is_not_null() & ~work.get_column("__rejected"))
    json_paths = named.select(
        pl.concat_list(pl.col("__json_path").str.replace(sx.rust_regex(sx.LEADING_DOT_SLASH[0]), sx.LEADING_DOT_SLASH[1]))
    ).to_series()
    path_table = pl.concat([shell.get_column("paths"), pl.Series([[]], dtype=pl.List(pl.String)), json_paths], rechunk=True)
    after = distinct + 1
    path_row = work.get_column("__shell").fill_null(distinct).scatter(
        named["__row"], pl.int_range(after, after + named.height, eager=True, dtype=pl.UInt32)
    )
    # The files each call changes: a command's edited paths; a fixed-class edit's paths (none of another class).
    edited_table = pl.concat([shell.get_column("edited_paths"), pl.Series([[]], dtype=pl.List(pl.String)), json_paths],
                             rechunk=True)
    work = work.with_columns(
        *(outcomes.get_column(name).gather(row).alias(f"__{name}") for name in ("primary", "actions", "is_edit", "is_verification")),
        path_table.gather(path_row).alias("__paths"),
        edited_table.gather(path_row).alias("__edited"),
    )
    work = work.with_columns(
        pl.when(tool_class.is_null()).then(pl.col("__edited"))
        .when(pl.col("__is_edit")).then(pl.col("__paths")).otherwise(_NO_PATHS).alias("__edited")
    )
    if not explain:
        return work
    entry = pl.col("__entry")
    entry_id = entry.replace_strict({i: e.id for i, e in enumerate(entries)}, default=None, return_dtype=pl.String)
    entry_source = entry.replace_strict({i: e.source for i, e in enumerate(entries)}, default=None,
                                        return_dtype=pl.String)
    has_text = pl.col("__text").is_not_null()
    shell_rule = pl.col("__shell_rule")
    decided_by = (
        pl.when(rejected).then(pl.lit("format error"))
        .when(tool_class.is_not_null()).then(pl.concat_str([pl.lit("tool map: "), entry_id]))
        .when(has_text & shell_rule.is_null()).then(pl.lit("shell: no action"))
        .when(has_text).then(pl.concat_str([pl.lit("shell rule "), shell_rule]))
        .when(pl.col("__shell_tool")).then(pl.lit("shell tool without a command"))
        .otherwise(pl.lit(UNMAPPED))
    )
    source = (
        pl.when(rejected).then(pl.lit(None, dtype=pl.String))
        .when(tool_class.is_not_null()).then(entry_source)
        .when(has_text).then(pl.lit(SHELL_RULES_SOURCE))
        .otherwise(entry_source)
    )
    work = work.with_columns(shell.get_column("rule").gather(work.get_column("__shell")).alias("__shell_rule"))
    return work.with_columns(entry_id.alias("__tool_entry"), decided_by.alias("__decided_by"), source.alias("__rule_source"))


def _swe_agent_current_file(work: pl.DataFrame) -> pl.DataFrame:
    """SWE-agent's ``edit``/``goto``/``scroll_*`` act on the file last opened or created in the
    trajectory; give such calls that file as their path.

    Only the calls that open a file or use the current one take part: the others neither set
    nor read it, so the forward fill runs over those few rows alone, and ``work`` keeps its order.
    """
    tool = pl.col("__tool")
    words = sx.SWE_AGENT_FILE_OPENERS | sx.SWE_AGENT_CURRENT_FILE_USERS
    named = tool.is_in(sorted(words))

    def first_word_in(chosen: frozenset[str]) -> pl.Expr:
        return pl.col("__text").str.contains(sx.rust_regex(r"^\s*(?:" + "|".join(sorted(chosen)) + r")(?:\s|$)"))

    def is_command(chosen: frozenset[str]) -> pl.Expr:
        # The tool's own name, or else the first word of its command.
        return pl.when(named).then(tool.is_in(sorted(chosen))).otherwise(first_word_in(chosen)).fill_null(False)

    opened = pl.when(is_command(sx.SWE_AGENT_FILE_OPENERS)).then(pl.col("__paths").list.first())
    users = is_command(sx.SWE_AGENT_CURRENT_FILE_USERS) & (pl.col("__paths").list.len() == 0)
    keys = list(_TRAJECTORY_KEYS[:2])
    candidates = work.select("__row", *keys, "call_index", "__rejected", "__tool", "__text", "__paths").filter(
        named | first_word_in(words).fill_null(False)
    )
    marked = candidates.select("__row", *keys, "call_index", "__rejected", opened.alias("__opened"), users.alias("__user"))
    rows = marked.filter(pl.col("__opened").is_not_null() | pl.col("__user"))
    if rows.height == 0:
        return work
    rows = rows.sort([*keys, "call_index"], maintain_order=True).with_columns(
        pl.col("__opened").forward_fill().over(keys).alias("__current")
    )
    given = rows.filter(pl.col("__user") & pl.col("__current").is_not_null() & ~pl.col("__rejected"))
    current = scatter(work.height, given["__row"], given["__current"])
    return work.with_columns(
        pl.when(current.is_not_null()).then(pl.concat_list(current)).otherwise(pl.col(name)).alias(name)
        for name in ("__paths", "__edited")
    )

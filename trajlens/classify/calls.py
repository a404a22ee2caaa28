"""Classify a table of tool calls: :func:`classify_calls`.

The tool name decides when it can (think, submit, SWE-agent's commands, file editors); every
other call with a shell command goes through the vectorised shell classifier in
:mod:`trajlens.classify._engine`. Each distinct command text is classified once and joined
back, so a log that repeats ``ls`` or ``git diff`` pays for it once.

Calls the harness rejected (``format_error``) get a null ``primary_class`` and no actions: they
were never executed, so they stay out of every behaviour count and share.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pyarrow as pa

from trajlens.classify import _syntax as sx
from trajlens.classify._engine import classify_shell
from trajlens.classify.rules import (
    BEHAVIOUR_CLASSES,
    EDITOR_SUBCOMMANDS,
    EDITOR_TOOLS,
    INLINE_CODE_TOOLS,
    PATH_ARGUMENT_KEYS,
    SHELL_ARGUMENT_KEYS,
    TOOL_CLASSES,
    VERIFICATION_CLASSES,
)
from trajlens.errors import FrameError

REQUIRED_COLUMNS: tuple[str, ...] = ("tool_name", "arguments", "command")
"""Columns :func:`classify_calls` needs; ``format_error`` and the trajectory keys are optional."""

ADDED_COLUMNS: tuple[str, ...] = ("primary_class", "action_classes", "paths", "is_edit", "is_verification")
"""Columns :func:`classify_calls` adds."""

_EMPTY = pl.lit([], dtype=pl.List(pl.String))
_TRAJECTORY_KEYS = ("run_id", "trajectory_id", "call_index")


def as_frame(table: Any, name: str) -> pl.DataFrame:
    """A Polars DataFrame from a DataFrame, LazyFrame or Arrow table."""
    if isinstance(table, pl.LazyFrame):
        return table.collect()
    if isinstance(table, pl.DataFrame):
        return table
    if isinstance(table, (pa.Table, pa.RecordBatch)):
        return pl.from_arrow(table)  # type: ignore[return-value]
    raise TypeError(f"{name}: expected a Polars DataFrame or LazyFrame or an Arrow table, got {type(table).__name__}")


def classify_calls(tool_calls: Any) -> pl.DataFrame:
    """Classify every tool call of a ``tool_calls`` table.

    ``tool_calls`` is a Polars DataFrame or LazyFrame (or an Arrow table) with at least the
    columns ``tool_name``, ``arguments`` (JSON text) and ``command`` (nullable shell command).
    Returns the same rows, in the same order, with five columns added:

    ``primary_class``
        The call's highest-priority behaviour class (:data:`BEHAVIOUR_CLASSES`); null for
        calls with ``format_error`` set.
    ``action_classes``
        One class per action of the call, in command order (``cd x && pytest`` gives
        ``["test_suite"]``: ``cd`` is not an action).
    ``paths``
        Files the call names (edited, viewed, searched or run), as written in the command.
    ``is_edit``, ``is_verification``
        Whether any action edits, or runs code to check the work (:data:`VERIFICATION_CLASSES`).
    """
    frame = as_frame(tool_calls, "tool_calls")
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise FrameError("tool_calls", "classify_calls", missing[0])
    clashing = [c for c in ADDED_COLUMNS if c in frame.columns]
    if clashing:
        frame = frame.drop(clashing)
    work = frame.select(
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("__row"),
        pl.col("tool_name").cast(pl.String).str.to_lowercase().alias("__tool"),
        pl.col("arguments").cast(pl.String).alias("__arguments"),
        pl.col("command").cast(pl.String).alias("__text"),
        (pl.col("format_error").fill_null(False) if "format_error" in frame.columns else pl.lit(False)).alias("__rejected"),
        *[pl.col(k) for k in _TRAJECTORY_KEYS if k in frame.columns],
    )
    tool = pl.col("__tool")
    work = work.with_columns(
        tool.replace_strict(TOOL_CLASSES, default=None, return_dtype=pl.String).alias("__tool_class"),
        tool.is_in(sorted(EDITOR_TOOLS)).alias("__editor"),
    )
    work = _fill_text_from_arguments(work)
    work = _editor_columns(work)
    work = _join_shell_results(work)
    work = _assemble(work)
    if all(k in work.columns for k in _TRAJECTORY_KEYS):
        work = _swe_agent_current_file(work)
    result = work.sort("__row").select(
        pl.col("__primary").alias("primary_class"),
        pl.col("__actions").alias("action_classes"),
        pl.col("__paths").alias("paths"),
        pl.col("__actions").list.contains("edit").alias("is_edit"),
        pl.col("__actions").list.eval(pl.element().is_in(list(VERIFICATION_CLASSES))).list.any().alias("is_verification"),
    )
    return pl.concat([frame, result], how="horizontal")


def _json_field(keys: tuple[str, ...]) -> pl.Expr:
    arguments = pl.col("__arguments")
    return pl.coalesce([arguments.str.json_path_match(f"$.{key}") for key in keys])


def _fill_text_from_arguments(work: pl.DataFrame) -> pl.DataFrame:
    """Shell tools logged without a ``command`` column: read it from the arguments JSON."""
    need = pl.col("__text").is_null() & pl.col("__tool_class").is_null() & ~pl.col("__editor") & ~pl.col("__rejected")
    rows = work.filter(need)
    if rows.height == 0:
        return work
    filled = rows.select("__row", _json_field(SHELL_ARGUMENT_KEYS).alias("__json_text"))
    argv = pl.col("__json_text").str.contains(sx.ARGV_STRINGS).fill_null(False)
    if filled.select(argv.any()).item():
        filled = pl.concat([filled.filter(~argv), _argv_commands(filled.filter(argv))])
    return work.join(filled, on="__row", how="left", maintain_order="left").with_columns(
        pl.coalesce("__text", "__json_text").alias("__text")
    ).drop("__json_text")


def _argv_commands(rows: pl.DataFrame) -> pl.DataFrame:
    """Commands logged as argv arrays become one command line (as
    :func:`trajlens.classify.reference.argv_command` builds it)."""
    words = pl.col("__json_text").str.json_decode(pl.List(pl.String))
    plain = pl.element().str.contains(sx.ARGV_PLAIN_WORD)
    has_apostrophe = pl.element().str.contains("'", literal=True)
    escaped = pl.element().str.replace_all("\\", "\\\\", literal=True).str.replace_all('"', '\\"', literal=True)
    quoted = (
        pl.when(plain).then(pl.element())
        .when(~has_apostrophe).then(pl.concat_str([pl.lit("'"), pl.element(), pl.lit("'")]))
        .otherwise(pl.concat_str([pl.lit('"'), escaped, pl.lit('"')]))
    )
    script = (
        (words.list.len() == 3)
        & words.list.get(0, null_on_oob=True).str.contains(sx.ARGV_SHELL)
        & words.list.get(1, null_on_oob=True).str.contains(sx.ARGV_SCRIPT_FLAG)
    )
    joined = words.list.eval(quoted).list.join(" ")
    text = pl.when(script).then(words.list.get(2, null_on_oob=True)).otherwise(joined)
    return rows.with_columns(text.alias("__json_text"))


def _editor_columns(work: pl.DataFrame) -> pl.DataFrame:
    """Sub-command and path of file-editor calls, from their JSON arguments or, as SWE-agent
    logs them, from the action text ``str_replace_editor view /path``."""
    rows = work.filter(pl.col("__editor") & ~pl.col("__rejected"))
    columns = rows.select(
        "__row",
        pl.coalesce(
            pl.col("__arguments").str.json_path_match("$.command"),
            pl.col("__text").str.extract(sx.EDITOR_ACTION_TEXT, 1),
        ).alias("__subcommand"),
        pl.coalesce(_json_field(PATH_ARGUMENT_KEYS), pl.col("__text").str.extract(sx.EDITOR_ACTION_TEXT, 2)).alias(
            "__json_path"
        ),
    )
    return work.join(columns, on="__row", how="left", maintain_order="left")


def _join_shell_results(work: pl.DataFrame) -> pl.DataFrame:
    """Classify each distinct command text once; join classes, priority and paths back."""
    texts = (
        work.filter(pl.col("__text").is_not_null() & ~pl.col("__rejected"))
        .select(pl.col("__text").alias("text"))
        .unique(maintain_order=True)
        .with_row_index("text_id")
    )
    shell = classify_shell(texts).join(texts, on="text_id").drop("text_id")
    shell = shell.rename(
        {"text": "__text", "action_classes": "__shell_actions", "priority": "__shell_priority", "paths": "__shell_paths"}
    )
    return work.join(shell, on="__text", how="left", maintain_order="left", nulls_equal=False)


def _assemble(work: pl.DataFrame) -> pl.DataFrame:
    """Decide each call's classes from (in order) rejection, tool name, editor sub-command,
    shell command, inline-code tool; paths from the command or the JSON arguments."""
    rejected = pl.col("__rejected")
    tool_class = pl.col("__tool_class")
    editor_class = pl.col("__subcommand").replace_strict(EDITOR_SUBCOMMANDS, default="other", return_dtype=pl.String)
    has_subcommand = pl.col("__editor") & pl.col("__subcommand").is_not_null()
    has_text = pl.col("__text").is_not_null()
    shell_primary = pl.col("__shell_priority").replace_strict(
        dict(enumerate(BEHAVIOUR_CLASSES)), default="other", return_dtype=pl.String
    )
    inline = pl.col("__tool").is_in(sorted(INLINE_CODE_TOOLS))
    primary = (
        pl.when(rejected).then(pl.lit(None, dtype=pl.String))
        .when(tool_class.is_not_null()).then(tool_class)
        .when(has_subcommand).then(editor_class)
        .when(has_text).then(shell_primary)
        .when(inline).then(pl.lit("quick_check"))
        .otherwise(pl.lit("other"))
    )
    actions = (
        pl.when(rejected).then(_EMPTY)
        .when(tool_class.is_not_null()).then(pl.concat_list(tool_class))
        .when(has_subcommand).then(pl.concat_list(editor_class))
        .when(has_text).then(pl.col("__shell_actions"))
        .when(inline).then(pl.concat_list(pl.lit("quick_check")))
        .otherwise(pl.concat_list(pl.lit("other")))
    )
    json_path = pl.col("__json_path") if "__json_path" in work.columns else pl.lit(None, dtype=pl.String)
    paths = (
        pl.when(rejected).then(_EMPTY)
        .when(has_text & ~has_subcommand).then(pl.col("__shell_paths").fill_null(_EMPTY))
        .when(json_path.is_not_null()).then(pl.concat_list(json_path.str.replace(*sx.LEADING_DOT_SLASH)))
        .otherwise(_EMPTY)
    )
    return work.with_columns(primary.alias("__primary"), actions.alias("__actions"), paths.alias("__paths"))


def _swe_agent_current_file(work: pl.DataFrame) -> pl.DataFrame:
    """SWE-agent's ``edit``/``goto``/``scroll_*`` act on the file last opened or created in the
    trajectory; give such calls that file as their path."""
    first_word = pl.col("__text").str.extract(r"^\s*(\S+)", 1)
    command = pl.when(pl.col("__tool").is_in(sorted(sx.SWE_AGENT_FILE_OPENERS | sx.SWE_AGENT_CURRENT_FILE_USERS))).then(
        pl.col("__tool")
    ).otherwise(first_word)
    opened = pl.when(command.is_in(sorted(sx.SWE_AGENT_FILE_OPENERS))).then(pl.col("__paths").list.first())
    users = command.is_in(sorted(sx.SWE_AGENT_CURRENT_FILE_USERS)) & (pl.col("__paths").list.len() == 0)
    keys = list(_TRAJECTORY_KEYS[:2])
    work = work.sort([*keys, "call_index"]).with_columns(opened.forward_fill().over(keys).alias("__current"))
    return work.with_columns(
        pl.when(users & pl.col("__current").is_not_null() & ~pl.col("__rejected"))
        .then(pl.concat_list("__current"))
        .otherwise(pl.col("__paths"))
        .alias("__paths")
    )

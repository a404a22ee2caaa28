"""The trajlens data model, declared as Arrow schemas.

Five tables describe a run (see ``docs/schema.md`` for the prose version):

``runs``
    One row per run: id, name, estimator, logged configuration (JSON), source format.
``trajectories``
    One row per rollout: step, ids, split, reward channels, outcome, token counts.
``tool_calls``
    One row per tool call, in order, with the command, observation and token span.
``tokens``
    Optional per-token arrays of a trajectory: response mask, critic values, token rewards,
    log-probs. All arrays of a row have the same length.
``step_metrics``
    Per-step training scalars in long format (``critic/vf_explained_var`` and so on).

Every table carries ``run_id``; all but ``runs`` and ``step_metrics`` are keyed by
``(run_id, trajectory_id)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from trajlens.errors import SchemaError

if TYPE_CHECKING:
    import polars as pl

REWARD_CHANNEL = pa.struct([("name", pa.string()), ("value", pa.float64())])

TRAIN_SPLIT = "train"
"""The split a run trained on (``trajectories.split``); see :mod:`trajlens.run.splits`."""


@dataclass(frozen=True)
class Column:
    """One column of a trajlens table."""

    name: str
    type: pa.DataType
    nullable: bool
    doc: str
    absent_as_null: bool = False
    """Added after the first schema: input written without it (older runs) reads it as null."""

    def field(self) -> pa.Field:
        return pa.field(self.name, self.type, nullable=self.nullable)


RUN_COLUMNS: tuple[Column, ...] = (
    Column("run_id", pa.string(), False, "Stable id of the run (a slug)."),
    Column("name", pa.string(), False, "Human-readable run name."),
    Column("estimator", pa.string(), True, "Advantage estimator the run's log declares (verl's algorithm.adv_estimator: "
           "gae, grpo, ...), if known; its config's options (whitening, GRPO's std) decide the label it trained "
           "under (trajlens.run.trained.run_trained_with)."),
    Column("config", pa.string(), False, "The logged configuration as a JSON object ('{}' when none)."),
    Column("source_format", pa.string(), False, "Loader that produced the run (parquet, verl, mini-swe-agent-v1, ...)."),
    Column("source", pa.string(), False, "Path(s) the run was read from, absolute for a log (a Parquet run directory keeps its own)."),
)

TRAJECTORY_COLUMNS: tuple[Column, ...] = (
    Column("run_id", pa.string(), False, "Run the trajectory belongs to."),
    Column("step", pa.int64(), False, "Training step that produced the rollout (0 for agent logs without steps)."),
    Column("trajectory_id", pa.string(), False, "Unique id of the trajectory within the run."),
    Column("group_id", pa.string(), False, "Rollout group: trajectories of the same prompt at the same step."),
    Column("task_id", pa.string(), False, "Task or prompt id."),
    Column("split", pa.string(), False, f"'{TRAIN_SPLIT}' for training data; any other name (the adapters write 'val') is held-out data, measured only in a run without '{TRAIN_SPLIT}' (the first such name in order)."),
    Column("reward", pa.float64(), True, "Scalar reward the trainer used."),
    Column("reward_channels", pa.list_(REWARD_CHANNEL), False, "Every reward channel by name, as logged (may be empty when only the scalar reward is known)."),
    Column("resolved", pa.bool_(), True, "Whether the task was solved, per the harness verdict."),
    Column("exit_status", pa.string(), True, "How the episode ended (submitted, timeout, format_error, ...)."),
    Column("num_turns", pa.int32(), False, "Assistant turns in the trajectory."),
    Column("model_tokens", pa.int64(), True, "Tokens the model generated."),
    Column("observation_tokens", pa.int64(), True, "Tokens of tool output fed back to the model."),
    Column("reasoning_tokens", pa.int64(), True, "Reasoning (thinking) tokens, where logged."),
    Column("source", pa.string(), True, "File (and record) the trajectory was read from; a path that named the source as given is written absolute."),
    Column("logged_advantage", pa.float64(), True, "The advantage the trainer logged for the whole trajectory (TRL's `advantage` column), where it logged one.", absent_as_null=True),
    Column("response_text", pa.string(), True, "The model's text after its last tool call: the final answer, or the whole completion of a run without tools, where logged.", absent_as_null=True),
)

TOOL_CALL_COLUMNS: tuple[Column, ...] = (
    Column("run_id", pa.string(), False, "Run the call belongs to."),
    Column("step", pa.int64(), False, "Training step of the trajectory."),
    Column("trajectory_id", pa.string(), False, "Trajectory the call belongs to."),
    Column("call_index", pa.int32(), False, "Order of the call within the trajectory, from 0."),
    Column("turn", pa.int32(), False, "Assistant turn that issued the call, from 0."),
    Column("tool_name", pa.string(), False, "Tool name as the agent called it (bash, str_replace_editor, think, ...)."),
    Column("arguments", pa.string(), False, "Call arguments as a JSON object."),
    Column("command", pa.string(), True, "The shell command, for shell tools."),
    Column("observation", pa.string(), True, "Tool output returned to the model, where logged."),
    Column("return_code", pa.int32(), True, "Exit code of the command, where logged."),
    Column("token_start", pa.int64(), True, "Offset of the first model token of the call in the token arrays."),
    Column("token_end", pa.int64(), True, "Offset one past the last model token of the call."),
    Column("format_error", pa.bool_(), False, "True when the harness rejected the turn as malformed: kept, never executed."),
    Column("assistant_text", pa.string(), True, "The model's own text of the turn that issued the call (mini-swe-agent's THOUGHT, chat content, reasoning where logged), on the turn's first call; null on its later calls.", absent_as_null=True),
)

TOKEN_COLUMNS: tuple[Column, ...] = (
    Column("run_id", pa.string(), False, "Run of the trajectory."),
    Column("step", pa.int64(), False, "Training step of the trajectory."),
    Column("trajectory_id", pa.string(), False, "Trajectory the arrays belong to."),
    Column("response_mask", pa.list_(pa.bool_()), False, "True for model tokens, false for tool output and padding."),
    Column("values", pa.list_(pa.float32()), True, "Critic value estimate per token."),
    Column("token_rewards", pa.list_(pa.float32()), True, "Reward per token (usually all on the last model token)."),
    Column("log_probs", pa.list_(pa.float32()), True, "Log-probability of each token under the behaviour policy."),
    Column("logged_advantages", pa.list_(pa.float32()), True, "Advantage per token as the trainer logged it, where it did.", absent_as_null=True),
)

STEP_METRIC_COLUMNS: tuple[Column, ...] = (
    Column("run_id", pa.string(), False, "Run the scalar belongs to."),
    Column("step", pa.int64(), False, "Training step."),
    Column("name", pa.string(), False, "Metric name as logged (critic/vf_explained_var, actor/lr, val/score, ...)."),
    Column("value", pa.float64(), True, "Metric value."),
)

TABLE_COLUMNS: dict[str, tuple[Column, ...]] = {
    "runs": RUN_COLUMNS,
    "trajectories": TRAJECTORY_COLUMNS,
    "tool_calls": TOOL_CALL_COLUMNS,
    "tokens": TOKEN_COLUMNS,
    "step_metrics": STEP_METRIC_COLUMNS,
}

TABLES: tuple[str, ...] = tuple(TABLE_COLUMNS)

VIEWS: dict[str, str] = {
    "measured_splits": (
        f"SELECT run_id, CASE WHEN bool_or(split = '{TRAIN_SPLIT}') THEN '{TRAIN_SPLIT}' ELSE min(split) END "
        "AS split FROM trajectories GROUP BY run_id"
    ),
}
"""SQL views every store offers beside its tables. ``measured_splits`` (``run_id``, ``split``):
each run's measured split, the trajectories every surface measures
(:func:`trajlens.run.splits.measured_split`: training when the run has it, else the first of
its splits in name order); the saved queries join it."""

def in_measured_split(split: str = TRAIN_SPLIT) -> pl.Expr:
    """Polars filter of the trajectories of each run's chosen split for ``split``
    (:func:`trajlens.run.splits.chosen_split`): ``split`` where a run has it, else training, else
    the first of its splits in name order (evaluated per ``run_id`` over the frame filtered); with
    the default, the ``measured_splits`` view in Polars."""
    import polars as pl

    def has(name: str) -> pl.Expr:
        return (pl.col("split") == name).any().over("run_id")

    chosen = (pl.when(has(split)).then(pl.lit(split)).when(has(TRAIN_SPLIT)).then(pl.lit(TRAIN_SPLIT))
              .otherwise(pl.col("split").min().over("run_id")))
    return pl.col("split") == chosen


SCHEMAS: dict[str, pa.Schema] = {
    table: pa.schema([column.field() for column in columns]) for table, columns in TABLE_COLUMNS.items()
}

# Keys that must be unique within a run.
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "runs": ("run_id",),
    "trajectories": ("run_id", "trajectory_id"),
    "tool_calls": ("run_id", "trajectory_id", "call_index"),
    "tokens": ("run_id", "trajectory_id"),
    "step_metrics": ("run_id", "step", "name"),
}

TOKEN_ARRAYS: tuple[str, ...] = ("response_mask", "values", "token_rewards", "log_probs", "logged_advantages")


def conform(table: pa.Table, name: str, source: str) -> pa.Table:
    """Return ``table`` in the exact schema of trajlens table ``name``.

    Columns are reordered and safely cast (int32 to int64, large_string to string, ...; never
    text to numbers or numbers to text); a column added to the schema later
    (``absent_as_null``) that the input lacks reads as nulls.
    Raises :class:`SchemaError` naming ``source`` on a missing, extra or mistyped column,
    or a null in a non-nullable column.
    """
    schema = SCHEMAS[name]
    for column in TABLE_COLUMNS[name]:
        if column.absent_as_null and column.name not in table.column_names:
            table = table.append_column(column.field(), pa.nulls(table.num_rows, column.type))
    present = set(table.column_names)
    expected = set(schema.names)
    missing = [n for n in schema.names if n not in present]
    if missing:
        raise SchemaError(source, field=missing[0], expected="a column", found="no such column")
    extra = [n for n in table.column_names if n not in expected]
    if extra:
        raise SchemaError(source, field=extra[0], expected=f"only the {name} columns", found="an extra column")
    columns = []
    for field in schema:
        column = table.column(field.name)
        if not column.type.equals(field.type):
            column = _cast(column, field, source)
        if not field.nullable and column.null_count:
            row = _first_null(column)
            raise SchemaError(source, record=row, field=field.name, expected="a value", found="null")
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


def _cast(column: pa.ChunkedArray, field: pa.Field, source: str) -> pa.ChunkedArray:
    """``column`` safely cast to ``field``'s type; a :class:`SchemaError` when it cannot be, or
    when it would turn text into numbers or numbers into text (an all-null column casts to any)."""
    mistyped = SchemaError(source, field=field.name, expected=str(field.type), found=str(column.type))
    if not pa.types.is_null(column.type) and _is_text(column.type) != _is_text(field.type):
        raise mistyped
    if pa.types.is_boolean(field.type) and not pa.types.is_null(column.type):
        # Arrow reads any number but 0 as true; a flag given as numbers is one only as 0 and 1
        import pyarrow.compute as pc

        other = pc.invert(pc.is_in(column, value_set=pa.array([0, 1], column.type))).fill_null(False)
        if pc.any(other).as_py():
            row = pc.index(other, True).as_py()
            raise SchemaError(source, record=row, field=field.name, expected="bool (or 0 and 1)",
                              found=f"{column.type} {column[row].as_py()!r}") from None
    try:
        return column.cast(field.type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise mistyped from None


def _is_text(kind: pa.DataType) -> bool:
    """Whether ``kind`` holds text: a column of text is never cast to numbers (a step of "1"),
    nor one of numbers to text, though Arrow's safe cast would do either."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or str(kind) == "string_view"


def empty(name: str) -> pa.Table:
    """An empty table with the schema of ``name``."""
    return SCHEMAS[name].empty_table()


def _first_null(column: pa.ChunkedArray) -> int:
    import pyarrow.compute as pc

    return int(pc.index(pc.is_null(column), True).as_py())


def render_markdown() -> str:
    """The column tables of ``docs/schema.md``, generated from the declarations above."""
    lines = []
    for table, columns in TABLE_COLUMNS.items():
        lines += [f"### `{table}`", "", "| column | type | nullable | meaning |", "|---|---|---|---|"]
        for column in columns:
            nullable = "yes" if column.nullable else "no"
            lines.append(f"| `{column.name}` | `{column.type}` | {nullable} | {column.doc} |")
        keys = ", ".join(PRIMARY_KEYS[table])
        lines += ["", f"Unique key: ({keys}).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_markdown())

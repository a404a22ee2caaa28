"""Per-trajectory behaviour measures: :func:`trajectory_measures`.

Every measure is computed over *behaviour calls*: tool calls with a class, that is, all calls
except those the harness rejected as malformed (``format_error``), which were never executed.
Shares are of behaviour calls; ordinals ("the next three calls", "the first verification")
count behaviour calls in ``call_index`` order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from trajlens.classify.calls import classify_calls
from trajlens.classify.rules import BEHAVIOUR_CLASSES, VERIFICATION_CLASSES
from trajlens.frames import as_frame, require_columns
from trajlens.intervals import Bounds, Spec

KEYS: tuple[str, ...] = ("run_id", "trajectory_id")
CALL_COLUMNS: tuple[str, ...] = (*KEYS, "step", "call_index", "primary_class", "action_classes", "is_edit", "paths")
"""Columns of the classified calls :func:`trajectory_measures` reads."""
TRAJECTORY_COLUMNS: tuple[str, ...] = (*KEYS, "step", "num_turns", "model_tokens", "reasoning_tokens")
"""Columns of the trajectories :func:`trajectory_measures` reads."""
READBACK_WINDOW = 3
"""An edit is read back when one of the next this-many behaviour calls views the same file."""
EMPTY_THOUGHT_CHARS = 16
"""A think call is empty when the values of its arguments hold fewer than this many word
characters: an empty or filler thought (``""``, ``"..."``, ``"Let me think."``, ``"Hmm."``), the
no-op that crowded out edits and executions in the think collapse."""
_JSON_STRING = r'"(?:[^"\\]|\\.)*"'
_JSON_KEY = _JSON_STRING + r"\s*:"


@dataclass(frozen=True)
class Measure:
    """One column of the :func:`trajectory_measures` table."""

    name: str
    doc: str
    high: float | None = None
    """The largest value a trajectory can have (1 for a share or a position; None: no bound).
    Every measure is 0 or more."""


MEASURES: tuple[Measure, ...] = (
    Measure("run_id", "Run of the trajectory."),
    Measure("step", "Training step of the trajectory."),
    Measure("trajectory_id", "Trajectory id."),
    Measure("n_calls", "Behaviour calls: tool calls that were executed (format errors excluded)."),
    Measure("n_format_errors", "Calls the harness rejected as malformed; in no count or share."),
    *(Measure(f"count_{c}", f"Behaviour calls whose primary class is {c}.") for c in BEHAVIOUR_CLASSES),
    *(Measure(f"share_{c}", f"count_{c} / n_calls (null without calls).", high=1.0) for c in BEHAVIOUR_CLASSES),
    Measure("think_longest_run", "Longest run of consecutive think calls with no environment action between."),
    Measure("think_runs", "Number of runs of two or more consecutive think calls."),
    Measure("think_empty", f"Think calls whose arguments' values hold fewer than {EMPTY_THOUGHT_CHARS} word characters "
                           "(an empty or filler thought: '', '...', 'Let me think.')."),
    Measure("n_verification", "Calls whose primary class is a verification class (suite, targeted, quick check, script)."),
    Measure("suite_share", "test_suite calls / n_verification (null without verification).", high=1.0),
    Measure("targeted_share", "test_targeted calls / n_verification.", high=1.0),
    Measure("quick_check_share", "quick_check calls / n_verification.", high=1.0),
    Measure("run_script_share", "run_script calls / n_verification.", high=1.0),
    Measure("ran_suite", "Whether any action of the trajectory ran the whole test suite."),
    Measure("n_edits", "Calls with at least one edit action (is_edit)."),
    Measure("edits_per_turn", "n_edits / num_turns (null when num_turns is 0)."),
    Measure("edits_per_1k_tokens", "n_edits per 1,000 model tokens (null when model_tokens is unknown or 0)."),
    Measure("readback_share", "Share of edit calls followed, within the next 3 behaviour calls, by a call that "
                              "views a file of the same name as one the edit changed (null without edits).", high=1.0),
    Measure("num_turns", "Assistant turns (from the trajectories table)."),
    Measure("model_tokens", "Tokens the model generated (from the trajectories table)."),
    Measure("reasoning_tokens", "Reasoning tokens, where logged (from the trajectories table)."),
    Measure("first_verification_call", "call_index of the first verification call (null if none)."),
    Measure("first_verification_position", "Ordinal of the first verification call / n_calls: 0 at the start, "
                                           "near 1 at the end (null if none).", high=1.0),
)
"""The columns of :func:`trajectory_measures`, in order, with what each means."""


COUNTS: tuple[str, ...] = ("n_calls", "n_format_errors", "n_verification", "n_edits", "think_longest_run",
                           "think_runs", "think_empty", *(f"count_{c}" for c in BEHAVIOUR_CLASSES))
"""Measures that count calls: 0, never null, for a trajectory without any (``think_empty`` is
null only for calls given without their ``arguments``)."""


AVERAGED_MEASURES: tuple[str, ...] = tuple(
    m.name for m in MEASURES
    if m.name not in ("run_id", "step", "trajectory_id", "ran_suite") and not m.name.startswith("share_")
)
"""Per-trajectory measures a ``mean:<measure>`` averages over trajectories."""


MEAN_SUPPORT: dict[str, Bounds] = {
    f"mean:{m.name}": (0.0, m.high) for m in MEASURES if m.name in AVERAGED_MEASURES}
"""Where each ``mean:<measure>`` of :func:`behaviour_specs` can lie: a mean of trajectories' values
lies where they do, so its interval is cut there (:func:`trajlens.intervals.pooled`)."""


OUTCOME_SPECS: tuple[Spec, ...] = (
    ("reward", pl.col("reward").fill_nan(None), pl.lit(1)),  # NaN left out, as everywhere
    ("resolved", pl.col("resolved"), pl.lit(1)),
)
"""The outcome measures over trajectories (rows of the ``trajectories`` table), as measures of
units for :func:`trajlens.intervals.sums`: ``reward`` (the mean reward) and ``resolved`` (the
share of trajectories resolved; a trajectory without a verdict is left out). The checks, the
report's summary, its overview trends and its outcome by stage all pool these."""


def behaviour_specs(averaged: Sequence[str] = AVERAGED_MEASURES) -> list[Spec]:
    """The behaviour measures over trajectories (rows of :func:`trajectory_measures`), as
    measures of units for :func:`trajlens.intervals.sums`: ``share:<class>`` (calls of the class
    over behaviour calls), ``verification:<class>`` (over verification calls), ``uses:<class>``
    and ``ran_suite`` (shares of trajectories), and ``mean:<measure>`` of each of ``averaged``.
    The checks, the stage report, the report's overview and comparisons all pool these."""
    one = pl.lit(1)
    return [
        *((f"share:{c}", pl.col(f"count_{c}"), pl.col("n_calls")) for c in BEHAVIOUR_CLASSES),
        *((f"verification:{c}", pl.col(f"count_{c}"), pl.col("n_verification")) for c in VERIFICATION_CLASSES),
        *((f"uses:{c}", pl.col(f"count_{c}") > 0, one) for c in BEHAVIOUR_CLASSES),
        ("ran_suite", pl.col("ran_suite"), one),
        *((f"mean:{m}", pl.col(m), one) for m in averaged),
    ]


def current_measures(saved: pl.DataFrame) -> pl.DataFrame | None:
    """Saved measures (``trajlens classify``'s ``trajectory_measures``) in :data:`MEASURES`'
    columns, or None when there are none or they are a version's that measured other columns
    (read beside newer runs', a column they lack is null where a count is never null): such
    runs are measured again."""
    names = [m.name for m in MEASURES]
    if not saved.height or not set(names) <= set(saved.columns) or saved.select(COUNTS).null_count().sum_horizontal().item():
        return None
    return saved.select(names)


RULES_COLUMN = "rules_version"
"""The column of a saved ``trajectory_measures`` table that names the classification rules
(:data:`~trajlens.classify.rules.RULES_VERSION`) its run's calls were classified under; tables
saved before trajlens recorded it lack it (:data:`UNRECORDED`)."""

UNRECORDED = "unrecorded"
"""The rules version of measures saved without one (by a trajlens that did not record it)."""


def stored_rules(store: Any, runs: Sequence[str]) -> dict[str, str]:
    """Per run of ``runs`` whose measures an open store saved, the classification rules they were
    classified under (:data:`RULES_COLUMN`; :data:`UNRECORDED` where the table does not say)."""
    if "trajectory_measures" not in store.tables():
        return {}
    table = store.table("trajectory_measures").filter(pl.col("run_id").is_in(list(runs)))
    version = pl.col(RULES_COLUMN) if RULES_COLUMN in table.collect_schema().names() else pl.lit(None, pl.String)
    saved = table.select("run_id", version.fill_null(UNRECORDED).alias(RULES_COLUMN)).unique().collect()
    return dict(saved.iter_rows())


def stored_measures(store: Any, runs: Sequence[str]) -> dict[str, pl.DataFrame | None]:
    """Per run, the :func:`current_measures` an open store saved for it (as the store sees them,
    inside a transaction too); None for a run without. One read of the table for every run."""
    if "trajectory_measures" not in store.tables():
        return {run: None for run in runs}
    saved = store.table("trajectory_measures").filter(pl.col("run_id").is_in(list(runs))).collect()
    return {run: current_measures(saved.filter(pl.col("run_id") == run)) for run in runs}


def trajectory_measures(classified_calls: Any, trajectories: Any = None) -> pl.DataFrame:
    """One row of behaviour measures per trajectory (:data:`MEASURES`).

    ``classified_calls`` is the output of :func:`classify_calls` (a raw ``tool_calls`` table is
    classified first). ``trajectories`` (the ``trajectories`` table) supplies every trajectory,
    including those without calls, and the turn and token counts; without it the trajectories
    are those that have calls and turns and tokens are null.
    """
    calls = as_frame(classified_calls, "classified_calls")
    if "primary_class" not in calls.columns:
        calls = classify_calls(calls)
    require_columns(calls, "classified_calls", "trajectory_measures", CALL_COLUMNS)
    base = _trajectory_base(calls, trajectories)
    behaviour = calls.filter(pl.col("primary_class").is_not_null()).sort([*KEYS, "call_index"])
    behaviour = behaviour.with_columns(pl.int_range(pl.len()).over(list(KEYS)).alias("ordinal"))
    counts = _class_counts(calls, behaviour)
    table = (
        base.join(counts, on=list(KEYS), how="left")
        .join(_think_runs(behaviour), on=list(KEYS), how="left")
        .join(_readback(behaviour), on=list(KEYS), how="left")
        .join(_first_verification(behaviour), on=list(KEYS), how="left")
    )
    counted = [c for c in COUNTS if c != "think_empty" or "arguments" in calls.columns]
    table = table.with_columns([pl.col(c).fill_null(0).cast(pl.Int64) for c in counted])
    table = table.with_columns(pl.col("think_empty").cast(pl.Int64))
    table = table.with_columns(pl.col("ran_suite").fill_null(False))
    n_calls = pl.col("n_calls")
    n_verification = pl.col("n_verification")
    table = table.with_columns(
        *[_ratio(pl.col(f"count_{c}"), n_calls).alias(f"share_{c}") for c in BEHAVIOUR_CLASSES],
        _ratio(pl.col("count_test_suite"), n_verification).alias("suite_share"),
        _ratio(pl.col("count_test_targeted"), n_verification).alias("targeted_share"),
        _ratio(pl.col("count_quick_check"), n_verification).alias("quick_check_share"),
        _ratio(pl.col("count_run_script"), n_verification).alias("run_script_share"),
        _ratio(pl.col("n_edits"), pl.col("num_turns")).alias("edits_per_turn"),
        (_ratio(pl.col("n_edits"), pl.col("model_tokens")) * 1000).alias("edits_per_1k_tokens"),
        _ratio(pl.col("n_readback").fill_null(0), pl.col("n_edits")).alias("readback_share"),
        _ratio(pl.col("first_verification_ordinal"), n_calls).alias("first_verification_position"),
    )
    return table.select([m.name for m in MEASURES]).sort([*KEYS])


def _ratio(numerator: pl.Expr, denominator: pl.Expr) -> pl.Expr:
    return pl.when(denominator > 0).then(numerator.cast(pl.Float64) / denominator).otherwise(None)


def _trajectory_base(calls: pl.DataFrame, trajectories: Any) -> pl.DataFrame:
    if trajectories is None:
        return calls.group_by(list(KEYS)).agg(pl.col("step").first()).with_columns(
            pl.lit(None, dtype=pl.Int64).alias("num_turns"),
            pl.lit(None, dtype=pl.Int64).alias("model_tokens"),
            pl.lit(None, dtype=pl.Int64).alias("reasoning_tokens"),
        )
    frame = as_frame(trajectories, "trajectories")
    require_columns(frame, "trajectories", "trajectory_measures", TRAJECTORY_COLUMNS)
    return frame.select(
        *KEYS,
        "step",
        pl.col("num_turns").cast(pl.Int64),
        pl.col("model_tokens").cast(pl.Int64),
        pl.col("reasoning_tokens").cast(pl.Int64),
    )


def _class_counts(calls: pl.DataFrame, behaviour: pl.DataFrame) -> pl.DataFrame:
    primary = pl.col("primary_class")
    counts = behaviour.group_by(list(KEYS)).agg(
        pl.len().alias("n_calls"),
        *[(primary == c).sum().alias(f"count_{c}") for c in BEHAVIOUR_CLASSES],
        primary.is_in(list(VERIFICATION_CLASSES)).sum().alias("n_verification"),
        pl.col("action_classes").list.contains("test_suite").any().alias("ran_suite"),
        pl.col("is_edit").sum().alias("n_edits"),
    )
    rejected = calls.group_by(list(KEYS)).agg(pl.col("primary_class").is_null().sum().alias("n_format_errors"))
    return rejected.join(counts, on=list(KEYS), how="left")


def _think_runs(behaviour: pl.DataFrame) -> pl.DataFrame:
    """Longest run of consecutive think calls, and how many runs have two or more."""
    is_think = pl.col("primary_class") == "think"
    runs = behaviour.with_columns(
        is_think.alias("is_think"),
        (is_think != is_think.shift(1).over(list(KEYS))).fill_null(True).cum_sum().over(list(KEYS)).alias("run"),
    )
    # Calls read back without their arguments (the saved call_classes) cannot tell an empty thought.
    known = "arguments" in behaviour.columns
    empty = empty_thought().sum() if known else pl.lit(None, dtype=pl.UInt32)
    lengths = runs.filter(pl.col("is_think")).group_by([*KEYS, "run"]).agg(pl.len(), empty.alias("empty"))
    return lengths.group_by(list(KEYS)).agg(
        pl.col("len").max().alias("think_longest_run"),
        (pl.col("len") >= 2).sum().alias("think_runs"),
        (pl.col("empty").sum() if known else pl.lit(None, dtype=pl.UInt32)).alias("think_empty"),
    )


def empty_thought() -> pl.Expr:
    """Whether a call's arguments hold an empty or filler thought (:data:`EMPTY_THOUGHT_CHARS`):
    the string values of its JSON arguments (keys, numbers and booleans left out; an escaped
    character counts as one, ``\\n`` as a blank) hold fewer word characters than that; no
    arguments, an empty thought."""
    text = pl.col("arguments").cast(pl.String).fill_null("").str.replace_all(_JSON_KEY, "")
    values = text.str.extract_all(_JSON_STRING).list.join(" ")
    values = values.str.replace_all(r"\\u[0-9a-fA-F]{4}", "u").str.replace_all(r"\\.", " ")
    return values.str.count_matches(r"\w").fill_null(0) < EMPTY_THOUGHT_CHARS


def _path_key(paths: pl.Expr) -> pl.Expr:
    """Files are matched by name: an edit of ``/testbed/pkg/a.py`` is read back by ``cat a.py``."""
    return paths.str.replace(r"^.*/", "")


def _readback(behaviour: pl.DataFrame) -> pl.DataFrame:
    """Edit calls followed within READBACK_WINDOW calls by a view of a file of the same name as
    one the edit changed (``edited_paths``: ``cp a b`` changes ``b``, not ``a``; calls classified
    before that column existed are matched on every path they name)."""
    def exploded(rows: pl.DataFrame, column: str) -> pl.DataFrame:
        return (
            rows.select(*KEYS, "ordinal", column).explode(column)
            .filter(pl.col(column).is_not_null())
            .select(*KEYS, "ordinal", _path_key(pl.col(column)).alias("file"))
            .unique()
        )

    changed = "edited_paths" if "edited_paths" in behaviour.columns else "paths"
    edits = exploded(behaviour.filter(pl.col("is_edit")), changed)
    views = exploded(behaviour.filter(pl.col("action_classes").list.contains("view")), "paths").rename(
        {"ordinal": "view_ordinal"})
    gap = pl.col("view_ordinal") - pl.col("ordinal")
    read = edits.join(views, on=[*KEYS, "file"]).filter((gap >= 1) & (gap <= READBACK_WINDOW))
    return read.select(*KEYS, "ordinal").unique().group_by(list(KEYS)).len(name="n_readback")


def _first_verification(behaviour: pl.DataFrame) -> pl.DataFrame:
    first = behaviour.filter(pl.col("primary_class").is_in(list(VERIFICATION_CLASSES)))
    return first.group_by(list(KEYS)).agg(
        pl.col("call_index").first().cast(pl.Int64).alias("first_verification_call"),
        pl.col("ordinal").first().alias("first_verification_ordinal"),
    )
